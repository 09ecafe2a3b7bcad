// GrpcTransposer: the transposed.v1.Transposer gRPC service on the callback API, a thin shell
// around TransposeService.
//
// Each handler converts the request (server/grpc/convert.h), calls the service, converts the answer or
// the Status (proto/grpc_status.h, the only place that maps codes) and leaves a note (problem,
// device, source) for the log line that the interceptor (server/grpc/rpc_interceptor.h) writes.
//
// GetConfig is served raw (its request parsed here, on one arena per call): a cache hit is answered
// with the encoded Answer kept for its stored entry (server/grpc/hit_answers.h), so a hit builds,
// copies and serialises no message; every other answer is built and serialised per call.
//
// GetConfig and Tune are reactors: no thread waits while a tune runs. The service answers them
// through a callback (on the device's tune thread, or at once on a cache hit) and they finish
// then. Tune writes one TuneProgress per candidate result as it completes (one write in flight,
// the rest queued), then the final Answer. A client that goes away, or whose deadline passes,
// detaches from its tune (TransposeService::Detach): the RPC ends CANCELLED at once, the tune runs
// to the end and is stored, so a later request finds the answer in the cache.
//
// TuneMany validates its whole list first (INVALID_ARGUMENT "problems[3].rows: ..."; nothing
// starts), then takes the problems one at a time, each after the previous one's answer, so a call
// holds at most one place in a device's tune queue: a cached problem is answered at once
// (skipped), a missing one joins or queues its tune as a GetConfig miss (with force: as a Tune,
// behind the admin check) and streams its candidates, then its answer or error. A client that goes
// away detaches from the problem in flight (its tune is stored) and the rest are dropped.
//
// Thread-safety: gRPC calls the handlers and reactions from many threads at once; the state of
// this object is an atomic count of live GetConfig/Tune/TuneMany calls (for a graceful shutdown)
// and the thread-safe HitAnswers, and TransposeService is thread-safe. The service (and the notes) must outlive this
// object and the server.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <vector>

#include "server/grpc/call_limiter.h"
#include "server/grpc/hit_answers.h"
#include "server/grpc/rpc_interceptor.h"
#include "server/grpc/security.h"
#include "server/service.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {

class GrpcTransposer final
    : public ::transposed::v1::Transposer::WithRawCallbackMethod_GetConfig<
          ::transposed::v1::Transposer::CallbackService> {
 public:
  // `notes` (optional) receives each call's note for the interceptor's log line.
  // `gate` decides who may call the admin RPCs (server/grpc/security.h); the default admits loopback
  // peers only. `limiter` (optional, must outlive this object) caps the GetConfig, Tune and TuneMany calls
  // open at once per client and in total (server/grpc/call_limiter.h).
  explicit GrpcTransposer(TransposeService* service, RpcNotes* notes = nullptr,
                          AdminGate gate = AdminGate(), CallLimiter* limiter = nullptr);
  ~GrpcTransposer() override;

  // A transposed.v1.GetConfigRequest in, a transposed.v1.Answer out (served raw, see above).
  grpc::ServerUnaryReactor* GetConfig(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<v1::TuneProgress>* Tune(grpc::CallbackServerContext* context,
                                                   const v1::TuneRequest* request) override;
  // Pre-tunes a list of problems one after the other (cached ones skipped; force: re-tuned, admin),
  // streaming each one's candidates and answer or error.
  grpc::ServerWriteReactor<v1::TuneManyProgress>* TuneMany(
      grpc::CallbackServerContext* context, const v1::TuneManyRequest* request) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* ListEntries(grpc::CallbackServerContext* context,
                                        const v1::ListEntriesRequest* request,
                                        v1::ListEntriesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteEntries(grpc::CallbackServerContext* context,
                                          const v1::DeleteEntriesRequest* request,
                                          v1::DeleteEntriesResponse* response) override;
  // Admin: every stored entry (of one device class), with all candidates.
  grpc::ServerWriteReactor<v1::ExportedEntry>* ExportEntries(
      grpc::CallbackServerContext* context, const v1::ExportEntriesRequest* request) override;
  // Admin: merges exported entries (validated row by row; faster winner kept).
  grpc::ServerUnaryReactor* ImportEntries(grpc::CallbackServerContext* context,
                                          const v1::ImportEntriesRequest* request,
                                          v1::ImportEntriesResponse* response) override;

  // The most rows one ImportEntries call takes.
  static constexpr int kMaxImportBatch = 1000;

  // GetConfig, Tune and TuneMany calls not yet done. The daemon waits for this to reach 0 (after
  // cancelling tunes) before it stops the server, so that answers already computed still reach
  // their clients.
  int inflight() const { return inflight_.load(); }

 private:
  template <typename Derived, typename Reactor>
  class Call;
  template <typename Derived, typename Msg>
  class StreamCall;
  class GetConfigCall;
  class TuneCall;
  class TuneManyCall;

  // Ends a unary call answered on the calling thread: the default reactor, finished with `status`.
  static grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                             const Status& status);
  // routine: the call's log line at debug (a cache hit).
  void Note(const grpc::ServerContextBase* context, std::string note, bool routine = false) {
    if (notes_ != nullptr) notes_->Note(context, RpcNote{std::move(note), routine});
  }

  // The admin check of one call (AdminGate): OK, or the status to answer (logged here).
  Status Authorize(const char* method, const grpc::CallbackServerContext* context) const;
  // Takes the call's place from the limiter into *slot: OK, or the status to answer (logged).
  Status Admit(const char* method, const grpc::CallbackServerContext* context,
               CallLimiter::Slot* slot) const;

  // The Answer message of a GetConfig answer (the stored entry of a shared hit included).
  void AnswerMessage(const ConfigAnswer& answer, v1::Answer* out) const;
  // The encoded Answer of a shared cache hit (answer.stored): the one kept, else made (its
  // message on `arena`) and kept.
  grpc::Slice HitBytes(const ConfigAnswer& answer, google::protobuf::Arena* arena);

  TransposeService* const service_;
  const std::vector<DeviceInfo> devices_;  // the service's (index = device)
  // The same as Device messages, converted once: most answers are cache hits of these devices.
  const std::vector<v1::Device> device_protos_;
  HitAnswers hit_answers_;
  RpcNotes* const notes_;
  const AdminGate gate_;
  CallLimiter* const limiter_;
  std::atomic<int> inflight_{0};
};

}  // namespace transposed
