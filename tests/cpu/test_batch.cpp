// E3 on the CPU: batched decode through the one engine, P4 (a sequence's bits do not depend on
// the batch it is decoded in or on the worker count), the batch API's refusals, and the
// all-or-nothing rule under injected failures at each point where a call allocates.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "cpu/batch_sweep.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/engine.hpp"

namespace ladder {
namespace {

using test::BatchRun;
using test::Prompt;
using test::prompt_rows;
using test::batch_geometry;
using test::first_difference;
using test::run_batch;

// Restores the worker count a test changed.
struct ThreadsGuard {
  int before = cpu::threads();
  ~ThreadsGuard() { (void)cpu::set_threads(before); }
};

constexpr int kSteps = 160;

class CpuBatchInvariance : public ::testing::TestWithParam<test::BatchSwitchCase> {};

TEST_P(CpuBatchInvariance, TargetBitsDoNotDependOnTheBatchOrTheThreadCount) {
  const ThreadsGuard restore;
  const Switches sw = GetParam().sw;
  ASSERT_TRUE(cpu::set_threads(1).ok());
  const BatchRun alone = run_batch(Device::cpu, sw, 0, kSteps, 1);
  ASSERT_EQ(alone.target_out.size(), static_cast<std::size_t>(kSteps));
  EXPECT_LE(alone.worst_error, test::kBatchRelTol);
  const int threads_for[] = {2, 3, 4};
  const int others_for[] = {1, 7, 31};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cpu::set_threads(threads_for[i]).ok());
    // Alone again on several workers: a call of one sequence runs its layers as one pool job
    // (kCpuGroupLayersUpToBatch), a batched call one job per layer; both give the same bits.
    const BatchRun alone_again = run_batch(Device::cpu, sw, 0, kSteps, 1);
    EXPECT_EQ(first_difference(alone, alone_again), -1) << "alone on " << threads_for[i] << " threads";
    const BatchRun batch = run_batch(Device::cpu, sw, others_for[i], kSteps, 2 + static_cast<unsigned>(i));
    EXPECT_EQ(first_difference(alone, batch), -1)
        << "with " << others_for[i] << " other sequences on " << threads_for[i] << " threads";
    EXPECT_LE(batch.worst_error, test::kBatchRelTol) << others_for[i] << " others";
    EXPECT_EQ(batch.routes, alone.routes);
  }
}

INSTANTIATE_TEST_SUITE_P(Switches, CpuBatchInvariance, ::testing::ValuesIn(test::batch_switch_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The three switch settings between them take every route of the ladder.
TEST(CpuBatch, TheSweepVisitsEveryRoute) {
  std::set<Route> all;
  for (const test::BatchSwitchCase& c : test::batch_switch_cases()) {
    const BatchRun r = run_batch(Device::cpu, c.sw, 0, kSteps, 1);
    all.insert(r.routes.begin(), r.routes.end());
  }
  EXPECT_EQ(all, (std::set<Route>{Route::vec, Route::splitk, Route::interleaved, Route::staged}));
}

// A small engine and one token's inputs for any of its sequences.
struct Fixture {
  Geometry g = batch_geometry();
  std::vector<test::TokenData> data;
  std::vector<std::vector<float>> outs;

  SequenceToken token(SequenceId id, std::uint64_t key, int position) {
    data.push_back(test::token_data(g, key, position));
    outs.emplace_back(static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim, std::nanf(""));
    const test::TokenData& d = data.back();
    return {id, position, {d.q.data(), d.k.data(), d.v.data(), outs.back().data()}};
  }
  void reserve(std::size_t n) {
    data.reserve(n);
    outs.reserve(n);
  }
};

using test::all_states;

TEST(CpuBatch, SequencesAreAddedAndRemovedBetweenCalls) {
  Fixture f;
  f.reserve(64);
  Result<std::unique_ptr<Engine>> made = Engine::create(f.g, EngineOptions{});
  ASSERT_TRUE(made.ok());
  Engine& e = **made;
  EXPECT_EQ(e.sequences(), std::vector<SequenceId>{0});
  const SequenceId a = e.add_sequence().value();
  const SequenceId b = e.add_sequence().value();
  EXPECT_EQ(e.sequences(), (std::vector<SequenceId>{0, a, b}));
  std::vector<SequenceToken> call{f.token(a, 7, 0), f.token(0, 0, 0)};
  ASSERT_TRUE(e.encode(call).ok());
  EXPECT_EQ(e.plane_state(a, 0).next_position, 1);
  EXPECT_EQ(e.plane_state(b, 0).next_position, 0);
  ASSERT_TRUE(e.remove_sequence(a).ok());
  EXPECT_EQ(e.sequences(), (std::vector<SequenceId>{0, b}));
  const SequenceId c = e.add_sequence().value();
  EXPECT_NE(c, a) << "ids are never reused";
  EXPECT_EQ(e.plane_state(c, 0).next_position, 0) << "a new sequence starts empty";
  // A removed id is refused, as is an id that never existed.
  std::vector<SequenceToken> stale{f.token(a, 7, 1)};
  EXPECT_EQ(e.encode(stale).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(e.remove_sequence(a).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(e.remove_sequence(12345).code(), ErrorCode::invalid_argument);
}

TEST(CpuBatch, BadCallsAreRefusedAndLeaveEverySequenceUntouched) {
  Fixture f;
  f.reserve(64);
  Result<std::unique_ptr<Engine>> made = Engine::create(f.g, EngineOptions{});
  ASSERT_TRUE(made.ok());
  Engine& e = **made;
  const SequenceId a = e.add_sequence().value();
  std::vector<SequenceToken> first{f.token(0, 0, 0), f.token(a, 5, 0)};
  ASSERT_TRUE(e.encode(first).ok());
  const auto before = all_states(e);

  EXPECT_EQ(e.encode(std::span<const SequenceToken>{}).code(), ErrorCode::invalid_argument) << "empty call";
  std::vector<SequenceToken> twice{f.token(a, 5, 1), f.token(a, 5, 1)};
  EXPECT_EQ(e.encode(twice).code(), ErrorCode::invalid_argument) << "one sequence twice";
  // Sequence 0 is fine, a's position is skipped: nothing is appended anywhere.
  std::vector<SequenceToken> skipped{f.token(0, 0, 1), f.token(a, 5, 3)};
  const Status s = e.encode(skipped);
  EXPECT_EQ(s.code(), ErrorCode::out_of_order) << s.to_string();
  EXPECT_NE(s.message().find(fmt::format("sequence {}", a)), std::string::npos) << s.message();
  SequenceToken no_q = f.token(a, 5, 1);
  no_q.io.q = nullptr;
  EXPECT_EQ(e.encode(std::span<const SequenceToken>(&no_q, 1)).code(), ErrorCode::invalid_argument);
  // Activations in device memory: the CPU device reads host memory only; and one call's
  // activations must all live in one kind of memory (the host-memory token is refused with them).
  SequenceToken on_device = f.token(a, 5, 1);
  on_device.io.memory = Memory::device;
  const Status dev_refused = e.encode(std::span<const SequenceToken>(&on_device, 1));
  EXPECT_EQ(dev_refused.code(), ErrorCode::invalid_argument) << dev_refused.to_string();
  EXPECT_NE(dev_refused.message().find("device memory"), std::string::npos) << dev_refused.message();
  std::vector<SequenceToken> mixed{f.token(0, 0, 1), on_device};
  const Status mixed_refused = e.encode(mixed);
  EXPECT_EQ(mixed_refused.code(), ErrorCode::invalid_argument) << mixed_refused.to_string();
  EXPECT_NE(mixed_refused.message().find("one kind of memory"), std::string::npos) << mixed_refused.message();
  EXPECT_EQ(all_states(e), before);
  // The next good call works.
  std::vector<SequenceToken> next{f.token(a, 5, 1), f.token(0, 0, 1)};
  EXPECT_TRUE(e.encode(next).ok());
}

// A device that fails where told: the create_sequence, reserve (a growing plane's rows) or run
// of a chosen call, around the real CPU device.
class FaultyDevice final : public DeviceBackend {
 public:
  explicit FaultyDevice(std::unique_ptr<DeviceBackend> inner) : inner_(std::move(inner)) {}
  int fail_reserve_at = -1;  // the n-th reserve from now fails (0 = the next)
  // Every reserve that grows a plane fails (the real out-of-memory point: a reserve that only
  // plans an append allocates nothing). A plane grows when a step's planned capacity exceeds
  // the largest this sequence's layer has been planned at.
  bool fail_growth = false;
  bool fail_next_run = false;
  bool fail_next_create = false;

  Device device() const override { return inner_->device(); }
  std::string description() const override { return "faulty " + inner_->description(); }
  Result<std::unique_ptr<DeviceSequence>> create_sequence(const std::vector<PlaneConfig>& cfgs) override {
    if (fail_next_create) {
      fail_next_create = false;
      return make_error(ErrorCode::out_of_memory, "injected: no memory for a sequence");
    }
    Result<std::unique_ptr<DeviceSequence>> s = inner_->create_sequence(cfgs);
    if (!s) return s.status();
    return std::unique_ptr<DeviceSequence>(std::make_unique<Wrapped>(this, std::move(s).value()));
  }
  Status prepare(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    return inner_->prepare(unwrapped(seqs), steps);
  }
  Status run(std::span<DeviceSequence* const> seqs, std::span<const SequenceStep> steps) override {
    if (fail_next_run) {
      fail_next_run = false;
      return make_error(ErrorCode::device_error, "injected: the device failed");
    }
    return inner_->run(unwrapped(seqs), steps);
  }

 private:
  static std::vector<DeviceSequence*> unwrapped(std::span<DeviceSequence* const> seqs) {
    std::vector<DeviceSequence*> inner;
    for (DeviceSequence* s : seqs) inner.push_back(static_cast<Wrapped*>(s)->inner.get());
    return inner;
  }

  struct Wrapped final : DeviceSequence {
    Wrapped(FaultyDevice* d, std::unique_ptr<DeviceSequence> s) : dev(d), inner(std::move(s)) {}
    Status reserve(const SequenceStep& step) override {
      bool grows = false;
      for (std::size_t i = 0; i < step.layers.size(); ++i) {
        int& seen = capacity[static_cast<std::size_t>(step.first_layer) + i];
        grows = grows || (seen > 0 && step.layers[i].next.capacity > seen);
      }
      if (dev->fail_growth && grows) return make_error(ErrorCode::out_of_memory, "injected: a plane's grown rows");
      if (dev->fail_reserve_at == 0) {
        dev->fail_reserve_at = -1;
        return make_error(ErrorCode::out_of_memory, "injected: a growing plane's rows");
      }
      if (dev->fail_reserve_at > 0) --dev->fail_reserve_at;
      const Status s = inner->reserve(step);
      if (s.ok())
        for (std::size_t i = 0; i < step.layers.size(); ++i) {
          int& seen = capacity[static_cast<std::size_t>(step.first_layer) + i];
          seen = std::max(seen, step.layers[i].next.capacity);
        }
      return s;
    }
    void release() override { inner->release(); }
    FaultyDevice* dev;
    std::unique_ptr<DeviceSequence> inner;
    std::map<std::size_t, int> capacity;  // per layer: the largest capacity planned so far
  };
  std::unique_ptr<DeviceBackend> inner_;
};

TEST(CpuBatch, InjectedFailuresLeaveEverySequenceAsItWas) {
  const Geometry g = batch_geometry();
  EngineOptions opt;
  opt.record_trace = true;
  opt.initial_growing_capacity = test::kBatchInitialGrowing;
  auto dev = std::make_unique<FaultyDevice>(cpu::create_backend(g).value());
  FaultyDevice* faulty = dev.get();
  Result<std::unique_ptr<Engine>> made = Engine::create(g, opt, std::move(dev));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  Engine& e = **made;
  // The same calls on a clean engine: the faulty one must end with the same bits.
  Result<std::unique_ptr<Engine>> clean_made = Engine::create(g, opt);
  ASSERT_TRUE(clean_made.ok());
  Engine& clean = **clean_made;

  faulty->fail_next_create = true;
  EXPECT_EQ(e.add_sequence().status().code(), ErrorCode::out_of_memory);
  EXPECT_EQ(e.sequences(), std::vector<SequenceId>{0}) << "a failed add leaves no sequence behind";
  const SequenceId ids[] = {e.add_sequence().value(), e.add_sequence().value(), e.add_sequence().value()};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(clean.add_sequence().value(), ids[i]);

  Fixture f;
  f.reserve(4096);
  for (int pos = 0; pos < 40; ++pos) {
    // Position 8, 16 and 32 grow the NoPE planes (initial capacity 8): a failure there is the
    // out-of-memory-while-growing case. Every few tokens one reserve fails, at a varying
    // sequence of the call.
    if (pos % 3 == 1) {
      const auto states = all_states(e);
      const std::size_t trace = e.trace().size();
      faulty->fail_reserve_at = pos % 4;
      std::vector<SequenceToken> call;
      for (int i = 0; i < 4; ++i) call.push_back(f.token(i == 0 ? 0 : ids[i - 1], static_cast<std::uint64_t>(i), pos));
      const Status s = e.encode(call);
      EXPECT_EQ(s.code(), ErrorCode::out_of_memory) << "position " << pos;
      EXPECT_EQ(all_states(e), states) << "position " << pos;
      EXPECT_EQ(e.trace().size(), trace);
    }
    std::vector<SequenceToken> call, clean_call;
    for (int i = 0; i < 4; ++i) {
      const SequenceId id = i == 0 ? 0 : ids[i - 1];
      call.push_back(f.token(id, static_cast<std::uint64_t>(i), pos));
      clean_call.push_back(f.token(id, static_cast<std::uint64_t>(i), pos));
    }
    ASSERT_TRUE(e.encode(call).ok()) << "position " << pos;
    ASSERT_TRUE(clean.encode(clean_call).ok());
    const std::size_t out_bytes = f.outs.back().size() * sizeof(float);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(std::memcmp(call[static_cast<std::size_t>(i)].io.out, clean_call[static_cast<std::size_t>(i)].io.out,
                            out_bytes),
                0)
          << "sequence " << i << " at position " << pos;
  }
  EXPECT_EQ(all_states(e), all_states(clean));

  // A device failure while running: the call's sequences are refused until removed; the
  // others keep working.
  faulty->fail_next_run = true;
  std::vector<SequenceToken> call{f.token(ids[0], 1, 40), f.token(ids[1], 2, 40)};
  EXPECT_EQ(e.encode(call).code(), ErrorCode::device_error);
  std::vector<SequenceToken> again{f.token(ids[0], 1, 40)};
  const Status refused = e.encode(again);
  EXPECT_EQ(refused.code(), ErrorCode::device_error);
  EXPECT_NE(refused.message().find("remove it"), std::string::npos) << refused.message();
  std::vector<SequenceToken> others{f.token(0, 0, 40), f.token(ids[2], 3, 40)};
  EXPECT_TRUE(e.encode(others).ok());
  EXPECT_TRUE(e.remove_sequence(ids[0]).ok());
  EXPECT_TRUE(e.remove_sequence(ids[1]).ok());
}

// Every allocation point a call passes (the trace's room, each sequence's reserve, a growing
// plane's new rows, the call's scratch), and a new sequence's planes, failed one at a time: each
// failure is out_of_memory and leaves everything as it was (batch_sweep.hpp).
TEST(CpuBatch, EveryAllocationPointFailsCleanly) {
  test::check_allocation_points_fail_cleanly(Device::cpu, test::ReserveAllocates::yes);
}

// Engine::fill_layer_rows is count fill_layer calls in one: the same plane states (a growing
// plane that grows several times row by row grows once, to the same capacity), the same slots
// and the same bits of the next decoded token, over growing and wrapping ring layers.
TEST(CpuBatch, PromptRowsEqualOneCallPerRow) { test::check_prompt_rows_equal_one_call_per_row(Device::cpu); }

// Everything fill_layer_rows can know before its first row is all or nothing: an out-of-memory
// while a growing plane grows for the prompt (injected at each sequence of the call), a row past
// the max context, a NaN in a late row under N1's check. Each leaves every plane as it was, and
// the same call then succeeds.
TEST(CpuBatch, PromptRowsAreAllOrNothing) {
  const Geometry g = batch_geometry();
  EngineOptions opt;
  opt.initial_growing_capacity = test::kBatchInitialGrowing;
  opt.check_finite = true;
  auto dev = std::make_unique<FaultyDevice>(cpu::create_backend(g).value());
  FaultyDevice* faulty = dev.get();
  const std::unique_ptr<Engine> made = Engine::create(g, opt, std::move(dev)).value();
  Engine& e = *made;
  const SequenceId other = e.add_sequence().value();
  constexpr int kNope = 1;  // batch_geometry: layers 1 and 3 are NoPE (growing)
  ASSERT_EQ(g.layer_class(kNope), LayerClass::nope);
  // A few rows first, so that the states are not fresh.
  Prompt p0 = prompt_rows(g, 0, kNope, 0, 3), p1 = prompt_rows(g, 1, kNope, 0, 3);
  std::vector<SequenceRows> start{p0.rows(0, 3), p1.rows(other, 3)};
  ASSERT_TRUE(e.fill_layer_rows(kNope, start).ok());

  Prompt q0 = prompt_rows(g, 0, kNope, 3, 50), q1 = prompt_rows(g, 1, kNope, 3, 20);
  const auto call = [&] { return std::vector<SequenceRows>{q0.rows(0, 50), q1.rows(other, 20)}; };
  for (int at = 0; at < 2; ++at) {
    const auto before = all_states(e);
    faulty->fail_reserve_at = at;
    const Status s = e.fill_layer_rows(kNope, call());
    EXPECT_EQ(s.code(), ErrorCode::out_of_memory) << "reserve " << at << ": " << s.to_string();
    EXPECT_EQ(all_states(e), before) << "reserve " << at;
  }
  faulty->fail_reserve_at = -1;
  {
    // Growth fails wherever it happens: row by row the planes would grow at row 5 (8 rows),
    // after five rows were stored; the prompt's growth is reserved at its first row.
    const auto before = all_states(e);
    faulty->fail_growth = true;
    const Status s = e.fill_layer_rows(kNope, call());
    EXPECT_EQ(s.code(), ErrorCode::out_of_memory) << s.to_string();
    EXPECT_EQ(all_states(e), before);
    faulty->fail_growth = false;
  }
  {
    const auto before = all_states(e);
    Prompt past = prompt_rows(g, 1, kNope, 3, g.max_context - 2);
    std::vector<SequenceRows> too_long{q0.rows(0, 50), past.rows(other, g.max_context - 2)};
    EXPECT_EQ(e.fill_layer_rows(kNope, too_long).code(), ErrorCode::out_of_range);
    EXPECT_EQ(all_states(e), before);
  }
  {
    const auto before = all_states(e);
    Prompt nan_row = q1;
    nan_row.v[19 * g.kv_floats_per_layer() + 5] = std::nanf("");  // the last row of the second sequence
    std::vector<SequenceRows> with_nan{q0.rows(0, 50), nan_row.rows(other, 20)};
    const Status s = e.fill_layer_rows(kNope, with_nan);
    EXPECT_EQ(s.code(), ErrorCode::non_finite) << s.to_string();
    EXPECT_EQ(all_states(e), before);
  }
  const Status ok = e.fill_layer_rows(kNope, call());
  ASSERT_TRUE(ok.ok()) << ok.to_string();
  EXPECT_EQ(e.plane_state(0, kNope).next_position, 53);
  EXPECT_EQ(e.plane_state(other, kNope).next_position, 23);
  EXPECT_EQ(e.plane_state(0, kNope).capacity, 64);
  std::vector<SequenceRows> none{SequenceRows{0, 0, nullptr, nullptr, Memory::host, nullptr}};
  EXPECT_TRUE(e.fill_layer_rows(kNope, none).ok()) << "zero rows: nothing to do";
  EXPECT_EQ(e.fill_layer_rows(kNope, std::span<const SequenceRows>{}).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(e.fill_layer_rows(g.n_layers, call()).code(), ErrorCode::out_of_range);
}

// E3's layer-by-layer form (encode_layer / fill_layer, what an attention backend called once
// per layer uses) gives exactly the bits, routes and counters of whole-token calls, on every
// sequence of a batch whose planes are empty, filling, wrapped and grown.
TEST(CpuBatch, LayerByLayerCallsGiveTheWholeTokenBits) {
  constexpr int kSequences = 4;
  constexpr int kSteps = 90;
  const test::LayeredRun whole = test::run_whole_or_layered(Device::cpu, false, kSequences, kSteps);
  const test::LayeredRun layered = test::run_whole_or_layered(Device::cpu, true, kSequences, kSteps);
  ASSERT_EQ(whole.out.size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(layered.out.size(), whole.out.size());
  EXPECT_EQ(test::first_difference(whole, layered), -1) << "the first token whose bits differ";
  EXPECT_EQ(whole.routes, layered.routes);
  EXPECT_EQ(whole.counted, layered.counted);
  EXPECT_LE(whole.worst_error, test::kBatchRelTol);
  EXPECT_EQ(std::set<Route>(whole.routes.begin(), whole.routes.end()).size(), 3u) << "vec, splitk and interleaved";
}

// Per-layer positions: each layer's plane keeps its own next position, so a layer called out
// of turn is refused and changes nothing, an out-of-range layer is refused, and a whole-token
// call after a half-done token is refused on the layers that are ahead.
TEST(CpuBatch, LayerCallsAreCheckedPerLayer) {
  Fixture f;
  f.reserve(64);
  Result<std::unique_ptr<Engine>> made = Engine::create(f.g, EngineOptions{});
  ASSERT_TRUE(made.ok());
  Engine& e = **made;
  const std::size_t qn = static_cast<std::size_t>(f.g.n_heads) * f.g.head_dim;
  const std::size_t kvn = static_cast<std::size_t>(f.g.n_kv_heads) * f.g.head_dim;
  const auto layer_token = [&](int position, int layer) {
    SequenceToken t = f.token(0, 0, position);
    const std::size_t l = static_cast<std::size_t>(layer);
    t.io = TokenIO{t.io.q + l * qn, t.io.k + l * kvn, t.io.v + l * kvn, t.io.out + l * qn};
    return t;
  };
  SequenceToken t00 = layer_token(0, 0);
  ASSERT_TRUE(e.encode_layer(0, std::span<const SequenceToken>(&t00, 1)).ok());
  const auto before = all_states(e);
  SequenceToken t10 = layer_token(1, 0);
  EXPECT_EQ(e.encode_layer(1, std::span<const SequenceToken>(&t10, 1)).code(), ErrorCode::out_of_order)
      << "layer 1 has not had position 0";
  EXPECT_EQ(e.encode_layer(f.g.n_layers, std::span<const SequenceToken>(&t00, 1)).code(), ErrorCode::out_of_range);
  EXPECT_EQ(e.encode_layer(-1, std::span<const SequenceToken>(&t00, 1)).code(), ErrorCode::out_of_range);
  SequenceToken whole = f.token(0, 0, 0);
  EXPECT_EQ(e.encode(std::span<const SequenceToken>(&whole, 1)).code(), ErrorCode::out_of_order)
      << "layer 0 already has position 0";
  EXPECT_EQ(all_states(e), before);
  for (int l = 1; l < f.g.n_layers; ++l) {
    SequenceToken t = layer_token(0, l);
    ASSERT_TRUE(e.encode_layer(l, std::span<const SequenceToken>(&t, 1)).ok()) << "layer " << l;
  }
  SequenceToken next = f.token(0, 0, 1);
  EXPECT_TRUE(e.encode(std::span<const SequenceToken>(&next, 1)).ok()) << "every layer has position 0 now";
}

}  // namespace
}  // namespace ladder
