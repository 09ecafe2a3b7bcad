// Property/fuzz test of the worker protocol's parsers, both ends: frame decoding of random and
// mutated byte streams, Request messages parsed from mutated frames and dispatched to a
// FakeEngine (the worker's side), and Response messages parsed from mutated frames and mapped
// back to the domain model (the daemon's side). Nothing may crash, allocate beyond the frame cap
// or answer without exactly one response kind. Fixed seeds; well under a second.
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tuner/worker/codec.h"
#include "tuner/worker/fake_engine.h"
#include "tuner/worker/frame.h"
#include "tuner/worker/serve.h"

namespace transposed::worker {
namespace {

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string Mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    const size_t pos = rng() % (s.size() + 1);
    switch (rng() % 4) {
      case 0:
        s.insert(pos, 1, static_cast<char>(rng() & 0xff));
        break;
      case 1:
        if (pos < s.size()) s.erase(pos, 1 + rng() % 4);
        break;
      case 2:
        if (pos < s.size()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      default:
        if (pos < s.size()) s[pos] = static_cast<char>(rng() & 0xff);
    }
  }
  return s;
}

// Every DecodeFrame outcome is consistent with the bytes: a whole frame is its 4-byte length
// plus that many bytes; "incomplete" only when fewer are there; refused only when over the cap.
void CheckDecode(const std::string& buffer) {
  std::string payload;
  size_t consumed = 0;
  const Status s = DecodeFrame(buffer, &payload, &consumed);
  uint32_t length = 0;
  if (buffer.size() >= 4) {
    for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(buffer[i]);
  }
  if (s.ok()) {
    ASSERT_GE(buffer.size(), 4u);
    EXPECT_EQ(payload.size(), length);
    EXPECT_EQ(consumed, 4u + length);
    EXPECT_LE(consumed, buffer.size());
    EXPECT_EQ(payload, buffer.substr(4, length));
  } else if (s.code() == StatusCode::kUnavailable) {
    EXPECT_TRUE(buffer.size() < 4 || buffer.size() < 4u + length) << s.ToString();
  } else {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_GT(length, kMaxFrameBytes);
  }
}

TEST(WorkerFramesFuzzTest, RandomAndMutatedStreamsDecodeConsistently) {
  std::mt19937 rng(4242);
  for (int i = 0; i < 20000; ++i) CheckDecode(RandomBytes(rng, rng() % 24));
  for (int i = 0; i < 20000; ++i) {
    std::string frames = EncodeFrame(RandomBytes(rng, rng() % 40));
    frames += EncodeFrame(RandomBytes(rng, rng() % 40));
    CheckDecode(Mutate(frames, rng));
  }
  // Lengths at and around the cap.
  for (uint32_t len : {kMaxFrameBytes - 1, kMaxFrameBytes, kMaxFrameBytes + 1, 0xffffffffu}) {
    std::string b(4, '\0');
    std::memcpy(b.data(), &len, 4);  // little-endian hosts only run this test
    CheckDecode(b + "abc");
  }
}

// The requests the daemon sends, as seeds for mutation.
std::vector<pb::Request> SeedRequests() {
  std::vector<pb::Request> out;
  const Problem p{64, 48, 1, DType::kF32, 0, 0};
  pb::Request r;
  r.mutable_describe();
  out.push_back(r);
  r.Clear();
  *r.mutable_candidates()->mutable_problem() = ProblemToProto(p);
  out.push_back(r);
  r.Clear();
  *r.mutable_open()->mutable_problem() = ProblemToProto(p);
  out.push_back(r);
  r.Clear();
  r.mutable_check()->mutable_candidate()->set_name("fake.c1");
  out.push_back(r);
  r.Clear();
  r.mutable_measure()->mutable_candidate()->set_name("fake.c2");
  (*r.mutable_measure()->mutable_candidate()->mutable_params())["c"] = 2;
  ToProto(MeasureOptions{}, r.mutable_measure()->mutable_options());
  out.push_back(r);
  r.Clear();
  ToProto(MeasureOptions{}, r.mutable_ceiling()->mutable_options());
  out.push_back(r);
  r.Clear();
  r.mutable_close();
  out.push_back(r);
  return out;
}

bool ExactlyOneKind(const pb::Response& r) {
  return r.response_case() != pb::Response::RESPONSE_NOT_SET;
}

TEST(WorkerFramesFuzzTest, MutatedRequestsAreParsedAndAnsweredWithOneResponseEach) {
  google::protobuf::LogSilencer quiet;  // parse failures of invalid UTF-8 log an error each
  std::mt19937 rng(777);
  const std::vector<pb::Request> seeds = SeedRequests();
  FakeEngine engine({});
  int parsed = 0, errors = 0;
  for (int i = 0; i < 20000; ++i) {
    // Mostly the payload (a well-framed bad message), sometimes the whole frame.
    const std::string message = seeds[rng() % seeds.size()].SerializeAsString();
    const std::string frame =
        rng() % 4 == 0 ? Mutate(EncodeFrame(message), rng) : EncodeFrame(Mutate(message, rng));
    std::string payload;
    size_t consumed = 0;
    if (!DecodeFrame(frame, &payload, &consumed).ok()) continue;
    pb::Request req;
    if (!req.ParseFromString(payload)) continue;
    ++parsed;
    const pb::Response resp = Dispatch(&engine, Status::OK(), req);
    ASSERT_TRUE(ExactlyOneKind(resp)) << req.ShortDebugString();
    if (resp.has_error()) {
      ++errors;
      const Status s = ErrorStatus(resp.error());
      EXPECT_FALSE(s.ok());
      EXPECT_FALSE(resp.error().fatal()) << s.ToString();  // the fake has no fault candidate
    }
    // The answer itself frames and parses back.
    std::string back;
    ASSERT_TRUE(DecodeFrame(EncodeFrame(resp.SerializeAsString()), &back, &consumed).ok());
    pb::Response again;
    ASSERT_TRUE(again.ParseFromString(back));
  }
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(errors, 0);  // some mutations make bad problems or options
}

TEST(WorkerFramesFuzzTest, MutatedResponsesMapToTheDomainModelWithoutCrashing) {
  google::protobuf::LogSilencer quiet;
  std::mt19937 rng(99);
  std::vector<pb::Response> seeds;
  {
    pb::Response r;
    DeviceInfo d;
    d.backend = "cuda";
    d.uuid = "GPU-1";
    d.name = "H100";
    d.memory_bytes = 80ull << 30;
    d.attributes = {{"sm", "90"}};
    d.library_version = "0.1.0";
    *r.mutable_describe()->mutable_device() = DeviceToProto(d);
    seeds.push_back(r);
    r.Clear();
    MeasureMethod how;
    how.timer = "x";
    how.alternatives_median_s = {{"memcpy_d2d", 1e-3}};
    *r.mutable_measure()->mutable_measurement() =
        MeasurementToProto(Measurement::FromSamples({1e-3, 2e-3, 3e-3}, 2, how), 0);
    seeds.push_back(r);
    r.Clear();
    *r.mutable_error() = ErrorResponse(Status::ResourceExhausted("too big")).error();
    seeds.push_back(r);
    r.Clear();
    *r.mutable_candidates()->add_candidates() =
        VariantToProto(Candidate{"tile32x32.rows8.pad1", {{"tile_rows", 32}}}, "");
    seeds.push_back(r);
  }
  for (int i = 0; i < 20000; ++i) {
    const std::string bytes = Mutate(seeds[rng() % seeds.size()].SerializeAsString(), rng);
    pb::Response r;
    if (!r.ParseFromString(bytes)) continue;
    switch (r.response_case()) {
      case pb::Response::kDescribe: {
        // A mutated device may be refused (bounded, complete), never crash.
        const StatusOr<DeviceInfo> d = DeviceFromProto("device", r.describe().device());
        if (d.ok()) {
          EXPECT_FALSE(d->Fingerprint().empty());
        } else {
          EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
          EXPECT_EQ(d.status().message().rfind("device.", 0), 0u) << d.status().message();
        }
        break;
      }
      case pb::Response::kMeasure: {
        // A mutated measurement may be refused (bounded), never crash; refused names its field.
        const StatusOr<Measurement> m =
            MeasurementFromProto("measurement", r.measure().measurement(), false);
        if (!m.ok()) {
          EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
          EXPECT_EQ(m.status().message().rfind("measurement", 0), 0u) << m.status().message();
        }
        break;
      }
      case pb::Response::kError: {
        const Status s = ErrorStatus(r.error());
        EXPECT_FALSE(s.ok());  // any code, even 0 or garbage, is an error
        break;
      }
      case pb::Response::kCandidates:
        for (const auto& c : r.candidates().candidates()) {
          const StatusOr<Candidate> v = VariantFromProto("candidate", c);
          if (!v.ok()) EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
        }
        break;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace transposed::worker
