#include "core/idle_ceilings.h"

#include <gtest/gtest.h>

namespace transposed {
namespace {

TEST(IdleCeilingsTest, NoReferenceWithoutANearIdleSize) {
  IdleCeilings c;
  EXPECT_EQ(c.ReferenceFor(1 << 20), 0);
  c.Add(1 << 20, 1000);
  EXPECT_EQ(c.ReferenceFor(8 << 20), 0);    // 8x larger than the only idle size
  EXPECT_EQ(c.ReferenceFor(100 << 10), 0);  // ~10x smaller
  c.Add(0, 1000);                           // ignored
  c.Add(1 << 10, 0);                        // ignored
  EXPECT_EQ(c.size(), 1u);
}

TEST(IdleCeilingsTest, TheReferenceIsALowerBoundFromTheNearestSizes) {
  IdleCeilings c;
  c.Add(4 << 20, 2000);
  // Only a larger size: scaled down by the size ratio (a smaller copy never takes longer).
  EXPECT_DOUBLE_EQ(c.ReferenceFor(2 << 20), 1000);
  // Only a smaller (or equal) size: as it is.
  EXPECT_DOUBLE_EQ(c.ReferenceFor(4 << 20), 2000);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(12 << 20), 2000);
  // Both: the larger bound.
  c.Add(1 << 20, 900);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(2 << 20), 1000);
  c.Add(3 << 20, 2700);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(2 << 20), 1800);
  // The best idle ceiling of a size is kept.
  c.Add(4 << 20, 1500);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(4 << 20), 2000);
  c.Add(4 << 20, 3000);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(4 << 20), 3000);
}

TEST(IdleCeilingsTest, BoundedOldestFirst) {
  IdleCeilings c;
  for (size_t i = 0; i < IdleCeilings::kMaxPoints + 10; ++i)
    c.Add(static_cast<int64_t>(1000 + i), 50);
  EXPECT_EQ(c.size(), IdleCeilings::kMaxPoints);
  EXPECT_DOUBLE_EQ(c.ReferenceFor(1000), 50 * 1000.0 / 1010);  // 1000..1009 went
}

TEST(IdleCeilingsTest, CeilingDrop) {
  EXPECT_DOUBLE_EQ(CeilingDrop(1000, 4000), 0.75);
  EXPECT_EQ(CeilingDrop(4100, 4000), 0);
  EXPECT_EQ(CeilingDrop(1000, 0), 0);
  EXPECT_EQ(CeilingDrop(0, 4000), 0);
}

}  // namespace
}  // namespace transposed
