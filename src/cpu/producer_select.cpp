// Which CPU producer run_route uses: the fast one (default) or the exact twin of the GPU's
// exact-DAG producer. One process-wide choice, set by set_producer() or, until then, by
// LADDER_CPU_PRODUCER.
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "cpu/producer_fast_avx512.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

constexpr const char* kProducerEnv = "LADDER_CPU_PRODUCER";
// -1: not chosen yet (read the environment on first use); otherwise a CpuProducer value.
std::atomic<int> g_producer{-1};
constexpr const char* kVectorsEnv = "LADDER_CPU_VECTORS";
// -1: not chosen yet; otherwise a CpuVectors value.
std::atomic<int> g_vectors{-1};

// One process-wide choice: what set_*() chose, else the environment variable `env` parsed by
// `parse` (its error prefixed with the variable's name), else `fallback`. The environment's
// answer is kept on its first successful read (as if set_*() had chosen it), so the per-layer
// calls on the hot path read an atomic, not the environment; a bad value is refused on every
// read, never kept.
template <class T>
Result<T> chosen_or_env(std::atomic<int>& chosen, const char* env, Result<T> (*parse)(const std::string&),
                        T fallback) {
  int set = chosen.load(std::memory_order_relaxed);
  if (set >= 0) return static_cast<T>(set);
  const char* value = std::getenv(env);
  T answer = fallback;
  if (value != nullptr && *value != '\0') {
    Result<T> parsed = parse(value);
    if (!parsed.ok()) return make_error(parsed.status().code(), fmt::format("{}: {}", env, parsed.status().message()));
    answer = *parsed;
  }
  // A set_*() that raced this read wins.
  if (!chosen.compare_exchange_strong(set, static_cast<int>(answer), std::memory_order_relaxed))
    return static_cast<T>(set);
  return answer;
}

}  // namespace

const char* cpu_producer_name(CpuProducer p) { return p == CpuProducer::exact ? "exact" : "fast"; }

Result<CpuProducer> parse_cpu_producer(const std::string& name) {
  if (name == "fast") return CpuProducer::fast;
  if (name == "exact") return CpuProducer::exact;
  return make_error(ErrorCode::invalid_argument,
                    fmt::format("unknown CPU producer '{}': use fast (the default) or exact (the GPU's bit oracle)", name));
}

void set_producer(CpuProducer p) { g_producer.store(static_cast<int>(p), std::memory_order_relaxed); }

Result<CpuProducer> producer() { return chosen_or_env(g_producer, kProducerEnv, parse_cpu_producer, CpuProducer::fast); }

const char* cpu_vectors_name(CpuVectors v) { return v == CpuVectors::avx512 ? "avx512" : "avx2"; }

Result<CpuVectors> parse_cpu_vectors(const std::string& name) {
  if (name == "avx2") return CpuVectors::avx2;
  if (name == "avx512") {
    if (!detail::cpu_has_avx512())
      return make_error(ErrorCode::unsupported, "CPU vectors 'avx512': this CPU has no AVX-512F (use avx2)");
    return CpuVectors::avx512;
  }
  return make_error(ErrorCode::invalid_argument,
                    fmt::format("unknown CPU vectors '{}': use avx2 or avx512 (the default where the CPU has it)", name));
}

void set_vectors(CpuVectors v) { g_vectors.store(static_cast<int>(v), std::memory_order_relaxed); }

Result<CpuVectors> vectors() {
  return chosen_or_env(g_vectors, kVectorsEnv, parse_cpu_vectors,
                       detail::cpu_has_avx512() ? CpuVectors::avx512 : CpuVectors::avx2);
}

}  // namespace ladder::cpu
