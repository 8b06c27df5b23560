// The GPU suites compare the exact-DAG GPU producer with the CPU twins bit for bit, so the CPU
// side of every comparison runs the exact twin, not the fast CPU producer (the CPU default).
#include <gtest/gtest.h>

#include "ladder/cpu/cpu_backend.hpp"

namespace {

class ExactCpuTwin : public ::testing::Environment {
 public:
  void SetUp() override { ladder::cpu::set_producer(ladder::cpu::CpuProducer::exact); }
};

[[maybe_unused]] ::testing::Environment* const kExactCpuTwin = ::testing::AddGlobalTestEnvironment(new ExactCpuTwin);

}  // namespace
