// Test-armed failures at the allocation points (include/ladder/fault_injection.hpp).
#include "ladder/fault_injection.hpp"

#include <atomic>

namespace ladder {
namespace {

// -1: disarmed. Otherwise the index (from 0) of the point to fail among those passed since arming.
std::atomic<long long> g_fail_at{-1};
std::atomic<long long> g_passed{0};

}  // namespace

namespace testing {

void fail_allocation_point(long long n) {
  g_passed.store(0, std::memory_order_relaxed);
  g_fail_at.store(n < 0 ? -1 : n, std::memory_order_relaxed);
}

long long allocation_points_passed() { return g_passed.load(std::memory_order_relaxed); }

}  // namespace testing

namespace detail {

bool injected_allocation_failure() {
  if (g_fail_at.load(std::memory_order_relaxed) < 0) return false;
  const long long index = g_passed.fetch_add(1, std::memory_order_relaxed);
  long long armed = index;
  // The armed point fails once: it disarms itself, so a retry of the same call succeeds.
  return g_fail_at.compare_exchange_strong(armed, -1, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace ladder
