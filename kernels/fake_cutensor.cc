// A stand-in for libcutensor, test-only (never installed): the cuTENSOR 2.x symbols that
// cutensor.permute calls (kernels/cutensor_api.h), with the same signatures, which record each
// call in a log instead of touching a GPU. vendor.cc's loader and call sequence are tested with it
// (launch_test.cc) on machines without cuTENSOR, which are all of ours.
//
// FAKE_CUTENSOR_VERSION (a compile definition) is what cutensorGetVersion() returns.
// Test hooks: fake_cutensor_log() (one line per call), fake_cutensor_reset(),
// fake_cutensor_fail(name, status) (the next call of `name` returns `status`),
// fake_cutensor_live() (objects made and not yet destroyed). Not thread-safe (tests call it from
// one thread).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#ifndef FAKE_CUTENSOR_VERSION
#error "FAKE_CUTENSOR_VERSION must be defined"
#endif

namespace {

struct Compute {
  const char* name;
};
Compute g_compute_32f{"32F"};
Compute g_compute_64f{"64F"};

struct Handle {
  int id;
};
struct Tensor {
  int id;
  int type;
};
struct Op {
  int id;
  int type;
};
struct Pref {
  int id;
};
struct Plan {
  int id;
  int type;
};

std::string g_log;
std::string g_fail;
int g_fail_status = 0;
int g_next_id = 0;
int g_live = 0;

void Log(const std::string& line) { g_log += line + "\n"; }

// Whether the call `fn` is to fail now (once).
bool Failing(const char* fn, int* status) {
  if (g_fail != fn) return false;
  g_fail.clear();
  *status = g_fail_status;
  Log(std::string(fn) + " fails with " + std::to_string(g_fail_status));
  return true;
}

std::string List(const int64_t* v, uint32_t n) {
  std::string s = "[";
  for (uint32_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string Modes(const int32_t* m, uint32_t n) {
  std::string s;
  for (uint32_t i = 0; i < n; ++i) s += static_cast<char>(m[i]);
  return s;
}

std::string Ptr(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

uint32_t g_modes = 0;  // of the last tensor made (A and B have the same number of modes)

}  // namespace

extern "C" {

// Exported variables, as cutensor/types.h declares them (`extern const
// cutensorComputeDescriptor_t CUTENSOR_COMPUTE_DESC_32F;`).
extern Compute* const CUTENSOR_COMPUTE_DESC_32F;
extern Compute* const CUTENSOR_COMPUTE_DESC_64F;
Compute* const CUTENSOR_COMPUTE_DESC_32F = &g_compute_32f;
Compute* const CUTENSOR_COMPUTE_DESC_64F = &g_compute_64f;

size_t cutensorGetVersion() { return FAKE_CUTENSOR_VERSION; }

const char* cutensorGetErrorString(int status) {
  return status == 15 ? "FAKE_STATUS_NOT_SUPPORTED" : "FAKE_STATUS_OTHER";
}

int cutensorCreate(Handle** h) {
  int rc = 0;
  if (Failing("cutensorCreate", &rc)) return rc;
  *h = new Handle{++g_next_id};
  ++g_live;
  Log("create h" + std::to_string((*h)->id));
  return 0;
}

int cutensorDestroy(Handle* h) {
  Log("destroy h" + std::to_string(h->id));
  delete h;
  --g_live;
  return 0;
}

int cutensorCreateTensorDescriptor(Handle* h, Tensor** desc, uint32_t numModes,
                                   const int64_t extent[], const int64_t stride[], int dataType,
                                   uint32_t alignmentRequirement) {
  int rc = 0;
  if (Failing("cutensorCreateTensorDescriptor", &rc)) return rc;
  *desc = new Tensor{++g_next_id, dataType};
  ++g_live;
  g_modes = numModes;
  Log("tensor t" + std::to_string((*desc)->id) + " h" + std::to_string(h->id) +
      " modes=" + std::to_string(numModes) + " extent=" + List(extent, numModes) +
      " stride=" + List(stride, numModes) + " type=" + std::to_string(dataType) +
      " align=" + std::to_string(alignmentRequirement));
  return 0;
}

int cutensorDestroyTensorDescriptor(Tensor* desc) {
  Log("destroy t" + std::to_string(desc->id));
  delete desc;
  --g_live;
  return 0;
}

int cutensorCreatePermutation(Handle* h, Op** desc, Tensor* descA, const int32_t modeA[], int opA,
                              Tensor* descB, const int32_t modeB[], Compute* descCompute) {
  int rc = 0;
  if (Failing("cutensorCreatePermutation", &rc)) return rc;
  *desc = new Op{++g_next_id, descA->type};
  ++g_live;
  const char* compute = descCompute == &g_compute_32f   ? "32F"
                        : descCompute == &g_compute_64f ? "64F"
                                                        : "unknown";
  Log("permutation o" + std::to_string((*desc)->id) + " h" + std::to_string(h->id) + " A=t" +
      std::to_string(descA->id) + " " + Modes(modeA, g_modes) + " op=" + std::to_string(opA) +
      " B=t" + std::to_string(descB->id) + " " + Modes(modeB, g_modes) + " compute=" + compute);
  return 0;
}

int cutensorDestroyOperationDescriptor(Op* desc) {
  Log("destroy o" + std::to_string(desc->id));
  delete desc;
  --g_live;
  return 0;
}

int cutensorCreatePlanPreference(Handle* h, Pref** pref, int algo, int jitMode) {
  int rc = 0;
  if (Failing("cutensorCreatePlanPreference", &rc)) return rc;
  *pref = new Pref{++g_next_id};
  ++g_live;
  Log("preference p" + std::to_string((*pref)->id) + " h" + std::to_string(h->id) +
      " algo=" + std::to_string(algo) + " jit=" + std::to_string(jitMode));
  return 0;
}

int cutensorDestroyPlanPreference(Pref* pref) {
  Log("destroy p" + std::to_string(pref->id));
  delete pref;
  --g_live;
  return 0;
}

int cutensorCreatePlan(Handle* h, Plan** plan, Op* desc, Pref* pref, uint64_t workspaceSizeLimit) {
  int rc = 0;
  if (Failing("cutensorCreatePlan", &rc)) return rc;
  *plan = new Plan{++g_next_id, desc->type};
  ++g_live;
  Log("plan P" + std::to_string((*plan)->id) + " h" + std::to_string(h->id) + " o" +
      std::to_string(desc->id) + " p" + std::to_string(pref->id) +
      " workspace=" + std::to_string(workspaceSizeLimit));
  return 0;
}

int cutensorDestroyPlan(Plan* plan) {
  Log("destroy P" + std::to_string(plan->id));
  delete plan;
  --g_live;
  return 0;
}

// alpha read as the scalar type of the plan's data type: float for CUDA_R_32F (0), double for
// CUDA_R_64F (1).
int cutensorPermute(Handle* h, Plan* plan, const void* alpha, const void* A, void* B,
                    void* stream) {
  int rc = 0;
  if (Failing("cutensorPermute", &rc)) return rc;
  char a[64];
  if (plan->type == 1)
    std::snprintf(a, sizeof(a), "%g (double)", *static_cast<const double*>(alpha));
  else
    std::snprintf(a, sizeof(a), "%g (float)", *static_cast<const float*>(alpha));
  Log("permute P" + std::to_string(plan->id) + " h" + std::to_string(h->id) + " alpha=" + a +
      " A=" + Ptr(A) + " B=" + Ptr(B) + " stream=" + Ptr(stream));
  return 0;
}

const char* fake_cutensor_log() { return g_log.c_str(); }
void fake_cutensor_reset() {
  g_log.clear();
  g_fail.clear();
  g_next_id = 0;
}
void fake_cutensor_fail(const char* fn, int status) {
  g_fail = fn;
  g_fail_status = status;
}
int fake_cutensor_live() { return g_live; }

}  // extern "C"
