// Which CPU producer run_route uses: the fast one (default) or the exact twin of the GPU's
// exact-DAG producer. One process-wide choice, set by set_producer() or, until then, by
// LADDER_CPU_PRODUCER.
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

constexpr const char* kProducerEnv = "LADDER_CPU_PRODUCER";
// -1: not chosen yet (read the environment on first use); otherwise a CpuProducer value.
std::atomic<int> g_producer{-1};

}  // namespace

const char* cpu_producer_name(CpuProducer p) { return p == CpuProducer::exact ? "exact" : "fast"; }

Result<CpuProducer> parse_cpu_producer(const std::string& name) {
  if (name == "fast") return CpuProducer::fast;
  if (name == "exact") return CpuProducer::exact;
  return make_error(ErrorCode::invalid_argument,
                    fmt::format("unknown CPU producer '{}': use fast (the default) or exact (the GPU's bit oracle)", name));
}

void set_producer(CpuProducer p) { g_producer.store(static_cast<int>(p), std::memory_order_relaxed); }

Result<CpuProducer> producer() {
  const int chosen = g_producer.load(std::memory_order_relaxed);
  if (chosen >= 0) return static_cast<CpuProducer>(chosen);
  const char* env = std::getenv(kProducerEnv);
  if (env == nullptr || *env == '\0') return CpuProducer::fast;
  Result<CpuProducer> parsed = parse_cpu_producer(env);
  if (!parsed.ok()) return make_error(ErrorCode::invalid_argument, fmt::format("{}: {}", kProducerEnv, parsed.status().message()));
  return parsed;
}

}  // namespace ladder::cpu
