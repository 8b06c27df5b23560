// The engine's trace records the block partition the device's producer folds by
// (DeviceBackend::schedule), never one the engine derives for itself: the CUDA tensor-core
// producer folds by tc_schedule, the CPU and the exact DAG by the pinned schedule. A device
// that reports a partition of its own must find exactly that one in every trace entry.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "cpu/batch_sweep.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/device_api.hpp"
#include "ladder/engine.hpp"

namespace ladder {
namespace {

// The pinned schedule with half its workgroups (rounded up): a partition no device uses, so a
// trace that shows it can only have asked the device.
Schedule own_partition(int visible) {
  Schedule s = pinned_schedule(visible);
  s.nwg = (s.nwg + 1) / 2;
  return s;
}

// The CPU device, reporting own_partition as its producer's.
class OwnPartitionDevice final : public DeviceBackend {
 public:
  explicit OwnPartitionDevice(std::unique_ptr<DeviceBackend> inner) : inner_(std::move(inner)) {}
  Device device() const override { return inner_->device(); }
  std::string description() const override { return "own-partition " + inner_->description(); }
  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    return inner_->create_sequence(cfgs);
  }
  Status prepare(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    return inner_->prepare(seqs, steps);
  }
  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    return inner_->run(seqs, steps);
  }
  Schedule schedule(int visible) const override { return own_partition(visible); }

 private:
  std::unique_ptr<DeviceBackend> inner_;
};

bool same(const Schedule& a, const Schedule& b) {
  return a.blocks == b.blocks && a.nwg == b.nwg && a.nsg == b.nsg;
}

TEST(TracePartition, EngineRecordsTheDevicesPartition) {
  const Geometry g = test::batch_geometry();
  EngineOptions opt;
  opt.record_trace = true;
  opt.initial_growing_capacity = test::kBatchInitialGrowing;
  Result<std::unique_ptr<Engine>> made =
      Engine::create(g, opt, std::make_unique<OwnPartitionDevice>(cpu::create_backend(g).value()));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  Engine& e = **made;
  // Positions deep enough that the pinned schedule has several workgroups (so halving them
  // differs from it) on both layer classes.
  constexpr int kPositions = 200;
  const std::size_t out_n = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  int differs = 0;
  for (int p = 0; p < kPositions; ++p) {
    const test::TokenData d = test::token_data(g, 0, p);
    std::vector<float> out(out_n);
    e.clear_trace();
    const Status s = e.encode(std::vector<SequenceToken>{{0, p, {d.q.data(), d.k.data(), d.v.data(), out.data()}}});
    ASSERT_TRUE(s.ok()) << "position " << p << ": " << s.to_string();
    ASSERT_EQ(e.trace().size(), static_cast<std::size_t>(g.n_layers));
    for (const TraceEntry& t : e.trace()) {
      EXPECT_TRUE(same(t.schedule, own_partition(t.visible)))
          << "position " << p << " layer " << t.layer << ": the trace holds nwg " << t.schedule.nwg << ", nsg "
          << t.schedule.nsg << ", the device reports nwg " << own_partition(t.visible).nwg;
      if (!same(t.schedule, pinned_schedule(t.visible))) ++differs;
    }
  }
  EXPECT_GT(differs, 0) << "the positions never reach a partition that differs from the pinned one";
}

// The CPU device reports the pinned schedule (its producers' and its twins' partition).
TEST(TracePartition, CpuDeviceReportsThePinnedSchedule) {
  const Geometry g = test::batch_geometry();
  std::unique_ptr<DeviceBackend> dev = cpu::create_backend(g).value();
  for (int visible : {0, 1, 31, 32, 33, 100, 511, 4096, 4097, 12288, 131072}) {
    EXPECT_TRUE(same(dev->schedule(visible), pinned_schedule(visible))) << "visible " << visible;
  }
}

}  // namespace
}  // namespace ladder
