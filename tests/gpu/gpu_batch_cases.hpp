// The GPU batch sweeps' cases, shared by test_gpu_batch.cpp and test_gpu_device_io.cpp: every
// switch setting of the CPU sweep (every route) in graph replay, plus the default in eager
// launches, with the two one-kernel-per-layer forms (the last CTA merging; the grid form's
// barrier, then every CTA merging some heads) and with the store-fused producer and the reducer
// behind it, all with the engine's PDL (LaunchTuning::programmatic: each layer's kernel starts
// while the previous one runs, the first right behind the state fetch) and the store-fused form
// also without it.
#pragma once

#include <vector>

#include "cpu/batch_sweep.hpp"
#include "ladder/cuda_engine.hpp"

namespace ladder::test {

struct GpuBatchCase {
  const char* name;
  BatchSwitchCase switches;
  bool graph;
  cuda::GpuFusion fusion;
  bool programmatic = cuda::CudaEngineOptions{}.tuning.programmatic;
};

inline std::vector<GpuBatchCase> gpu_batch_cases() {
  std::vector<GpuBatchCase> out;
  for (const BatchSwitchCase& c : batch_switch_cases()) out.push_back({c.name, c, true, cuda::GpuFusion::separate});
  const BatchSwitchCase def = batch_switch_cases()[0];
  out.push_back({"default_eager", def, false, cuda::GpuFusion::separate});
  out.push_back({"default_fused", def, true, cuda::GpuFusion::fused});
  out.push_back({"default_store_fused", def, true, cuda::GpuFusion::store_fused});
  out.push_back({"default_grid", def, true, cuda::GpuFusion::grid});
  out.push_back({"default_store_fused_no_pdl", def, true, cuda::GpuFusion::store_fused, false});
  return out;
}

}  // namespace ladder::test
