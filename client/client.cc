#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

namespace transposed {
namespace {

std::chrono::system_clock::time_point DeadlineAfter(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::InvalidArgument(std::string(what) + ": cannot read " + path + ": " +
                                   std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const ClientOptions& o) {
  if (!o.tls && o.tls_ca_file.empty() && o.tls_cert_file.empty())
    return grpc::InsecureChannelCredentials();
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return Status::InvalidArgument("tls_cert_file and tls_key_file: give both or neither");
  grpc::SslCredentialsOptions ssl;
  if (!o.tls_ca_file.empty()) {
    TR_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(o.tls_ca_file, "tls_ca_file"));
  }
  if (!o.tls_cert_file.empty()) {
    TR_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadWholeFile(o.tls_cert_file, "tls_cert_file"));
    TR_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadWholeFile(o.tls_key_file, "tls_key_file"));
  }
  return grpc::SslCredentials(ssl);
}

std::map<std::string, int64_t> VariantParams(const v1::Variant& variant) {
  return std::map<std::string, int64_t>(variant.params().begin(), variant.params().end());
}

v1::DeviceSelector DeviceByIndex(int32_t index) {
  v1::DeviceSelector d;
  d.set_index(index);
  return d;
}

v1::DeviceSelector DeviceByUuid(const std::string& uuid) {
  v1::DeviceSelector d;
  d.set_uuid(uuid);
  return d;
}

v1::DeviceSelector DeviceFromString(const std::string& text) {
  bool digits = !text.empty() && text.size() <= 9;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  if (digits) return DeviceByIndex(std::stoi(text));
  return DeviceByUuid(text);
}

StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                  ClientOptions options) {
  if (address.empty()) return Status::InvalidArgument("address: must not be empty");
  if (!(options.deadline_seconds > 0) || !std::isfinite(options.deadline_seconds)) {
    return Status::InvalidArgument("deadline_seconds: must be a positive number of seconds, got " +
                                   std::to_string(options.deadline_seconds));
  }
  grpc::ChannelArguments args;
  // Answers carry candidate lists (ListEntries with candidates): allow large messages.
  args.SetMaxReceiveMessageSize(-1);
  if (!options.tls_server_name.empty())
    args.SetSslTargetNameOverride(options.tls_server_name);
  TR_ASSIGN_OR_RETURN(auto credentials, ChannelCredentialsFor(options));
  auto channel = grpc::CreateCustomChannel(address, credentials, args);
  if (!channel) return Status::Internal("could not create a channel to " + address);
  return std::unique_ptr<Client>(new Client(address, options, std::move(channel)));
}

Client::Client(std::string address, ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      stub_(v1::Transposer::NewStub(channel_)) {}

Client::~Client() = default;

void Client::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(DeadlineAfter(options_.deadline_seconds));
  context->set_wait_for_ready(options_.wait_for_ready);
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
}

template <typename Request, typename Response>
StatusOr<Response> Client::Call(grpc::Status (v1::Transposer::Stub::*method)(grpc::ClientContext*,
                                                                             const Request&,
                                                                             Response*),
                                const Request& request) {
  grpc::ClientContext context;
  Prepare(&context);
  Response response;
  grpc::Status s = (stub_.get()->*method)(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

template <typename Request, typename Message, typename OnMessage>
Status Client::ReadStream(std::unique_ptr<grpc::ClientReader<Message>> (
                              v1::Transposer::Stub::*method)(grpc::ClientContext*, const Request&),
                          const Request& request, OnMessage&& on_message) {
  grpc::ClientContext context;
  Prepare(&context);
  std::unique_ptr<grpc::ClientReader<Message>> reader = (stub_.get()->*method)(&context, request);
  Message message;
  Status callback_status;
  while (reader->Read(&message)) {
    callback_status = on_message(static_cast<const Message&>(message));
    if (!callback_status.ok()) {
      context.TryCancel();
      break;
    }
  }
  grpc::Status s = reader->Finish();
  if (!callback_status.ok()) return callback_status;
  return FromGrpcStatus(s);
}

Status Client::WaitForConnected(double seconds) {
  if (channel_->WaitForConnected(DeadlineAfter(seconds))) return Status::OK();
  return Status::Unavailable("could not connect to " + address_ + " within " +
                             std::to_string(seconds) + " s");
}

StatusOr<v1::Answer> Client::GetConfig(const v1::Problem& problem, v1::CachePolicy policy) {
  v1::GetConfigRequest request;
  *request.mutable_problem() = problem;
  request.set_policy(policy);
  return Call(&v1::Transposer::Stub::GetConfig, request);
}

StatusOr<v1::Answer> Client::GetConfig(const Problem& problem, const v1::DeviceSelector& device,
                                       v1::CachePolicy policy) {
  v1::Problem p = ProblemToProto(problem);
  *p.mutable_device() = device;
  return GetConfig(p, policy);
}

StatusOr<v1::Answer> Client::Tune(const v1::TuneRequest& request,
                                  const ProgressCallback& on_progress) {
  std::optional<v1::Answer> answer;
  TR_RETURN_IF_ERROR(
      ReadStream(&v1::Transposer::Stub::Tune, request, [&](const v1::TuneProgress& progress) {
        if (progress.has_answer()) answer = progress.answer();
        if (on_progress) on_progress(progress);
        return Status::OK();
      }));
  if (!answer.has_value()) return Status::Internal("the Tune stream ended without an answer");
  return *std::move(answer);
}

Status Client::TuneMany(const v1::TuneManyRequest& request,
                        const std::function<Status(const v1::TuneManyProgress&)>& on_progress) {
  return ReadStream(&v1::Transposer::Stub::TuneMany, request,
                    [&](const v1::TuneManyProgress& progress) {
                      return on_progress ? on_progress(progress) : Status::OK();
                    });
}

StatusOr<std::vector<v1::Device>> Client::ListDevices() {
  TR_ASSIGN_OR_RETURN(v1::ListDevicesResponse response,
                      Call(&v1::Transposer::Stub::ListDevices, v1::ListDevicesRequest()));
  return std::vector<v1::Device>(response.devices().begin(), response.devices().end());
}

StatusOr<v1::ListEntriesResponse> Client::ListEntryPage(const v1::ListEntriesRequest& request) {
  return Call(&v1::Transposer::Stub::ListEntries, request);
}

StatusOr<std::vector<v1::Entry>> Client::ListEntries(const v1::ListEntriesRequest& request) {
  // request.limit caps the total (0: all); the pages come one call at a time.
  const int64_t limit = request.limit();
  v1::ListEntriesRequest page = request;
  page.set_limit(0);
  std::vector<v1::Entry> out;
  while (true) {
    if (limit > 0) {
      const int64_t left = limit - static_cast<int64_t>(out.size());
      if (request.page_size() == 0 || left < request.page_size())
        page.set_page_size(static_cast<int32_t>(std::min<int64_t>(left, 1000)));
    }
    TR_ASSIGN_OR_RETURN(v1::ListEntriesResponse response, ListEntryPage(page));
    for (auto& e : *response.mutable_entries()) out.push_back(std::move(e));
    if (response.next_page_token().empty()) break;
    if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
    page.set_page_token(response.next_page_token());
  }
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(limit);
  return out;
}

StatusOr<int64_t> Client::DeleteEntries(const v1::DeleteEntriesRequest& request) {
  TR_ASSIGN_OR_RETURN(v1::DeleteEntriesResponse response,
                      Call(&v1::Transposer::Stub::DeleteEntries, request));
  return static_cast<int64_t>(response.deleted());
}

StatusOr<int64_t> Client::ExportEntries(
    const v1::ExportEntriesRequest& request,
    const std::function<Status(const v1::ExportedEntry&)>& on_entry) {
  int64_t n = 0;
  TR_RETURN_IF_ERROR(ReadStream(&v1::Transposer::Stub::ExportEntries, request,
                                [&](const v1::ExportedEntry& entry) {
                                  ++n;
                                  return on_entry(entry);
                                }));
  return n;
}

StatusOr<v1::ImportEntriesResponse> Client::ImportEntries(
    const v1::ImportEntriesRequest& request) {
  return Call(&v1::Transposer::Stub::ImportEntries, request);
}

}  // namespace transposed
