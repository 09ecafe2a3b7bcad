// Transposer through a real daemon (testing::DaemonProcess, CPU backend, fresh database): the
// Client wiring of ForSelector asks the daemon once per problem, the daemon's own errors come
// back as they are, and a daemon whose device is not a CUDA device is refused with the reason
// (no GPU needed: nothing is launched).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "client/client.h"
#include "client/transposer.h"
#include "testing/daemon_process.h"

namespace transposed {
namespace {

TEST(TransposerDaemon, AsksTheRealDaemonAndRefusesANonCudaDevice) {
  testing::DaemonOptions options;
  options.binary = TRANSPOSED_DAEMON;
  options.tune_budget_seconds = 2;
  testing::DaemonProcess daemon(options);
  ASSERT_TRUE(daemon.Start().ok());
  auto client = Client::Connect(daemon.address());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  TransposerOptions tune;
  tune.policy = v1::TUNE_IF_MISSING;  // the answer is stored before the call returns
  auto t = Transposer::ForSelector(client->get(), DeviceByIndex(0), 0, tune);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Problem p;
  p.rows = 96, p.cols = 80, p.dtype = DType::kF32;
  Status s = (*t)->Prepare(p).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("'cpu'"), std::string::npos) << s.message();
  EXPECT_EQ((*t)->asks(), 1);
  // The daemon's answer is in its cache now: a CACHE_ONLY Transposer gets it (and refuses it).
  TransposerOptions cache_only;
  cache_only.policy = v1::CACHE_ONLY;
  auto c = Transposer::ForSelector(client->get(), DeviceByIndex(0), 0, cache_only);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Prepare(p).status().code(), StatusCode::kFailedPrecondition);
  Problem other = p;
  other.rows = 97;
  EXPECT_EQ((*c)->Prepare(other).status().code(), StatusCode::kNotFound);
  // A device the daemon does not have: its error, unchanged.
  auto missing = Transposer::ForSelector(client->get(), DeviceByIndex(7), 0);
  ASSERT_TRUE(missing.ok());
  Status m = (*missing)->Prepare(p).status();
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.code(), StatusCode::kFailedPrecondition) << m.ToString();
  EXPECT_TRUE(daemon.Stop().ok());
}

}  // namespace
}  // namespace transposed
