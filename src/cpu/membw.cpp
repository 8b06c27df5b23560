#include "ladder/cpu/membw.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "cpu/producer_fast_avx512.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

// Timed repetitions per measurement; the median discards a warm-up outlier or a scheduler hiccup.
constexpr int kReps = 7;
// Per-thread slices are multiples of this, so every slice starts on a cache line and the vector
// loop has no remainder.
constexpr std::size_t kSliceAlign = 4096;
// The accumulators' result is published here so the compiler cannot drop the reads.
std::atomic<std::uint64_t> g_sink{0};

int resolve_threads(int threads) { return threads > 0 ? threads : usable_cpus().count; }

struct AlignedBuffer {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kSliceAlign}); }
  };
  std::unique_ptr<std::byte[], Free> data;
  explicit AlignedBuffer(std::size_t n)
      : data(static_cast<std::byte*>(::operator new[](n, std::align_val_t{kSliceAlign}, std::nothrow))) {}
};

std::uint64_t read_slice(const std::byte* p, std::size_t n) {
#if defined(__AVX2__)
  // Four independent accumulators keep several loads in flight per core.
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  constexpr std::size_t kStep = 4 * sizeof(__m256i);
  for (std::size_t i = 0; i + kStep <= n; i += kStep) {
    const auto* v = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(v));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + 1));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + 2));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + 3));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<std::uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
#else
  std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  constexpr std::size_t kStep = 4 * sizeof(std::uint64_t);
  for (std::size_t i = 0; i + kStep <= n; i += kStep) {
    std::uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    a0 ^= w[0];
    a1 ^= w[1];
    a2 ^= w[2];
    a3 ^= w[3];
  }
  return a0 ^ a1 ^ a2 ^ a3;
#endif
}

// Runs `work(thread, begin, end)` over `bytes` split into per-thread slices, kReps times, with
// all threads released together; returns the median wall time of one repetition in seconds.
template <class Work>
double median_seconds(std::size_t bytes, int threads, Work work) {
  const std::size_t slice = (bytes / static_cast<std::size_t>(threads)) / kSliceAlign * kSliceAlign;
  std::vector<double> seconds;
  seconds.reserve(kReps);
  std::chrono::steady_clock::time_point start;
  bool timing = false;
  // Phase completions alternate: start of a repetition, end of a repetition.
  std::barrier sync(threads, [&]() noexcept {
    const auto now = std::chrono::steady_clock::now();
    if (timing) seconds.push_back(std::chrono::duration<double>(now - start).count());
    start = now;
    timing = !timing;
  });
  const auto body = [&](int t) {
    const std::size_t begin = slice * static_cast<std::size_t>(t);
    for (int rep = 0; rep < kReps; ++rep) {
      sync.arrive_and_wait();
      work(t, begin, begin + slice);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (std::thread& th : pool) th.join();
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

#if defined(__AVX2__) && defined(__FMA__)
// Independent accumulator chains: with a 4-cycle FMA latency and 2 FMA ports, 8 chains are
// needed to keep both ports busy; 12 leave slack for a 5-cycle latency.
constexpr int kFmaChains = 12;
constexpr int kFmaLanes = 8;
#else
constexpr int kFmaChains = 8;
constexpr int kFmaLanes = 1;
#endif

// `iterations` x kFmaChains x kFmaLanes fused multiply-adds on registers; the result is
// published so the chains are not removed.
void fma_loop(std::int64_t iterations) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  // x * a + b with a just below 1 and b small keeps every value finite and normal for ever.
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-3f);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[kFmaLanes];
  _mm256_store_ps(lanes, sum);
  g_sink.fetch_xor(static_cast<std::uint64_t>(lanes[0]), std::memory_order_relaxed);
#else
  float acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = static_cast<float>(c);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = std::fma(acc[c], 0.999999f, 1e-3f);
  float sum = 0.0f;
  for (float x : acc) sum += x;
  g_sink.fetch_xor(static_cast<std::uint64_t>(sum), std::memory_order_relaxed);
#endif
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
constexpr int kFmaLanes512 = 16;
// The same loop with 16-lane FMAs (compiled for AVX-512F whatever the build's flags; run only
// where the CPU has it).
__attribute__((target("avx512f"))) void fma_loop_avx512(std::int64_t iterations) {
  __m512 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-3f);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kFmaChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[kFmaLanes512];
  _mm512_store_ps(lanes, sum);
  g_sink.fetch_xor(static_cast<std::uint64_t>(lanes[0]), std::memory_order_relaxed);
}
#endif

// FMAs per second over n threads of `loop`, `lanes` FMAs per chain step.
template <class Loop>
double fma_rate(std::int64_t fmas_per_thread, int n, int lanes, Loop&& loop) {
  const std::int64_t per_iteration = static_cast<std::int64_t>(kFmaChains) * lanes;
  const std::int64_t iterations = fmas_per_thread / per_iteration;
  if (iterations <= 0) return 0.0;
  // median_seconds splits a byte count into slices; here every thread runs the whole loop.
  const double s = median_seconds(kSliceAlign * static_cast<std::size_t>(n), n,
                                  [&](int, std::size_t, std::size_t) { loop(iterations); });
  return s > 0.0 ? static_cast<double>(iterations * per_iteration * n) / s : 0.0;
}

}  // namespace

double measure_host_fma_rate(std::int64_t fmas_per_thread, int threads) {
  const int n = resolve_threads(threads);
  double rate = fma_rate(fmas_per_thread, n, kFmaLanes, fma_loop);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (cpu::detail::cpu_has_avx512())
    rate = std::max(rate, fma_rate(fmas_per_thread, n, kFmaLanes512, fma_loop_avx512));
#endif
  return rate;
}

double measure_host_read_bandwidth(std::size_t bytes, int threads) {
  const int n = resolve_threads(threads);
  const std::size_t slice = (bytes / static_cast<std::size_t>(n)) / kSliceAlign * kSliceAlign;
  if (slice == 0) return 0.0;
  const std::size_t total = slice * static_cast<std::size_t>(n);
  AlignedBuffer buf(total);
  if (!buf.data) return 0.0;
  std::memset(buf.data.get(), 1, total);
  const double s = median_seconds(total, n, [&](int, std::size_t b, std::size_t e) {
    g_sink.fetch_xor(read_slice(buf.data.get() + b, e - b), std::memory_order_relaxed);
  });
  return s > 0.0 ? static_cast<double>(total) / s : 0.0;
}

double measure_host_copy_bandwidth(std::size_t bytes, int threads) {
  const int n = resolve_threads(threads);
  const std::size_t slice = (bytes / static_cast<std::size_t>(n)) / kSliceAlign * kSliceAlign;
  if (slice == 0) return 0.0;
  const std::size_t total = slice * static_cast<std::size_t>(n);
  AlignedBuffer src(total), dst(total);
  if (!src.data || !dst.data) return 0.0;
  std::memset(src.data.get(), 1, total);
  std::memset(dst.data.get(), 2, total);
  const double s = median_seconds(total, n, [&](int, std::size_t b, std::size_t e) {
    std::memcpy(dst.data.get() + b, src.data.get() + b, e - b);
  });
  g_sink.fetch_xor(static_cast<std::uint64_t>(dst.data[total / 2]), std::memory_order_relaxed);
  return s > 0.0 ? 2.0 * static_cast<double>(total) / s : 0.0;
}

}  // namespace ladder::cpu
