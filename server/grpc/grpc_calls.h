// The life of one GrpcTransposer call (server/grpc/grpc_service.h), shared by the files that
// implement its RPCs: `Call`, the CRTP base of every reactor call class (keeps itself alive until
// gRPC's OnDone, counts in inflight(), gives its limiter slot back, holds the service's waiter),
// and `StreamCall`, the queued writer of a server stream (Tune and TuneMany). Also the pieces of
// a call's log note that more than one RPC writes. Private to transposed_grpc_service: include it
// only from grpc_service.cc and tune_rpcs.cc.
//
// Thread-safety: a call is driven by gRPC's threads and the service's callbacks at once; Call's
// waiter and StreamCall's queue are guarded by their own mutexes (annotated), the rest is set
// before the call is shared and read only.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/mutex.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "proto/grpc_status.h"
#include "server/grpc/grpc_service.h"

namespace transposed {

// How a request named its device, for the log line when there is no answer to take it from.
std::string DescribeSelector(const v1::DeviceSelector& s);
// The problem as the log shows it: the parsed problem, or the raw fields when it did not parse.
std::string DescribeProblem(const StatusOr<Problem>& parsed, const v1::Problem& raw);
// The status of a call whose client went away (its work goes on and is stored).
const Status& ClientGone();

// The life of one call, the same for every call class (CRTP over its gRPC reactor): Start makes
// the Derived call, which keeps itself alive (self_) until gRPC's OnDone, and hands the request
// (and gRPC's response, for a unary call) to Derived::Begin; the call counts in the daemon's
// inflight() from construction to OnDone and gives its limiter slot back there. It holds the
// service's waiter of the work in flight, so that a client that goes away detaches from it. A
// Derived class befriends its Call (Start reaches its constructor and Begin).
template <typename Derived, typename Reactor>
class GrpcTransposer::Call : public Reactor {
 public:
  template <typename Request, typename... More>
  static Reactor* Start(GrpcTransposer* owner, grpc::CallbackServerContext* context,
                        const Request& request, More... more) {
    std::shared_ptr<Derived> call(new Derived(owner, context));
    call->self_ = call;
    call->Begin(request, more...);
    return call.get();
  }

  void OnDone() override {
    slot_.Release();
    owner_->inflight_.fetch_sub(1);
    self_.reset();  // may delete this
  }

 protected:
  Call(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : owner_(owner), context_(context) {
    owner_->inflight_.fetch_add(1);
  }

  // Holds the waiter of the work just started (replacing the one held before): false, and
  // detached here, when the client has already gone.
  bool HoldWaiter(std::shared_ptr<Waiter> waiter) EXCLUDES(waiter_mu_) {
    {
      MutexLock l(&waiter_mu_);
      if (!left_) {
        waiter_ = std::move(waiter);
        return true;
      }
    }
    owner_->service_->Detach(waiter);
    return false;
  }

  // The client has gone: detaches the waiter held, and any held from now on.
  void DetachWaiter() EXCLUDES(waiter_mu_) {
    std::shared_ptr<Waiter> waiter;
    {
      MutexLock l(&waiter_mu_);
      left_ = true;
      waiter.swap(waiter_);
    }
    owner_->service_->Detach(waiter);
  }

  GrpcTransposer* const owner_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<Derived> self_;  // set in Start, dropped in OnDone
  CallLimiter::Slot slot_;         // taken by Derived::Begin, given back by OnDone

 private:
  Mutex waiter_mu_;
  bool left_ GUARDED_BY(waiter_mu_) = false;  // the client has gone
  std::shared_ptr<Waiter> waiter_ GUARDED_BY(waiter_mu_);
};

// A server stream fed from other threads (device tune threads): messages are queued and written one
// at a time (gRPC allows one write in flight); the end (an answer and a status, or an error) is
// decided once and finishes the stream after everything queued before it. A client that goes
// away (a failed write, a cancellation, a passed deadline) drops what is not written yet and
// ends the stream CANCELLED. Every gRPC operation is started outside mu_, decided under it.
// Its life is a Call's.
template <typename Derived, typename Msg>
class GrpcTransposer::StreamCall : public Call<Derived, grpc::ServerWriteReactor<Msg>> {
 public:
  void OnWriteDone(bool ok) override {
    if (!ok) {
      ClientLeft(/*write_done=*/true);  // the stream is broken: the client is gone
      return;
    }
    {
      MutexLock l(&mu_);
      writing_ = false;
      pending_.pop_front();
      ++written_;
    }
    Pump();
  }

  void OnCancel() override { ClientLeft(/*write_done=*/false); }

 protected:
  StreamCall(GrpcTransposer* owner, grpc::CallbackServerContext* context)
      : Call<Derived, grpc::ServerWriteReactor<Msg>>(owner, context) {}

  // Queues a message; false (dropped) once the end is decided.
  bool Enqueue(Msg msg) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return false;
      pending_.push_back(std::move(msg));
    }
    Pump();
    return true;
  }

  // Whether the end is decided (End, or the client left): nothing more is written, and a call
  // that feeds the stream from other work (TuneMany) starts none.
  bool Ended() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    return final_.has_value();
  }

  // Decides the end: `last` (if any) after everything queued, then `status`. Only the first
  // decision counts.
  void End(const Status& status, std::optional<Msg> last = std::nullopt) EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      if (final_.has_value()) return;
      if (last.has_value()) pending_.push_back(std::move(*last));
      final_ = status;
    }
    Pump();
  }

  // The client went away: stop feeding the stream (detach from the service). Called once,
  // without mu_ held.
  virtual void OnClientLeft() = 0;
  // Leaves the call's note for the log line; called once, right before the stream finishes,
  // without mu_ held. `written`: messages written.
  virtual void OnFinishing(int written) = 0;

 private:
  // Drops what is not written yet (the write in flight stays until OnWriteDone) and ends the
  // stream CANCELLED.
  void ClientLeft(bool write_done) EXCLUDES(mu_) {
    bool first = false;
    {
      MutexLock l(&mu_);
      if (write_done) writing_ = false;
      while (pending_.size() > (writing_ ? 1u : 0u)) pending_.pop_back();
      first = !client_left_;
      client_left_ = true;
      final_ = ClientGone();
    }
    if (first) OnClientLeft();
    Pump();
  }

  // Starts the next write, or finishes once everything is written.
  void Pump() EXCLUDES(mu_) {
    const Msg* write = nullptr;
    std::optional<Status> finish;
    int written = 0;
    {
      MutexLock l(&mu_);
      if (writing_ || finished_) return;
      if (!pending_.empty()) {
        writing_ = true;
        write = &pending_.front();  // a deque keeps it in place while more are pushed
      } else if (final_.has_value()) {
        finished_ = true;
        finish = *final_;
        written = written_;
      }
    }
    if (write != nullptr) this->StartWrite(write);
    if (finish.has_value()) {
      OnFinishing(written);
      this->Finish(ToGrpcStatus(*finish));
    }
  }

  Mutex mu_;
  std::deque<Msg> pending_ GUARDED_BY(mu_);  // front: the write in flight
  bool writing_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  bool client_left_ GUARDED_BY(mu_) = false;
  std::optional<Status> final_ GUARDED_BY(mu_);  // how the stream ends, once known
  int written_ GUARDED_BY(mu_) = 0;
};

}  // namespace transposed
