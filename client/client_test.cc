// Unit tests of the client-side helpers: status mapping, problem conversion, device selectors,
// JSON and text formatting. No daemon needed.
#include "client/client.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/format.h"
#include "proto/json.h"

namespace transposed {
namespace {

TEST(FromGrpcStatus, KeepsCodeAndMessage) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  struct Case {
    grpc::StatusCode in;
    StatusCode out;
  };
  const Case cases[] = {
      {grpc::StatusCode::CANCELLED, StatusCode::kCancelled},
      {grpc::StatusCode::UNKNOWN, StatusCode::kUnknown},
      {grpc::StatusCode::INVALID_ARGUMENT, StatusCode::kInvalidArgument},
      {grpc::StatusCode::DEADLINE_EXCEEDED, StatusCode::kDeadlineExceeded},
      {grpc::StatusCode::NOT_FOUND, StatusCode::kNotFound},
      {grpc::StatusCode::ALREADY_EXISTS, StatusCode::kAlreadyExists},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, StatusCode::kResourceExhausted},
      {grpc::StatusCode::FAILED_PRECONDITION, StatusCode::kFailedPrecondition},
      {grpc::StatusCode::ABORTED, StatusCode::kAborted},
      {grpc::StatusCode::UNIMPLEMENTED, StatusCode::kUnimplemented},
      {grpc::StatusCode::INTERNAL, StatusCode::kInternal},
      {grpc::StatusCode::UNAVAILABLE, StatusCode::kUnavailable},
  };
  for (const auto& c : cases) {
    Status s = FromGrpcStatus(grpc::Status(c.in, "problem.rows: must be >= 1, got 0"));
    EXPECT_EQ(s.code(), c.out) << static_cast<int>(c.in);
    EXPECT_EQ(s.message(), "problem.rows: must be >= 1, got 0");
    // The codes transposed uses are numerically the gRPC codes.
    EXPECT_EQ(static_cast<int>(s.code()), static_cast<int>(c.in));
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "x")).ToString(),
            "INVALID_ARGUMENT: x");
}

TEST(FromGrpcStatus, UnusedCodesMapToClosestAndKeepName) {
  Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "too far"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "OUT_OF_RANGE: too far");
  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.ToString(), "PERMISSION_DENIED: no");
  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "token"));
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(s.ToString(), "UNAUTHENTICATED: token");
  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::DATA_LOSS, "gone"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "DATA_LOSS: gone");
}

TEST(ProblemConversion, RoundTrips) {
  Problem p;
  p.rows = 300;
  p.cols = 500;
  p.batch = 3;
  p.dtype = DType::kBF16;
  p.ld_in = 512;
  p.ld_out = 0;
  v1::Problem proto = ProblemToProto(p);
  EXPECT_EQ(proto.rows(), 300);
  EXPECT_EQ(proto.cols(), 500);
  EXPECT_TRUE(proto.has_batch());
  EXPECT_EQ(proto.batch(), 3);
  EXPECT_EQ(proto.dtype(), "bf16");
  EXPECT_EQ(proto.ld_in(), 512);
  auto back = ProblemFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Key(), p.Key());
}

TEST(ProblemConversion, UnsetBatchIsOneAndUnknownDtypeFails) {
  v1::Problem proto;
  proto.set_rows(4);
  proto.set_cols(8);
  proto.set_dtype("float32");
  auto p = ProblemFromProto(proto);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->batch, 1);
  EXPECT_EQ(p->dtype, DType::kF32);
  proto.set_dtype("f17");
  auto bad = ProblemFromProto(proto);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("dtype"), std::string::npos);
}

TEST(DeviceSelector, ParsesIndexOrUuid) {
  v1::DeviceSelector d = DeviceFromString("3");
  EXPECT_EQ(d.selector_case(), v1::DeviceSelector::kIndex);
  EXPECT_EQ(d.index(), 3);
  d = DeviceFromString("GPU-8a3c-11");
  EXPECT_EQ(d.selector_case(), v1::DeviceSelector::kUuid);
  EXPECT_EQ(d.uuid(), "GPU-8a3c-11");
  d = DeviceFromString("-1");  // not all digits: a (bad) UUID, for the daemon to reject
  EXPECT_EQ(d.selector_case(), v1::DeviceSelector::kUuid);
  d = DeviceFromString("99999999999");  // too long for an index
  EXPECT_EQ(d.selector_case(), v1::DeviceSelector::kUuid);
}

TEST(Format, IsoTimeUtc) {
  EXPECT_EQ(IsoTimeUtc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(IsoTimeUtc(1714566896789), "2024-05-01T12:34:56.789Z");
  EXPECT_EQ(IsoTimeUtc(-1), "1969-12-31T23:59:59.999Z");
}

v1::Answer SampleAnswer() {
  v1::Answer a;
  a.mutable_problem()->set_rows(1024);
  a.mutable_problem()->set_cols(2048);
  a.mutable_problem()->set_dtype("f32");
  a.mutable_variant()->set_name("tile32x32.rows8.vec16.pad1");
  a.mutable_variant()->set_backend("cuda");
  (*a.mutable_variant()->mutable_params())["tile"] = 32;
  (*a.mutable_variant()->mutable_params())["pad"] = 1;
  a.set_gbps(2500.5);
  a.set_ceiling_gbps(3000.0);
  a.set_ratio(2500.5 / 3000.0);
  a.set_rel_spread(0.02);
  a.set_source(v1::SOURCE_TUNED);
  a.set_tuned_at_unix_ms(1714566896789);
  a.set_candidates_tried(40);
  a.set_candidates_valid(38);
  a.set_tune_seconds(1.25);
  a.mutable_device()->set_index(1);
  a.mutable_device()->set_name("NVIDIA H100");
  a.mutable_device()->set_uuid("GPU-1234");
  a.mutable_device()->set_backend("cuda");
  a.mutable_device()->set_fingerprint("fp0123");
  a.mutable_measurement()->set_valid(true);
  a.mutable_measurement()->mutable_method()->set_timer("cuda_event");
  a.mutable_measurement()->mutable_method()->set_working_set_bytes(int64_t{1} << 33);
  (*a.mutable_ceiling()->mutable_method()->mutable_alternatives_median_s())["memcpy_d2d"] = 0.5;
  return a;
}

// The one JSON mapping (proto/json.h): protobuf's printer, proto field names, enums by name,
// int64 as strings, zero fields printed; protobuf's parser reads it back to the same message.
TEST(Format, AnswerInTheOneJsonMapping) {
  auto text = ProtoToJson(SampleAnswer(), JsonLayout::kIndented);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["variant"]["name"], "tile32x32.rows8.vec16.pad1");
  EXPECT_EQ(j["variant"]["params"]["tile"], "32");
  EXPECT_DOUBLE_EQ(j["gbps"].get<double>(), 2500.5);
  EXPECT_EQ(j["source"], "SOURCE_TUNED");
  EXPECT_EQ(j["device"]["uuid"], "GPU-1234");
  EXPECT_EQ(j["problem"]["rows"], "1024");
  EXPECT_EQ(j["tuned_at_unix_ms"], "1714566896789");
  EXPECT_EQ(j["measurement"]["method"]["working_set_bytes"], "8589934592");
  EXPECT_TRUE(j.contains("noisy")) << "zero fields are printed too";
  v1::Answer back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*text, &back).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, SampleAnswer()));
  auto line = ProtoToJson(SampleAnswer(), JsonLayout::kLine);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->find('\n'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(*line), j);
}

TEST(Format, AnswerToTextIsAKeyValueTable) {
  std::string text = AnswerToText(SampleAnswer());
  EXPECT_NE(text.find("variant:"), std::string::npos);
  EXPECT_NE(text.find("tile32x32.rows8.vec16.pad1"), std::string::npos);
  EXPECT_NE(text.find("2500.5 GB/s"), std::string::npos);
  EXPECT_NE(text.find("source:"), std::string::npos);
  EXPECT_NE(text.find("tuned"), std::string::npos);
  EXPECT_NE(text.find("2024-05-01T12:34:56.789Z"), std::string::npos);
  EXPECT_NE(text.find("pad=1 tile=32"), std::string::npos);
}

// Issue 37: an ANSWER_NOW heuristic default is not measured: no "0.0 GB/s", no 1970 date.
TEST(Format, UnmeasuredAnswerSaysSo) {
  v1::Answer a;
  a.mutable_problem()->set_rows(4096);
  a.mutable_problem()->set_cols(512);
  a.mutable_problem()->set_dtype("f16");
  a.mutable_variant()->set_name("tile32x32.rows8.vec16.pad1");
  a.set_source(v1::SOURCE_HEURISTIC);
  a.mutable_device()->set_uuid("GPU-1");
  const std::string text = AnswerToText(a);
  EXPECT_EQ(text.find("0.0 GB/s"), std::string::npos) << text;
  EXPECT_EQ(text.find("1970"), std::string::npos) << text;
  EXPECT_EQ(text.find("0.000"), std::string::npos) << text;
  EXPECT_NE(text.find("bandwidth:"), std::string::npos) << text;
  EXPECT_NE(text.find("not measured"), std::string::npos) << text;
  EXPECT_NE(text.find("not tuned yet"), std::string::npos) << text;
  EXPECT_NE(text.find("heuristic"), std::string::npos) << text;
}

TEST(Format, ProgressLines) {
  v1::TuneProgress p;
  p.set_index(12);
  p.set_total(40);
  p.mutable_candidate()->mutable_variant()->set_name("tile32x32.rows8.vec16.pad1");
  p.mutable_candidate()->mutable_measurement()->set_valid(true);
  p.mutable_candidate()->mutable_measurement()->set_gbps(1234.5);
  p.mutable_candidate()->set_phase("quick");
  EXPECT_EQ(ProgressToText(p), "[12/40] tile32x32.rows8.vec16.pad1  1234.5 GB/s  valid  quick");

  p.mutable_candidate()->mutable_measurement()->set_valid(false);
  p.mutable_candidate()->mutable_measurement()->set_error("mismatch at 3");
  p.mutable_candidate()->mutable_measurement()->set_gbps(0);
  EXPECT_EQ(ProgressToText(p),
            "[12/40] tile32x32.rows8.vec16.pad1  0.0 GB/s  invalid  quick  (mismatch at 3)");
}

TEST(Format, EntryWithCandidates) {
  v1::Entry e;
  *e.mutable_answer() = SampleAnswer();
  auto* c = e.add_candidates();
  c->mutable_variant()->set_name("tile16x16.rows4.vec4.pad0");
  c->mutable_measurement()->set_valid(true);
  c->mutable_measurement()->set_gbps(100);
  c->set_phase("quick");
  std::string text = EntryToText(e);
  EXPECT_NE(text.find("tile32x32.rows8.vec16.pad1"), std::string::npos);
  EXPECT_NE(text.find("\n    tile16x16.rows4.vec4.pad0"), std::string::npos);
}

TEST(Client, ConnectValidatesArguments) {
  EXPECT_EQ(Client::Connect("").status().code(), StatusCode::kInvalidArgument);
  ClientOptions bad;
  bad.deadline_seconds = 0;
  EXPECT_EQ(Client::Connect("127.0.0.1:1", bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(Client, UnreachableDaemonIsUnavailable) {
  // Port 1 on loopback: nothing listens there (and we do not wait for it).
  ClientOptions options;
  options.deadline_seconds = 10;
  auto client = Client::Connect("127.0.0.1:1", options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto devices = (*client)->ListDevices();
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), StatusCode::kUnavailable) << devices.status().ToString();
  v1::TuneRequest request;
  auto tuned = (*client)->Tune(request, nullptr);
  ASSERT_FALSE(tuned.ok());
  EXPECT_EQ(tuned.status().code(), StatusCode::kUnavailable) << tuned.status().ToString();
}

}  // namespace
}  // namespace transposed
