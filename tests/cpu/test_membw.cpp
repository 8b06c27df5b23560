// B3 helpers: the host bandwidth probes and the FMA-rate probe return a plausible, positive
// rate and refuse sizes too small to run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

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

// The FMA ceiling: a plausible rate (any core does more than 100 M and fewer than 1 T
// single-precision FMAs per second per thread), and 0 for a count too small to run.
TEST(HostFmaRate, PlausibleAndRefusesNothingToDo) {
  constexpr std::int64_t kFmas = std::int64_t{1} << 24;
  constexpr double kPerThreadFloor = 1e8;
  constexpr double kPerThreadCeiling = 1e12;
  for (int threads : {1, 2}) {
    const double rate = cpu::measure_host_fma_rate(kFmas, threads);
    EXPECT_GT(rate, kPerThreadFloor) << threads;
    EXPECT_LT(rate, kPerThreadCeiling * threads) << threads;
  }
  EXPECT_EQ(cpu::measure_host_fma_rate(0, 2), 0.0);
}

TEST(HostBandwidth, TooSmallGivesZero) {
  EXPECT_EQ(cpu::measure_host_read_bandwidth(0, 2), 0.0);
  EXPECT_EQ(cpu::measure_host_copy_bandwidth(100, 4), 0.0);
}

}  // namespace
}  // namespace ladder
