// GrpcTransposer: the transposed.v1.Transposer gRPC service (sync API), a thin shell around
// TransposeService.
//
// Each handler converts the request (server/convert.h), calls the service, converts the answer or
// the Status (proto/grpc_status.h, the only place that maps codes) and logs one info line:
//   rpc=GetConfig problem=<Problem::ToString> device=<idx> source=cache|tuned latency_ms=<x>
//       status=OK|<CODE: message>
// Tune streams one TuneProgress per candidate result as it completes (written from the RPC's own
// thread; the service hands results over from its device worker), then the final Answer. A
// client that goes away (context->IsCancelled()) or a failed write cancels the request.
//
// Thread-safety: gRPC calls the handlers from many threads at once; the only state of its own is
// an atomic count of running handlers (for a graceful shutdown), and TransposeService is
// thread-safe. The service must outlive this object.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "server/service.h"
#include "transposed/v1/transposed.grpc.pb.h"

namespace transposed {

class GrpcTransposer final : public ::transposed::v1::Transposer::Service {
 public:
  explicit GrpcTransposer(TransposeService* service) : service_(service) {}

  grpc::Status GetConfig(grpc::ServerContext* context, const v1::GetConfigRequest* request,
                         v1::Answer* response) override;
  grpc::Status Tune(grpc::ServerContext* context, const v1::TuneRequest* request,
                    grpc::ServerWriter<v1::TuneProgress>* writer) override;
  grpc::Status ListDevices(grpc::ServerContext* context, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override;
  grpc::Status ListEntries(grpc::ServerContext* context, const v1::ListEntriesRequest* request,
                           v1::ListEntriesResponse* response) override;
  grpc::Status DeleteEntries(grpc::ServerContext* context, const v1::DeleteEntriesRequest* request,
                             v1::DeleteEntriesResponse* response) override;

  // Handlers running right now. The daemon waits for this to reach 0 (after cancelling tunes)
  // before it stops the server, so that answers already computed still reach their clients.
  int inflight() const { return inflight_.load(); }

 private:
  class InflightGuard;
  TransposeService* const service_;
  std::atomic<int> inflight_{0};
};

}  // namespace transposed
