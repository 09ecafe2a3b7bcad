// RedisCeilingBoard against a real redis-server: two nodes see each other's latest ceilings per
// class and size bucket, garbage in the hash is left out, and a Redis that went away and came
// back is reconnected to.
#include "server/fleet/ceiling_board.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "testing/redis_process.h"

namespace transposed {
namespace {

SharedStoreOptions Options(const testing::RedisProcess& redis) {
  SharedStoreOptions o;
  o.url = *ParseRedisUrl(redis.url());
  o.timeout_seconds = 2;
  return o;
}

TEST(CeilingBoard, NodesSeeEachOthersLatestCeilingsOfTheirClassAndSize) {
  testing::RedisProcess redis;
  ASSERT_TRUE(redis.Start().ok());
  RedisCeilingBoard node_a(Options(redis)), node_b(Options(redis));
  auto first = node_a.Exchange("cls", 26, "GPU-a", 4000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->empty());
  auto b = node_b.Exchange("cls", 26, "GPU-b", 3000);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, std::vector<double>{4000});
  // The latest value per device; other classes and buckets apart.
  ASSERT_TRUE(node_a.Exchange("cls", 26, "GPU-a", 4100).ok());
  ASSERT_TRUE(node_a.Exchange("other", 26, "GPU-x", 1).ok());
  ASSERT_TRUE(node_a.Exchange("cls", 27, "GPU-y", 2).ok());
  b = node_b.Exchange("cls", 26, "GPU-b", 3000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, std::vector<double>{4100});

  // Garbage written by someone else is never a figure.
  auto c = RedisConnection::Connect(Options(redis),
                                    std::chrono::steady_clock::now() + std::chrono::seconds(2));
  ASSERT_TRUE(c.ok());
  const std::string key = CeilingBoardKey("cls", 26);
  ASSERT_TRUE((*c)->Pipeline({{"HSET", key, "GPU-bad1", "nan"},
                              {"HSET", key, "GPU-bad2", "-5"},
                              {"HSET", key, "GPU-bad3", "12abc"},
                              {"HSET", key, "GPU-ok", "3900"}},
                             std::chrono::steady_clock::now() + std::chrono::seconds(2))
                  .ok());
  b = node_b.Exchange("cls", 26, "GPU-b", 3000);
  ASSERT_TRUE(b.ok());
  std::vector<double> got = *b;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<double>{3900, 4100}));
  auto ttl =
      (*c)->Pipeline({{"PTTL", key}}, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  ASSERT_TRUE(ttl.ok());
  EXPECT_GT((*ttl)[0].integer, 6LL * 24 * 3600 * 1000);

  // Redis gone: an error (no verdict); back (empty): reconnected.
  redis.Kill();
  EXPECT_FALSE(node_b.Exchange("cls", 26, "GPU-b", 3000).ok());
  ASSERT_TRUE(redis.Start().ok());
  b = node_b.Exchange("cls", 26, "GPU-b", 3000);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->empty());
}

}  // namespace
}  // namespace transposed
