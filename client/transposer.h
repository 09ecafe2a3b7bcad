// Transposer: a batch job's transposes with the daemon's answers and prepared launches.
//
// A Transposer asks the daemon once per distinct problem (through a Client, or any `Ask`
// function), prepares the answered variant once (kernels::PreparedLaunch: parsed, checked, looked
// up), and then launches the cached plan: a repeated Transpose() costs a hash lookup, the pointer
// checks and the kernel launch (no string, no allocation, no RPC). An answer that is not final
// (SOURCE_NEAREST / SOURCE_HEURISTIC: the daemon answered at once and tunes in the background) is
// asked for again after Options::refresh_seconds, so the tuned winner replaces it.
//
//   TR_ASSIGN_OR_RETURN(auto client, transposed::Client::Connect("127.0.0.1:50051"));
//   TR_ASSIGN_OR_RETURN(auto t, transposed::Transposer::ForDevice(client.get(), /*cuda=*/0));
//   TR_RETURN_IF_ERROR(t->Transpose(problem, d_in, d_out, stream));   // asks the first time
//
// Pointers must be aligned as the variant needs (cudaMalloc's are; kernels::PointerAlignment):
// otherwise INVALID_ARGUMENT before any CUDA call. A failed ask is not cached (asked again on the
// next call). Plans are bounded (Options::max_plans; past it, all are dropped and asked again).
//
// Thread-safe: any number of threads may call Prepare/Transpose at once (plans are immutable,
// shared; the map is guarded; no lock is held while asking the daemon, so a problem that tunes
// never delays another problem's launches). Two threads that miss the same problem at once may
// both ask. The Client (if any) must outlive the Transposer. Needs CUDA (TRANSPOSED_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "client/client.h"
#include "core/mutex.h"
#include "core/problem.h"
#include "core/status.h"
#include "transposed/kernels/launch.h"

namespace transposed {

struct TransposerOptions {
  // The policy of every ask; ANSWER_NOW never waits for a tune.
  v1::CachePolicy policy = v1::ANSWER_NOW;
  // A provisional answer is asked for again after this many seconds.
  double refresh_seconds = 1.0;
  // At most this many plans are kept (>= 1).
  size_t max_plans = 4096;
};

class Transposer {
 public:
  using Options = TransposerOptions;

  // One problem's cached answer and its prepared launch.
  struct Plan {
    v1::Answer answer;  // the daemon's answer (variant, gbps, source)
    kernels::PreparedLaunch launch;
    bool final = false;  // a measured winner (cache, tuned, peer, shared): never asked again
    std::chrono::steady_clock::time_point asked;
  };

  // How a Transposer asks for a problem's answer (a Client's GetConfig with a device selector,
  // or anything else that answers like the daemon).
  using Ask = std::function<StatusOr<v1::Answer>(const Problem& p, v1::CachePolicy policy)>;

  // Asks `client` for the daemon's device with the UUID of CUDA device `cuda_device` (the
  // devices of this process, cudaGetDeviceProperties), launches there.
  static StatusOr<std::unique_ptr<Transposer>> ForDevice(Client* client, int cuda_device,
                                                         Options options = {});
  // Asks `client` for the daemon's device `device` (by index or UUID), launches on CUDA device
  // `cuda_device` (the caller says they are the same GPU).
  static StatusOr<std::unique_ptr<Transposer>> ForSelector(Client* client,
                                                           const v1::DeviceSelector& device,
                                                           int cuda_device, Options options = {});
  // Asks through `ask`, launches on CUDA device `cuda_device`.
  static StatusOr<std::unique_ptr<Transposer>> WithAsk(Ask ask, int cuda_device,
                                                       Options options = {});

  // The plan of `p`: cached, else asked (a provisional one again after refresh_seconds) and
  // prepared. INVALID_ARGUMENT for a bad problem (nothing asked), FAILED_PRECONDITION for an
  // answer that is not a CUDA variant, the ask's own error otherwise.
  StatusOr<std::shared_ptr<const Plan>> Prepare(const Problem& p);

  // Transposes `in` into `out` (device pointers laid out as core/problem.h says) on `stream`
  // (of this Transposer's CUDA device), asynchronously, with the plan of `p`.
  Status Transpose(const Problem& p, const void* in, void* out, cudaStream_t stream);

  // How many times the daemon was asked (answers, errors included).
  int64_t asks() const;
  int cuda_device() const { return cuda_device_; }

 private:
  Transposer(Ask ask, int cuda_device, Options options);
  struct ProblemHash {
    size_t operator()(const Problem& p) const;
  };
  StatusOr<std::shared_ptr<const Plan>> AskAndPrepare(const Problem& p);

  const Ask ask_;
  const int cuda_device_;
  const Options options_;
  mutable Mutex mu_;
  std::unordered_map<Problem, std::shared_ptr<const Plan>, ProblemHash> plans_ GUARDED_BY(mu_);
  int64_t asks_ GUARDED_BY(mu_) = 0;
};

}  // namespace transposed
