// Client: the C++ client of the transposed daemon, for batch jobs and tools.
//
// A Client holds one gRPC channel to a daemon and exposes the service's calls with
// transposed::Status errors (the gRPC status is converted here, code and message kept). Every call
// has a deadline of ClientOptions::deadline_seconds; a cache miss tunes on the daemon, which can
// take a while, so keep the deadline generous. A Client is thread-safe: any number of threads may
// call its methods concurrently (they share the channel); it must outlive the calls.
//
// How a batch job uses it together with the kernel library
// (kernels/include/transposed/kernels/{config,launch}.h):
//
//   TR_ASSIGN_OR_RETURN(auto client, transposed::Client::Connect("127.0.0.1:50051", {}));
//   transposed::Problem problem;
//   problem.rows = 4096, problem.cols = 8192, problem.dtype = transposed::DType::kF32;
//   // ANSWER_NOW: never waits for a tune (an untuned problem gets a valid configuration at once
//   // and is tuned in the background); the default policy, TUNE_IF_MISSING, waits for it.
//   TR_ASSIGN_OR_RETURN(transposed::v1::Answer answer,
//                       client->GetConfig(problem, transposed::DeviceByIndex(0),
//                                         transposed::v1::ANSWER_NOW));
//   // The answer names the fastest variant for this problem on this device; the parameters
//   // rebuild the kernel configuration (FromName(answer.variant().name()) works as well).
//   TR_ASSIGN_OR_RETURN(auto config, transposed::kernels::TransposeConfig::FromParams(
//                                        transposed::VariantParams(answer.variant())));
//   TR_RETURN_IF_ERROR(transposed::kernels::Launch(config, problem, d_in, d_out, stream));
//
// Ask once per distinct problem and keep the config: after the first tune an answer comes from
// the daemon's cache in well under a millisecond, but there is no reason to ask per launch.
// client/example_batch_job.cc is a complete program doing this.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/status.h"
#include "proto/grpc_status.h"    // FromGrpcStatus
#include "proto/problem_proto.h"  // ProblemToProto, ProblemFromProto
#include "transposed/v1/transposed.grpc.pb.h"
#include "transposed/v1/transposed.pb.h"

namespace grpc {
class Channel;
class ChannelCredentials;
class Status;
}  // namespace grpc

namespace transposed {

struct ClientOptions {
  // Deadline of every call, in seconds (> 0). A Tune or a GetConfig that misses tunes.
  double deadline_seconds = 600;
  // false: a call fails at once with UNAVAILABLE when the daemon cannot be reached.
  // true: a call waits (up to its deadline) for the daemon to come up.
  bool wait_for_ready = false;
  // Transport security. With `tls` (implied by tls_ca_file or tls_cert_file) the channel is TLS,
  // the daemon's certificate checked against tls_ca_file (PEM; empty: the system's roots);
  // tls_cert_file + tls_key_file present a client certificate (mutual TLS). tls_server_name
  // overrides the name the certificate must carry (default: the host of the address).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // The daemon's admin token (Tune, DeleteEntries), sent as "authorization: Bearer <token>" on
  // every call; empty: none.
  std::string token;
};



// The channel credentials of `options` (insecure, TLS or mutual TLS; the certificate files read
// now): what Client::Connect uses, and the daemon for its --peer channels. INVALID_ARGUMENT naming
// the field when a file cannot be read or only one of cert/key is given.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientOptions& options);

// Device selectors: by index (as listed by ListDevices) or by UUID. DeviceFromString parses
// what a user types: all digits is an index, anything else a UUID.
v1::DeviceSelector DeviceByIndex(int32_t index);
v1::DeviceSelector DeviceByUuid(const std::string& uuid);
v1::DeviceSelector DeviceFromString(const std::string& text);

// The variant's parameters as the std::map that kernels::TransposeConfig::FromParams takes.
std::map<std::string, int64_t> VariantParams(const v1::Variant& variant);

class Client {
 public:
  using ProgressCallback = std::function<void(const v1::TuneProgress&)>;

  // Creates a channel to `address` ("host:port", or any gRPC target such as "unix:/path").
  // Does not wait for the daemon: an unreachable daemon shows as UNAVAILABLE on the first call
  // (or, with wait_for_ready, as DEADLINE_EXCEEDED). Fails on an empty address or bad options.
  static StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                                   ClientOptions options = {});

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Waits up to `seconds` for the channel to be connected: UNAVAILABLE if it is not by then.
  Status WaitForConnected(double seconds);

  // The best configuration for a problem (its device selector included): from the cache, or
  // tuned now (TUNE_IF_MISSING; concurrent requests for one problem share one tune).
  StatusOr<v1::Answer> GetConfig(const v1::Problem& problem,
                                 v1::CachePolicy policy = v1::TUNE_IF_MISSING);
  StatusOr<v1::Answer> GetConfig(const Problem& problem,
                                 const v1::DeviceSelector& device = v1::DeviceSelector(),
                                 v1::CachePolicy policy = v1::TUNE_IF_MISSING);

  // Tunes (always, cache or not) and stores the winner. `on_progress` (may be empty) is called
  // on the calling thread for each message as it streams in, the final answer included; the
  // answer is also returned.
  StatusOr<v1::Answer> Tune(const v1::TuneRequest& request,
                            const ProgressCallback& on_progress = nullptr);

  // Pre-tunes a list of problems (at most kMaxTuneManyProblems, proto/problem_proto.h): cached
  // ones are skipped, the others tuned one after the other (request.force: all re-tuned, admin).
  // `on_progress` sees every message on the calling thread as it streams in (each problem's
  // candidates, then its answer or error); an error it returns cancels the call and is returned.
  // OK when the stream ended OK (a problem that failed is in its error message).
  Status TuneMany(const v1::TuneManyRequest& request,
                  const std::function<Status(const v1::TuneManyProgress&)>& on_progress);

  StatusOr<std::vector<v1::Device>> ListDevices();
  // Every entry matching the request, fetching page after page (request.limit caps the total;
  // 0: all).
  StatusOr<std::vector<v1::Entry>> ListEntries(const v1::ListEntriesRequest& request);
  // One page as the daemon answers it (next_page_token continues).
  StatusOr<v1::ListEntriesResponse> ListEntryPage(const v1::ListEntriesRequest& request);
  // Returns the number of entries deleted.
  StatusOr<int64_t> DeleteEntries(const v1::DeleteEntriesRequest& request);
  // Streams every stored entry (of one device class when set) to `on_entry`, on the calling
  // thread; returns how many there were. An error from `on_entry` cancels the call and is returned.
  StatusOr<int64_t> ExportEntries(const v1::ExportEntriesRequest& request,
                                  const std::function<Status(const v1::ExportedEntry&)>& on_entry);
  StatusOr<v1::ImportEntriesResponse> ImportEntries(const v1::ImportEntriesRequest& request);

  const std::string& address() const { return address_; }

 private:
  Client(std::string address, ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  // Applies the deadline and wait_for_ready to a fresh context.
  void Prepare(grpc::ClientContext* context) const;
  // One unary call of the stub on a prepared context: its response, or its status.
  template <typename Request, typename Response>
  StatusOr<Response> Call(grpc::Status (v1::Transposer::Stub::*method)(grpc::ClientContext*,
                                                                       const Request&, Response*),
                          const Request& request);
  // One server-streaming call on a prepared context: every message to on_message (Status
  // on_message(const Message&)); a non-OK Status from it cancels the call and is returned, else
  // the stream's own status.
  template <typename Request, typename Message, typename OnMessage>
  Status ReadStream(std::unique_ptr<grpc::ClientReader<Message>> (v1::Transposer::Stub::*method)(
                        grpc::ClientContext*, const Request&),
                    const Request& request, OnMessage&& on_message);

  const std::string address_;
  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Transposer::Stub> stub_;
};

}  // namespace transposed
