// B3 helper: the host bandwidth probes return a plausible, positive rate and refuse sizes too
// small to split.
#include <gtest/gtest.h>

#include <cmath>

#include "ladder/cpu/membw.hpp"

namespace ladder {
namespace {

constexpr std::size_t kProbeBytes = std::size_t{16} << 20;  // small: this checks the plumbing only
// Any real machine streams faster than 100 MB/s and slower than 100 TB/s.
constexpr double kFloor = 1e8;
constexpr double kCeiling = 1e14;

TEST(HostBandwidth, ReadAndCopyArePlausible) {
  for (int threads : {1, 2}) {
    const double read = cpu::measure_host_read_bandwidth(kProbeBytes, threads);
    const double copy = cpu::measure_host_copy_bandwidth(kProbeBytes, threads);
    EXPECT_GT(read, kFloor) << threads;
    EXPECT_LT(read, kCeiling) << threads;
    EXPECT_GT(copy, kFloor) << threads;
    EXPECT_LT(copy, kCeiling) << threads;
  }
}

TEST(HostBandwidth, TooSmallGivesZero) {
  EXPECT_EQ(cpu::measure_host_read_bandwidth(0, 2), 0.0);
  EXPECT_EQ(cpu::measure_host_copy_bandwidth(100, 4), 0.0);
}

}  // namespace
}  // namespace ladder
