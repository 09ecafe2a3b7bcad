// Property test of the variant-name parsers: the GPU kernel family's TransposeConfig::FromName
// and the CPU backend's CpuConfig::FromCandidate. Every name a backend offers parses back to the
// same configuration; random mutations of those names never crash a parser, and whatever a
// parser accepts is the canonical spelling of what it parsed (so one variant never has two names
// in the cache). Fixed seeds; a fraction of a second.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "transposed/kernels/config.h"
#include "tuner/cpu/cpu_backend.h"

namespace transposed {
namespace {

using kernels::TransposeConfig;

// Mutates `name`: character inserts, deletes and replacements from `alphabet`, and splices of a
// piece of another name.
std::string Mutate(std::string name, const std::vector<std::string>& others, std::mt19937& rng) {
  static const std::string alphabet = "0123456789.xabcdeilmnoprstuvwgkqz-_ \x00\xff";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t pos = rng() % (name.size() + 1);
    switch (rng() % 5) {
      case 0:
        name.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        break;
      case 1:
        if (pos < name.size()) name.erase(pos, 1);
        break;
      case 2:
        if (pos < name.size()) name[pos] = alphabet[rng() % alphabet.size()];
        break;
      case 3: {  // a digit run made longer (leading zeros, huge numbers)
        name.insert(pos, std::string(1 + rng() % 12, static_cast<char>('0' + rng() % 10)));
        break;
      }
      default: {
        const std::string& o = others[rng() % others.size()];
        const size_t a = rng() % (o.size() + 1);
        const size_t n = rng() % (o.size() - a + 1);
        name.replace(pos, rng() % (name.size() - pos + 1), o.substr(a, n));
      }
    }
  }
  return name;
}

TEST(VariantNamesTest, GpuFamilyNamesRoundTripAndMutationsAreCanonicalOrRefused) {
  std::vector<std::string> names;
  for (int es : {1, 2, 4, 8, 16}) {
    for (const TransposeConfig& c : kernels::FamilyConfigs(es)) {
      auto back = TransposeConfig::FromName(c.Name());
      ASSERT_TRUE(back.ok()) << c.Name() << ": " << back.status().ToString();
      EXPECT_TRUE(*back == c) << c.Name();
      auto by_params = TransposeConfig::FromParams(c.Params());
      ASSERT_TRUE(by_params.ok()) << c.Name();
      EXPECT_TRUE(*by_params == c) << c.Name();
      names.push_back(c.Name());
    }
  }
  ASSERT_FALSE(names.empty());
  std::mt19937 rng(20261123);
  int accepted = 0;
  for (int i = 0; i < 30000; ++i) {
    const std::string m = Mutate(names[rng() % names.size()], names, rng);
    auto c = TransposeConfig::FromName(m);
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << m;
      continue;
    }
    ++accepted;
    EXPECT_EQ(c->Name(), m) << "accepted a non-canonical spelling";
  }
  EXPECT_GT(accepted, 0);  // some mutations land on other valid names
}

TEST(VariantNamesTest, CpuNamesRoundTripAndMutationsAreCanonicalOrRefused) {
  CpuBackendOptions o;
  o.max_threads = 8;
  o.enable_test_faults = true;
  CpuBackend backend(o);
  std::set<std::string> unique;
  for (DType t : {DType::kU8, DType::kF16, DType::kF32, DType::kF64}) {
    for (int64_t n : {7, 64, 600, 2048}) {
      Problem p;
      p.rows = n;
      p.cols = n + 3;
      p.dtype = t;
      p.ld_out = n + 1;
      for (const Candidate& c : backend.Candidates(p)) {
        auto config = CpuConfig::FromCandidate(c);
        ASSERT_TRUE(config.ok()) << c.name << ": " << config.status().ToString();
        EXPECT_EQ(config->ToCandidate().name, c.name);
        EXPECT_EQ(config->ToCandidate().params, c.params);
        unique.insert(c.name);
      }
    }
  }
  const std::vector<std::string> names(unique.begin(), unique.end());
  ASSERT_FALSE(names.empty());
  std::mt19937 rng(11232026);
  int accepted = 0;
  for (int i = 0; i < 30000; ++i) {
    const std::string m = Mutate(names[rng() % names.size()], names, rng);
    auto c = CpuConfig::FromCandidate({m, {}});
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << m;
      continue;
    }
    ++accepted;
    EXPECT_EQ(c->ToCandidate().name, m) << "accepted a non-canonical spelling";
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace transposed
