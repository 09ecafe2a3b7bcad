#include "client/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <utility>

namespace transposed {
namespace {

std::chrono::system_clock::time_point DeadlineAfter(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

}  // namespace

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
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
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
  grpc::ClientContext context;
  Prepare(&context);
  v1::Answer answer;
  grpc::Status s = stub_->GetConfig(&context, request, &answer);
  if (!s.ok()) return FromGrpcStatus(s);
  return answer;
}

StatusOr<v1::Answer> Client::GetConfig(const Problem& problem, const v1::DeviceSelector& device,
                                       v1::CachePolicy policy) {
  v1::Problem p = ProblemToProto(problem);
  *p.mutable_device() = device;
  return GetConfig(p, policy);
}

StatusOr<v1::Answer> Client::Tune(const v1::TuneRequest& request,
                                  const ProgressCallback& on_progress) {
  grpc::ClientContext context;
  Prepare(&context);
  std::unique_ptr<grpc::ClientReader<v1::TuneProgress>> reader = stub_->Tune(&context, request);
  v1::TuneProgress progress;
  bool have_answer = false;
  v1::Answer answer;
  while (reader->Read(&progress)) {
    if (progress.has_answer()) {
      answer = progress.answer();
      have_answer = true;
    }
    if (on_progress) on_progress(progress);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FromGrpcStatus(s);
  if (!have_answer) return Status::Internal("the Tune stream ended without an answer");
  return answer;
}

StatusOr<std::vector<v1::Device>> Client::ListDevices() {
  grpc::ClientContext context;
  Prepare(&context);
  v1::ListDevicesResponse response;
  grpc::Status s = stub_->ListDevices(&context, v1::ListDevicesRequest(), &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return std::vector<v1::Device>(response.devices().begin(), response.devices().end());
}

StatusOr<std::vector<v1::Entry>> Client::ListEntries(const v1::ListEntriesRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::ListEntriesResponse response;
  grpc::Status s = stub_->ListEntries(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return std::vector<v1::Entry>(response.entries().begin(), response.entries().end());
}

StatusOr<int64_t> Client::DeleteEntries(const v1::DeleteEntriesRequest& request) {
  grpc::ClientContext context;
  Prepare(&context);
  v1::DeleteEntriesResponse response;
  grpc::Status s = stub_->DeleteEntries(&context, request, &response);
  if (!s.ok()) return FromGrpcStatus(s);
  return static_cast<int64_t>(response.deleted());
}

}  // namespace transposed
