#include "server/grpc/convert.h"

#include <gtest/gtest.h>

#include <cmath>

#include "proto/grpc_status.h"

namespace transposed {
namespace {

TEST(GrpcStatusTest, MapsEveryCodeByNameAndKeepsTheMessage) {
  const StatusCode codes[] = {
      StatusCode::kCancelled,         StatusCode::kUnknown,
      StatusCode::kInvalidArgument,   StatusCode::kDeadlineExceeded,
      StatusCode::kNotFound,          StatusCode::kAlreadyExists,
      StatusCode::kResourceExhausted, StatusCode::kFailedPrecondition,
      StatusCode::kAborted,           StatusCode::kUnimplemented,
      StatusCode::kInternal,          StatusCode::kUnavailable,
      StatusCode::kPermissionDenied,  StatusCode::kUnauthenticated,
  };
  for (StatusCode c : codes) {
    Status s(c, std::string("msg of ") + StatusCodeName(c));
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), static_cast<int>(c)) << StatusCodeName(c);
    EXPECT_EQ(g.error_message(), s.message());
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
  EXPECT_EQ(ToGrpcCode(StatusCode::kNotFound), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcCode(StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(ToGrpcStatus(Status::OK()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  // A gRPC code the core does not use maps to the closest core code, its name kept.
  Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::DATA_LOSS, "lost"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "DATA_LOSS: lost");
}

TEST(ConvertTest, ProblemFromProtoDefaultsAndRoundTrip) {
  v1::Problem p;
  p.set_rows(256);
  p.set_cols(512);
  p.set_dtype("F16");
  p.set_ld_in(600);
  auto core = ProblemFromProto(p);
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_EQ(core->rows, 256);
  EXPECT_EQ(core->cols, 512);
  EXPECT_EQ(core->batch, 1);  // unset batch
  EXPECT_EQ(core->dtype, DType::kF16);
  EXPECT_EQ(core->ld_in, 600);
  EXPECT_EQ(core->ld_out, 0);

  v1::Problem back = ProblemToProto(*core);
  EXPECT_TRUE(back.has_batch());
  EXPECT_EQ(back.batch(), 1);
  EXPECT_EQ(back.dtype(), "f16");
  auto again = ProblemFromProto(back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *core);

  p.set_batch(7);
  p.set_dtype("float32");
  core = ProblemFromProto(p);
  ASSERT_TRUE(core.ok());
  EXPECT_EQ(core->batch, 7);
  EXPECT_EQ(core->dtype, DType::kF32);
}

TEST(ConvertTest, ProblemFromProtoErrorsNameTheField) {
  v1::Problem p;
  p.set_rows(4);
  p.set_cols(4);
  p.set_dtype("f24");
  auto r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("problem.dtype: unknown element type 'f24' (expected one of "
                                       "f16, bf16, f32",
                                       0),
            0u)
      << r.status().message();

  p.set_dtype("");
  r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("problem.dtype"), std::string::npos);

  p.set_dtype("f32");
  p.set_batch(0);
  r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("problem.batch:", 0), 0u) << r.status().message();
  p.set_batch(-3);
  EXPECT_FALSE(ProblemFromProto(p).ok());

  p.clear_batch();
  p.set_ld_out(-1);
  r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("problem.ld_out:", 0), 0u) << r.status().message();
}

TEST(ConvertTest, ProblemExactnessIsReadNormalizedAndValidated) {
  v1::Problem p;
  p.set_rows(4097);
  p.set_cols(3001);
  p.set_dtype("f32");
  auto bit = ProblemFromProto(p);
  ASSERT_TRUE(bit.ok());
  EXPECT_EQ(bit->exactness, Exactness::kBit);  // unset

  p.set_exactness(v1::EXACTNESS_VALUE);
  auto value = ProblemFromProto(p);
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->exactness, Exactness::kValue);
  EXPECT_NE(value->Key(), bit->Key());
  EXPECT_EQ(ProblemToProto(*value).exactness(), v1::EXACTNESS_VALUE);
  EXPECT_EQ(ProblemToProto(*bit).exactness(), v1::EXACTNESS_BIT);

  // No member of an integer, complex or 16-bit dtype tells the two apart: the same problem.
  for (const char* dtype : {"i32", "u8", "f16", "bf16", "c64", "c128", "i64"}) {
    p.set_dtype(dtype);
    auto q = ProblemFromProto(p);
    ASSERT_TRUE(q.ok()) << dtype;
    EXPECT_EQ(q->exactness, Exactness::kBit) << dtype;
    EXPECT_EQ(ProblemToProto(*q).exactness(), v1::EXACTNESS_BIT) << dtype;
  }

  p.set_dtype("f64");
  p.set_exactness(static_cast<v1::Exactness>(5));  // proto3 keeps unknown enum numbers
  auto r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("problem.exactness: unknown value 5", 0), 0u)
      << r.status().message();
}

TEST(ConvertTest, DeviceSelector) {
  v1::DeviceSelector s;
  DeviceRef r = DeviceRefFromProto(s);
  EXPECT_FALSE(r.index.has_value());
  EXPECT_FALSE(r.uuid.has_value());
  s.set_index(0);  // explicitly index 0 is still "set"
  r = DeviceRefFromProto(s);
  ASSERT_TRUE(r.index.has_value());
  EXPECT_EQ(*r.index, 0);
  s.set_uuid("GPU-1");
  r = DeviceRefFromProto(s);
  EXPECT_FALSE(r.index.has_value());
  ASSERT_TRUE(r.uuid.has_value());
  EXPECT_EQ(*r.uuid, "GPU-1");
}

DeviceInfo TestDevice() {
  DeviceInfo d;
  d.backend = "cuda";
  d.index = 2;
  d.uuid = "GPU-abc";
  d.name = "Test GPU";
  d.memory_bytes = 80ull << 30;
  d.attributes = {{"cc", "9.0"}, {"sms", "132"}};
  d.library_version = "0.1.0+kabc";
  return d;
}

TEST(ConvertTest, DeviceToProtoIncludesFingerprint) {
  DeviceInfo d = TestDevice();
  v1::Device p = DeviceToProto(d);
  EXPECT_EQ(p.index(), 2);
  EXPECT_EQ(p.uuid(), "GPU-abc");
  EXPECT_EQ(p.name(), "Test GPU");
  EXPECT_EQ(p.backend(), "cuda");
  EXPECT_EQ(p.memory_bytes(), 80ull << 30);
  EXPECT_EQ(p.library_version(), "0.1.0+kabc");
  EXPECT_EQ(p.fingerprint(), d.Fingerprint());
  EXPECT_EQ(p.fingerprint().size(), 16u);
  EXPECT_EQ(p.attributes().at("cc"), "9.0");
  EXPECT_EQ(p.attributes().size(), 2u);
}

TuneResult TestResult() {
  TuneResult r;
  r.problem.rows = 1000;
  r.problem.cols = 2000;
  r.problem.dtype = DType::kF32;  // 8e6 bytes
  r.device = TestDevice();
  r.best = Candidate{"tile32x32.rows8", {{"tile_rows", 32}, {"tile_cols", 32}}};
  MeasureMethod how;
  how.timer = "t";
  how.buffers = 9;
  how.alternatives_median_s = {{"memcpy", 0.25}};
  how.final_rounds = 3;
  how.placements = 3;
  how.remeasured_after_slowdown = 2.5;
  r.best_measurement = Measurement::FromSamples({0.004, 0.005, 0.006}, 2, how);
  r.ceiling = Measurement::FromSamples({0.004, 0.004, 0.004}, 2, {});
  r.tried = 12;
  r.valid = 10;
  r.tune_seconds = 3.5;
  r.tuned_at_unix_ms = 1700000000123;
  r.candidates.push_back({r.best, r.best_measurement, Phase::kFinal});
  return r;
}

TEST(ConvertTest, MeasurementToProtoComputesGbps) {
  TuneResult r = TestResult();
  v1::Measurement m = MeasurementToProto(r.best_measurement, r.problem.bytes());
  EXPECT_TRUE(m.valid());
  EXPECT_DOUBLE_EQ(m.median_s(), 0.005);
  EXPECT_DOUBLE_EQ(m.min_s(), 0.004);
  EXPECT_DOUBLE_EQ(m.max_s(), 0.006);
  EXPECT_DOUBLE_EQ(m.rel_spread(), (0.006 - 0.004) / 0.005);
  EXPECT_EQ(m.samples(), 3);
  EXPECT_EQ(m.warmup(), 2);
  // 2 * 8e6 bytes / 5 ms = 3.2 GB/s.
  EXPECT_DOUBLE_EQ(m.gbps(), EffectiveGBps(r.problem.bytes(), 0.005));
  EXPECT_NEAR(m.gbps(), 3.2, 1e-9);
  EXPECT_EQ(m.method().timer(), "t");
  EXPECT_EQ(m.method().buffers(), 9);
  EXPECT_EQ(m.method().alternatives_median_s().at("memcpy"), 0.25);
  EXPECT_EQ(m.method().final_rounds(), 3);
  EXPECT_EQ(m.method().placements(), 3);
  EXPECT_EQ(m.method().remeasured_after_slowdown(), 2.5);
  EXPECT_EQ(m.method().threads(), 0);

  Measurement bad = Measurement::Invalid("mismatch at 3");
  v1::Measurement b = MeasurementToProto(bad, r.problem.bytes());
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(b.error(), "mismatch at 3");
  EXPECT_EQ(b.gbps(), 0);
}

TEST(ConvertTest, AnswerToProto) {
  TuneResult r = TestResult();
  v1::Answer a = AnswerToProto(r, AnswerSource::kTuned);
  EXPECT_EQ(a.source(), v1::SOURCE_TUNED);
  EXPECT_EQ(AnswerToProto(r, AnswerSource::kCache).source(), v1::SOURCE_CACHE);
  EXPECT_EQ(a.problem().rows(), 1000);
  EXPECT_EQ(a.problem().cols(), 2000);
  EXPECT_EQ(a.problem().dtype(), "f32");
  EXPECT_EQ(a.problem().device().index(), 2);
  EXPECT_EQ(a.variant().name(), "tile32x32.rows8");
  EXPECT_EQ(a.variant().backend(), "cuda");  // from the device
  EXPECT_EQ(a.variant().params().at("tile_rows"), 32);
  EXPECT_DOUBLE_EQ(a.gbps(), r.gbps());
  EXPECT_DOUBLE_EQ(a.ceiling_gbps(), r.ceiling_gbps());
  EXPECT_DOUBLE_EQ(a.ratio(), r.gbps() / r.ceiling_gbps());
  EXPECT_NEAR(a.ratio(), 0.8, 1e-12);  // 4 ms ceiling vs 5 ms winner
  EXPECT_DOUBLE_EQ(a.rel_spread(), r.best_measurement.rel_spread());
  EXPECT_TRUE(a.noisy());  // spread 0.4 > kMaxTrustedRelSpread
  {
    TuneResult calm = r;
    calm.best_measurement.max_s = 0.0052;
    calm.best_measurement.min_s = 0.0049;
    EXPECT_FALSE(AnswerToProto(calm, AnswerSource::kTuned).noisy());
  }
  EXPECT_DOUBLE_EQ(a.measurement().median_s(), 0.005);
  EXPECT_DOUBLE_EQ(a.ceiling().median_s(), 0.004);
  EXPECT_EQ(a.tuned_at_unix_ms(), 1700000000123);
  EXPECT_EQ(a.candidates_tried(), 12);
  EXPECT_EQ(a.candidates_valid(), 10);
  EXPECT_DOUBLE_EQ(a.tune_seconds(), 3.5);
  EXPECT_EQ(a.device().fingerprint(), r.device.Fingerprint());
  EXPECT_EQ(a.device().index(), 2);

  // Without a ceiling the ratio is 0, not a division by zero.
  r.ceiling = Measurement::Invalid("no ceiling");
  EXPECT_EQ(AnswerToProto(r, AnswerSource::kCache).ratio(), 0);

  v1::CandidateResult c = CandidateResultToProto(r.candidates[0], "cuda", r.problem.bytes());
  EXPECT_EQ(c.phase(), "final");
  EXPECT_EQ(c.variant().name(), "tile32x32.rows8");
  EXPECT_DOUBLE_EQ(c.measurement().gbps(), a.gbps());
}

TEST(ConvertTest, EntryQueryFromProto) {
  v1::EntryFilter f;
  auto q = EntryQueryFromProto(f);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->empty());
  EXPECT_TRUE(q->filter.empty());

  f.set_dtype("bf16");
  f.set_rows(64);
  f.set_cols(128);
  f.set_variant("v");
  f.set_device_fingerprint("0123456789abcdef");
  f.set_tuned_before_unix_ms(99);
  f.set_library_version("lib");
  f.mutable_device()->set_uuid("GPU-x");
  q = EntryQueryFromProto(f);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_FALSE(q->empty());
  ASSERT_TRUE(q->filter.dtype.has_value());
  EXPECT_EQ(*q->filter.dtype, DType::kBF16);
  EXPECT_EQ(q->filter.rows, 64);
  EXPECT_EQ(q->filter.cols, 128);
  EXPECT_EQ(q->filter.variant, "v");
  EXPECT_EQ(q->filter.device_fingerprint, "0123456789abcdef");
  EXPECT_EQ(q->filter.tuned_before_unix_ms, 99);
  EXPECT_EQ(q->filter.library_version, "lib");
  ASSERT_TRUE(q->device.has_value());
  EXPECT_EQ(*q->device->uuid, "GPU-x");

  v1::EntryFilter only_device;
  only_device.mutable_device()->set_index(0);
  q = EntryQueryFromProto(only_device);
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->empty());  // a device selector alone is a filter

  v1::EntryFilter bad;
  bad.set_dtype("f24");
  q = EntryQueryFromProto(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q.status().message().rfind("filter.dtype: unknown element type 'f24'", 0), 0u);
  bad.clear_dtype();
  bad.set_rows(-1);
  q = EntryQueryFromProto(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message().rfind("filter.rows:", 0), 0u);
}

// Hardening: every string field is length-capped and echoed escaped; enums are checked; numbers
// must be finite.
TEST(ConvertTest, LongStringsAreRefusedNamingTheFieldWithABoundedMessage) {
  v1::GetConfigRequest g;
  g.mutable_problem()->set_rows(8);
  g.mutable_problem()->set_cols(8);
  g.mutable_problem()->set_dtype(std::string(9000, 'x'));
  auto r = ConfigRequestFromProto(g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("problem.dtype: too long (9000 bytes", 0), 0u)
      << r.status().message();
  EXPECT_LT(r.status().message().size(), 300u);

  g.mutable_problem()->set_dtype("f32");
  g.mutable_problem()->mutable_device()->set_uuid(std::string(5000, 'u'));
  r = ConfigRequestFromProto(g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("problem.device.uuid: too long", 0), 0u);

  for (const char* field : {"device_fingerprint", "dtype", "variant", "library_version"}) {
    v1::EntryFilter f;
    const std::string big(1000, 'z');
    if (std::string(field) == "device_fingerprint") f.set_device_fingerprint(big);
    if (std::string(field) == "dtype") f.set_dtype(big);
    if (std::string(field) == "variant") f.set_variant(big);
    if (std::string(field) == "library_version") f.set_library_version(big);
    auto q = EntryQueryFromProto(f);
    ASSERT_FALSE(q.ok()) << field;
    EXPECT_EQ(q.status().message().rfind(std::string("filter.") + field + ": too long", 0), 0u)
        << q.status().message();
  }
}

TEST(ConvertTest, ControlBytesInAnEchoedValueAreEscaped) {
  v1::GetConfigRequest g;
  g.mutable_problem()->set_rows(8);
  g.mutable_problem()->set_cols(8);
  g.mutable_problem()->set_dtype(std::string("f32\n2026-01-01 info forged\0\x1b", 28));
  auto r = ConfigRequestFromProto(g);
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find('\0'), std::string::npos);
  EXPECT_EQ(m.find('\x1b'), std::string::npos);
  EXPECT_NE(m.find("'f32\\n2026-01-01 info forged\\x00\\x1b'"), std::string::npos) << m;
}

TEST(ConvertTest, UnknownCachePolicyIsInvalidArgument) {
  v1::GetConfigRequest g;
  g.mutable_problem()->set_rows(8);
  g.mutable_problem()->set_cols(8);
  g.mutable_problem()->set_dtype("f32");
  g.set_policy(static_cast<v1::CachePolicy>(7));
  auto r = ConfigRequestFromProto(g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("policy: unknown CachePolicy 7", 0), 0u);
  g.set_policy(v1::CACHE_ONLY);
  r = ConfigRequestFromProto(g);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cache_only);
}

TEST(ConvertTest, NonFiniteBudgetIsInvalidArgument) {
  v1::TuneRequest t;
  t.mutable_problem()->set_rows(8);
  t.mutable_problem()->set_cols(8);
  t.mutable_problem()->set_dtype("f32");
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    t.set_budget_seconds(bad);
    auto r = TuneRequestFromProto(t);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().rfind("budget_seconds: must be a finite number", 0), 0u);
  }
  t.set_budget_seconds(2.5);
  auto r = TuneRequestFromProto(t);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->budget_seconds, 2.5);
}

}  // namespace
}  // namespace transposed
