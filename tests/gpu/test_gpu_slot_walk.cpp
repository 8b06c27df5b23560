// The tensor-core producer's slot walk (LaunchTuning::tc_slots_per_cta): in a batched launch
// one CTA may walk several warp slots in turn, the next slot's first blocks streaming in while
// the current slot's pairs merge, and where its walk holds whole fold groups it folds them
// itself (one partial per group of kTcFoldSlots warp slots, the reducer's step 4 done in the
// producer: schedule.hpp's tc_fold_groups, kernel_params.hpp's tc_folded_groups_per_cta). It is
// a launch shape, so it must never change a bit: a batch of sequences at depths whose schedules
// have 1, 2 and 4 warps per workgroup (and a ring) gives the same outputs with 1, 2, 3, 4, 7 and
// 16 slots per CTA (16 folds nsg 1, 2 and 4, 7 folds nsg 2, 4 folds nsg 4, 1 folds nothing), on
// the default routes (vec, whose store is fused in) and with vec switched off (splitk on the
// ring, interleaved on the growing plane), and every output holds P3 against the f64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cpu/batch_sweep.hpp"
#include "cuda/dispatch.hpp"
#include "gpu/gpu_test_support.hpp"
#include "ladder/cuda_engine.hpp"
#include "ladder/kernel_params.hpp"
#include "ladder/schedule.hpp"

namespace ladder {
namespace {

// One SWA layer (window 1,024: a wrapped ring, one warp per workgroup) and one NoPE layer
// (growing) with the Muse Glimmer head shape (16 sibling heads per KV head: one full tile).
Geometry walk_geometry() {
  Geometry g;
  g.name = "slot-walk";
  g.n_layers = 2;
  g.n_heads = 32;
  g.n_kv_heads = 2;
  g.head_dim = 128;
  g.window = 1024;
  g.ring_slack = 0;
  g.max_context = 32768;
  g.nope_period = 2;
  g.nope_phase = 1;
  return g;
}

struct WalkRun {
  std::vector<std::vector<std::vector<float>>> out;  // [call][sequence][n_layers * n_heads * head_dim]
  std::set<int> warps_per_workgroup;    // nsg of every NoPE layer's tensor-core partition the calls ran
  std::set<int> folded_nsg;             // nsg of the NoPE partitions whose fold groups the producer folded
  bool coarse = false;                    // a NoPE layer whose tensor-core partition has fewer slots than pinned
  std::set<Route> routes;                 // every route the calls ran
  double worst_error = 0.0;               // NaN if any output was left unwritten
};

// Fills sequence i to depths[i], then decodes `calls` tokens of every sequence in one call each.
WalkRun run_walk(const std::vector<int>& depths, int calls, int slots_per_cta, const Switches& switches,
                 cuda::GpuFusion fusion = cuda::GpuFusion::automatic,
                 cuda::ReduceForm reduce_form = cuda::ReduceForm::automatic,
                 cuda::TcTiles tiles = cuda::TcTiles::automatic) {
  const Geometry g = walk_geometry();
  EngineOptions opt;
  opt.device = Device::cuda;
  opt.record_trace = true;
  opt.switches = switches;
  cuda::CudaEngineOptions copt;
  copt.tuning.tc_slots_per_cta = slots_per_cta;
  copt.tuning.fusion = fusion;
  copt.tuning.reduce_form = reduce_form;
  copt.tuning.tc_tiles = tiles;
  Result<std::unique_ptr<Engine>> made = cuda::create_engine(g, opt, copt);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  WalkRun run;
  if (!made) return run;
  Engine& e = **made;
  std::vector<SequenceId> ids{0};
  for (std::size_t i = 1; i < depths.size(); ++i) ids.push_back(e.add_sequence().value());
  // Outputs and reference keys are indexed by the trace's sequence id: ids are 0, 1, 2, ...
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<SequenceId>(i));
  int deepest = 0;
  for (int d : depths) deepest = std::max(deepest, d);
  for (int p = 0; p < deepest; ++p) {
    std::vector<test::TokenData> data;
    data.reserve(ids.size());
    std::vector<SequenceToken> call;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (p >= depths[i]) continue;
      data.push_back(test::token_data(g, i, p));
      call.push_back({ids[i], p, {nullptr, data.back().k.data(), data.back().v.data(), nullptr}});
    }
    const Status s = e.fill(call);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return run;
  }
  const std::size_t out_floats = static_cast<std::size_t>(g.n_layers) * g.n_heads * g.head_dim;
  const std::size_t layer_floats = static_cast<std::size_t>(g.n_heads) * g.head_dim;
  for (int c = 0; c < calls; ++c) {
    std::vector<test::TokenData> data;
    data.reserve(ids.size());
    std::vector<std::vector<float>> outs(ids.size(), std::vector<float>(out_floats, std::nanf("")));
    std::vector<SequenceToken> call;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      data.push_back(test::token_data(g, i, depths[i] + c));
      call.push_back({ids[i], depths[i] + c, {data.back().q.data(), data.back().k.data(), data.back().v.data(),
                                               outs[i].data()}});
    }
    e.clear_trace();
    const Status s = e.encode(call);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) return run;
    // The batched producer's CTAs per entry along y at this walk (indirect_slots: the growing
    // plane's largest schedule, at max_context), as the launch sizes them.
    const int max_slots = pinned_schedule(g.max_context).slots();
    const int ctas = slots_per_cta > 0 ? (max_slots + slots_per_cta - 1) / slots_per_cta : 0;
    for (const TraceEntry& t : e.trace()) {
      if (t.cls == LayerClass::nope) {
        // The trace records the partition the device's producer folds by (the tensor-core one).
        run.warps_per_workgroup.insert(t.schedule.nsg);
        if (t.schedule.slots() < pinned_schedule(t.visible).slots()) run.coarse = true;
        const FoldGroups fg = tc_fold_groups(t.schedule);
        if (tc_folded_groups_per_cta(fg.groups, fg.parts, ctas) > 0) run.folded_nsg.insert(t.schedule.nsg);
      }
      run.routes.insert(t.decision.route);
      const double err = test::batch_reference_error(g, static_cast<std::uint64_t>(t.sequence), t.position, t.layer,
                                                     t.decision.route,
                                                     outs[static_cast<std::size_t>(t.sequence)].data() +
                                                         static_cast<std::size_t>(t.layer) * layer_floats);
      if (!(err <= run.worst_error)) run.worst_error = err;  // a NaN (an unwritten output) sticks
    }
    run.out.push_back(std::move(outs));
  }
  return run;
}

// `other` (run as `what` says) holds P3 and gives `base`'s bits, call by call and sequence by
// sequence.
void expect_same_bits(const WalkRun& base, const WalkRun& other, const std::vector<int>& depths,
                      const std::string& what) {
  ASSERT_EQ(other.out.size(), base.out.size()) << what;
  EXPECT_LE(other.worst_error, test::kBatchRelTol) << what;
  for (std::size_t c = 0; c < base.out.size(); ++c)
    for (std::size_t i = 0; i < depths.size(); ++i)
      EXPECT_EQ(test::max_ulp(base.out[c][i], other.out[c][i]), 0)
          << what << ", call " << c << ", sequence at depth " << depths[i];
}

std::string walk_label(int walk) { return std::to_string(walk) + " slots per CTA"; }

// Every walk gives the one-slot-per-CTA bits; `family` must be among the routes run.
void expect_walks_keep_bits(const Switches& switches, Route family) {
  // Depths whose NoPE layers' tensor-core partitions (tc_schedule, 2 CTAs per slot) have 1, 2
  // and 4 warps per workgroup: 4,200 tokens has 64 slots of 2-3 blocks where the pinned schedule
  // has 128, and 17,000 (532 blocks) keeps pinned's 128 slots of 4-5. 900 tokens has 29 slots
  // (fold groups of one slot), 1,100 has 32 (groups of 4 slots). The reduced sweep (the
  // sanitizers: racecheck took over 420 s on the full one) keeps nsg 1, a wrapped ring and a
  // 3-slot walk.
  const bool small = test::small_sweep();
  const std::vector<int> depths =
      small ? std::vector<int>{40, 300, 1100} : std::vector<int>{40, 900, 1100, 2200, 4200, 3100, 17000};
  const std::vector<int> walks = small ? std::vector<int>{3} : std::vector<int>{2, 3, 4, 7, 16};
  const int kCalls = small ? 2 : 3;
  const WalkRun one = run_walk(depths, kCalls, 1, switches);
  ASSERT_EQ(one.out.size(), static_cast<std::size_t>(kCalls));
  EXPECT_LE(one.worst_error, test::kBatchRelTol);
  EXPECT_TRUE(one.routes.count(family)) << "the calls must run " << route_name(family);
  EXPECT_TRUE(one.warps_per_workgroup.count(1)) << "the depths must reach nsg 1";
  EXPECT_TRUE(one.folded_nsg.empty()) << "one slot per CTA folds no group: the unfolded bits";
  if (!small) {
    EXPECT_TRUE(one.warps_per_workgroup.count(2) && one.warps_per_workgroup.count(4)) << "and nsg 2 and 4";
    EXPECT_TRUE(one.coarse) << "and a partition coarser than the pinned one";
  }
  std::set<int> folded;
  for (const int walk : walks) {
    const WalkRun run = run_walk(depths, kCalls, walk, switches);
    folded.insert(run.folded_nsg.begin(), run.folded_nsg.end());
    expect_same_bits(one, run, depths, walk_label(walk));
  }
  if (!small) {
    EXPECT_TRUE(folded.count(1) && folded.count(2) && folded.count(4))
        << "the walks must fold the groups of partitions with 1, 2 and 4 warps per workgroup";
  }
}

// The default routes: vec, its store fused in.
TEST(GpuSlotWalk, SlotsPerCtaNeverChangeBits) {
  LADDER_REQUIRE_GPU();
  expect_walks_keep_bits(Switches{}, Route::vec);
}

// vec switched off: splitk on the ring, interleaved on the growing plane (whose current row's
// lo tiles take the stage after the pair's last block of the slot).
TEST(GpuSlotWalk, SlotsPerCtaNeverChangeBitsWithoutVec) {
  LADDER_REQUIRE_GPU();
  Switches no_vec;
  no_vec.disable_vec = true;
  expect_walks_keep_bits(no_vec, Route::interleaved);
}

// The folded groups alone, at a size the sanitizers run (the reduced sweep above folds nothing):
// sequences whose partitions have 10 warp slots (10 workgroups of 1 warp: fold groups of 2
// slots), 32 (32 of 1: groups of 4) and 64 (32 of 2: groups of 4), walked 16 slots per CTA
// (their groups folded by the producer) against 1 (their slots folded by the reducer).
TEST(GpuSlotWalk, FoldedGroupsGiveTheReducerBits) {
  LADDER_REQUIRE_GPU();
  const std::vector<int> depths{300, 1100, 4200};
  const int kCalls = 1;
  const WalkRun one = run_walk(depths, kCalls, 1, Switches{});
  ASSERT_EQ(one.out.size(), static_cast<std::size_t>(kCalls));
  EXPECT_LE(one.worst_error, test::kBatchRelTol);
  constexpr int kWalk = 16;
  const WalkRun walked = run_walk(depths, kCalls, kWalk, Switches{});
  EXPECT_TRUE(walked.folded_nsg.count(1) && walked.folded_nsg.count(2))
      << "the walk must fold the groups of nsg 1 and nsg 2 partitions";
  expect_same_bits(one, walked, depths, walk_label(kWalk));
}

// The grid form (GpuFusion::grid: store, producer and merge in one kernel, the CTAs meeting at a
// grid-wide barrier and each merging a share of the heads) gives the two-kernel bits at every
// walk: its own choice (0: the smallest walk whose grid is resident at once) and walks given, of
// which 1 and 2 do not fit the device at the deeper depths (up to 5 sequences x 2 KV heads x 128
// slots), so those launches fall back to the store-fused producer and the reducer. Every grid
// size moves which CTA merges which head and the order in which the CTAs arrive.
TEST(GpuSlotWalk, GridFormGivesTheTwoKernelBitsAtEveryWalk) {
  LADDER_REQUIRE_GPU();
  const bool small = test::small_sweep();
  const std::vector<int> depths = small ? std::vector<int>{40, 300, 1100} : std::vector<int>{40, 900, 2200, 4200, 3100};
  const std::vector<int> walks = small ? std::vector<int>{0, 3} : std::vector<int>{0, 1, 2, 3, 7};
  const int kCalls = 2;
  const WalkRun two = run_walk(depths, kCalls, 1, Switches{}, cuda::GpuFusion::store_fused);
  ASSERT_EQ(two.out.size(), static_cast<std::size_t>(kCalls));
  EXPECT_LE(two.worst_error, test::kBatchRelTol);
  for (const int walk : walks)
    expect_same_bits(two, run_walk(depths, kCalls, walk, Switches{}, cuda::GpuFusion::grid), depths,
                     "the grid form at " + walk_label(walk));
}

// The rule the launch uses by default (tc_walk_extent): one CTA per slot until the slots
// outnumber the CTAs the GPU holds at once, then the largest power of two along y whose launch
// fits one wave, so that each CTA's share is whole fold groups. 264 resident CTAs: an H100's or
// H200's 132 SMs x 2; 2 tile groups per entry, as the bench's layer launches (grid x = 2).
TEST(GpuSlotWalk, DefaultRuleLaunchesOneWaveOfWholeFoldGroups) {
  constexpr long long kResident = 264;
  EXPECT_EQ(tc_walk_extent(2, 32, kResident), 32) << "64 slots fit: one CTA each";
  EXPECT_EQ(tc_walk_extent(2, 132, kResident), 132) << "264 slots fit exactly";
  EXPECT_EQ(tc_walk_extent(4 * 2, 128, kResident), 32) << "batch 4";
  EXPECT_EQ(tc_walk_extent(16 * 2, 128, kResident), 8) << "batch 16";
  EXPECT_EQ(tc_walk_extent(64 * 2, 128, kResident), 2) << "batch 64: rounding the walk gave 3, 1.45 waves";
  EXPECT_EQ(tc_walk_extent(200 * 2, 128, kResident), 1) << "more entries than resident CTAs: each walks all";
  EXPECT_EQ(tc_walk_extent(16 * 2, 4096, 0), 4096) << "unknown occupancy: one CTA per slot";
  EXPECT_EQ(tc_walk_extent(16 * 2, 0, kResident), 0) << "no slots, no CTAs";
  // 114 SMs x 2: batch 16 fits 7 along y; a power of two (4) would leave 43 % of the wave idle.
  EXPECT_EQ(tc_walk_extent(16 * 2, 128, 228), 7);
  EXPECT_EQ(tc_walk_extent(64 * 2, 128, 228), 1);
  // On 264 resident CTAs, every batch from 1 to 256 over the schedules of 128 and 64 slots (32
  // and 16 fold groups of 4): one wave where the entries fit at all, at least 9 tenths of it
  // used; and at the engine's power-of-two batch buckets, whole fold groups wherever a CTA walks
  // at least a group's slots.
  for (int batch = 1; batch <= 256; ++batch)
    for (const int slots : {128, 64}) {
      const long long groups = 2LL * batch;
      const int y = tc_walk_extent(groups, slots, kResident);
      ASSERT_GE(y, 1) << batch;
      if (groups <= kResident) {
        EXPECT_LE(groups * y, kResident) << "batch " << batch << ": one wave";
        if (groups * slots > kResident)
          EXPECT_GE(10 * groups * y, 9 * (kResident - groups + 1)) << "batch " << batch << ": the wave used";
      }
      if ((batch & (batch - 1)) != 0) continue;
      EXPECT_EQ(y & (y - 1), 0) << "batch " << batch << ": a power of two";
      if (slots / y >= kTcFoldSlots) {
        const int fold_groups = slots / kTcFoldSlots;
        EXPECT_GT(tc_folded_groups_per_cta(fold_groups, kTcFoldSlots, y), 0)
            << "batch " << batch << ", " << slots << " slots: whole fold groups at an extent of " << y;
      }
    }
}

// enqueue_layer_batch asks tc_batched_ctas for a layer's y extent before any of the layer's
// launches, so the answer must not depend on whether the kernel whose occupancy it asks has run
// (and opted in to its shared memory) yet. Asked in a fresh process (a threadsafe death test runs
// the binary again), where no tensor-core kernel has run: 16 sequences at 8,192 tokens are 128
// slots per entry and tile group, 4,096 in all, more than any GPU holds CTAs at once, so the
// launch must walk (fewer CTAs along y than slots). 2026-12-05: the query read 0 CTAs there and a
// process's first captured call walked one slot per CTA for as long as its graph was replayed
// (docs/perf.md, change 49d on the H200: 72 us against 56 for the batch-16 ring at 8,192).
TEST(GpuSlotWalk, FirstBatchedLaunchWalksInAFreshProcess) {
  LADDER_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr int kSequences = 16;
  constexpr int kDepth = 8192;
  const auto walks_before_any_launch = [] {
    const Geometry g = walk_geometry();
    HeadShape shape;
    shape.n_heads = g.n_heads;
    shape.n_kv_heads = g.n_kv_heads;
    shape.head_dim = g.head_dim;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
    cuda_detail::BatchSpan batch;
    batch.count = kSequences;
    batch.max_visible = kDepth;
    const cuda_detail::ProducerChoice c = cuda_detail::resolve_producer_choice(shape, cuda::LaunchTuning{});
    const unsigned ctas = cuda_detail::tc_batched_ctas(shape, batch, c);
    return c.tensor_core && ctas > 0 && ctas < cuda_detail::indirect_slots(batch);
  };
  EXPECT_EXIT(std::exit(walks_before_any_launch() ? 0 : 1), ::testing::ExitedWithCode(0), "")
      << "the first batched launch of a process must walk as later ones do";
}

// The fold groups of a schedule (schedule.hpp): kTcFoldSlots interleaved warp slots, fewer where
// they would not divide the slots; every slot is one part of one group.
TEST(GpuSlotWalk, FoldGroupsCoverEverySlotOnce) {
  static_assert(kTcFoldSlots == 4, "the expectations below are for groups of 4 slots");
  const auto groups_of = [](int nwg, int nsg) {
    Schedule s;
    s.nwg = nwg;
    s.nsg = nsg;
    s.blocks = nwg * nsg;
    const FoldGroups fg = tc_fold_groups(s);
    EXPECT_EQ(fg.groups * fg.parts, s.slots()) << nwg << " x " << nsg << ": every slot in one group";
    std::vector<int> seen(static_cast<std::size_t>(s.slots()), 0);
    for (int j = 0; j < fg.groups; ++j)
      for (int g = 0; g < fg.parts; ++g) {
        ++seen.at(static_cast<std::size_t>(fg.slot(j, g)));
        EXPECT_EQ(fg.group_of(fg.slot(j, g)), j) << nwg << " x " << nsg << ": slot's group";
        EXPECT_EQ(fg.slot(j, g) / fg.groups, g) << nwg << " x " << nsg << ": slot's part";
      }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), s.slots()) << nwg << " x " << nsg;
    return std::pair{fg.groups, fg.parts};
  };
  EXPECT_EQ(groups_of(32, 1), std::pair(8, 4));
  EXPECT_EQ(groups_of(32, 2), std::pair(16, 4));
  EXPECT_EQ(groups_of(32, 4), std::pair(32, 4));
  EXPECT_EQ(groups_of(10, 1), std::pair(5, 2)) << "10 slots: groups of 2";
  EXPECT_EQ(groups_of(29, 1), std::pair(29, 1)) << "29 slots: no larger group divides them";
  EXPECT_EQ(groups_of(3, 2), std::pair(3, 2)) << "6 slots: groups of 2";
  EXPECT_EQ(groups_of(2, 1), std::pair(1, 2));
}

// Where a walking CTA folds whole fold groups: only where that costs no CTA a longer walk than
// single slots (kernel_params.hpp).
TEST(GpuSlotWalk, FoldsWholeGroupsOnlyWhereNoWalkGrows) {
  EXPECT_EQ(tc_folded_groups_per_cta(32, 4, 32), 1) << "4 slots per CTA either way";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 2, 32), 1);
  EXPECT_EQ(tc_folded_groups_per_cta(32, 4, 8), 4) << "16 slots per CTA either way";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 4, 19), 0) << "2 groups (8 slots) against 7 slots";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 2, 19), 2) << "2 groups (4 slots) against 4 slots";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 4, 64), 0) << "one slot per CTA: no CTA holds a group";
  EXPECT_EQ(tc_folded_groups_per_cta(8, 4, 4), 2) << "batch 16 at 2,048: 8 slots per CTA either way";
  EXPECT_EQ(tc_folded_groups_per_cta(16, 4, 32), 0) << "1 group (4 slots) against 2 slots";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 1, 8), 0) << "one slot per group: nothing to fold";
  EXPECT_EQ(tc_folded_groups_per_cta(32, 4, 0), 0) << "no walk given";
  ReduceParams r;
  r.groups = 32;
  r.parts = 4;
  EXPECT_EQ(reduce_parts_after_fold(r, 32), 1);
  EXPECT_EQ(reduce_parts_after_fold(r, 19), 4);
  r.parts = 1;
  EXPECT_EQ(reduce_parts_after_fold(r, 32), 1);
}

// The batched reducer's lean form (its loads in passes: one at nsg 1 and 2, two at nsg 4) gives
// the one-pass form's bits, forced either way whatever the GPU's size (automatic picks lean
// only for launches wider than one wave of the one-pass kernel).
TEST(GpuSlotWalk, ReduceFormsGiveTheSameBits) {
  LADDER_REQUIRE_GPU();
  const bool small = test::small_sweep();
  const std::vector<int> depths =
      small ? std::vector<int>{40, 300, 1100} : std::vector<int>{40, 900, 2200, 4200, 3100, 17000};
  const int kCalls = 2;
  const WalkRun one_pass =
      run_walk(depths, kCalls, 0, Switches{}, cuda::GpuFusion::automatic, cuda::ReduceForm::one_pass);
  ASSERT_EQ(one_pass.out.size(), static_cast<std::size_t>(kCalls));
  EXPECT_LE(one_pass.worst_error, test::kBatchRelTol);
  if (!small) {
    EXPECT_TRUE(one_pass.warps_per_workgroup.count(1) && one_pass.warps_per_workgroup.count(2) &&
                one_pass.warps_per_workgroup.count(4))
        << "the depths must reach nsg 1, 2 and 4";
  }
  expect_same_bits(one_pass, run_walk(depths, kCalls, 0, Switches{}, cuda::GpuFusion::automatic, cuda::ReduceForm::lean),
                   depths, "the lean reducer");
}

// The tile layouts (cuda::TcTiles) are a launch shape too: in the engine's batched launches the
// swizzled tiles give the padded tiles' bits at one slot per CTA and walking three, on the default
// routes and with vec off (splitk on the ring; interleaved, whose split current row takes the
// stage after the pair's last block, on the growing plane). The reduced sweep (the sanitizers)
// keeps vec off at a walk of three.
TEST(GpuSlotWalk, SwizzledTilesGiveThePaddedBits) {
  LADDER_REQUIRE_GPU();
  const bool small = test::small_sweep();
  const std::vector<int> depths =
      small ? std::vector<int>{40, 300, 1100} : std::vector<int>{40, 900, 2200, 4200, 3100, 17000};
  const int kCalls = 2;
  Switches no_vec;
  no_vec.disable_vec = true;
  const std::vector<Switches> route_sets = small ? std::vector<Switches>{no_vec} : std::vector<Switches>{Switches{}, no_vec};
  const std::vector<int> walks = small ? std::vector<int>{3} : std::vector<int>{1, 3};
  for (const Switches& switches : route_sets)
    for (const int walk : walks) {
      const std::string what = std::string(switches.disable_vec ? "vec off" : "default routes") + ", " +
                               walk_label(walk);
      const WalkRun padded = run_walk(depths, kCalls, walk, switches, cuda::GpuFusion::automatic,
                                      cuda::ReduceForm::automatic, cuda::TcTiles::padded);
      ASSERT_EQ(padded.out.size(), static_cast<std::size_t>(kCalls)) << what;
      EXPECT_LE(padded.worst_error, test::kBatchRelTol) << what;
      expect_same_bits(padded,
                       run_walk(depths, kCalls, walk, switches, cuda::GpuFusion::automatic, cuda::ReduceForm::automatic,
                                cuda::TcTiles::swizzled),
                       depths, "swizzled tiles, " + what);
    }
}

// LADDER_GPU_TILES picks the layout where a launch leaves it automatic; a launch's own choice
// wins; otherwise automatic stays automatic, and each launch applies heuristics.hpp's rule.
TEST(GpuSlotWalk, TilesResolveFromTheEnvironment) {
  const char* kVar = "LADDER_GPU_TILES";
  const char* before = std::getenv(kVar);
  const std::string saved = before != nullptr ? before : "";
  ::unsetenv(kVar);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::automatic), cuda::TcTiles::automatic);
  ::setenv(kVar, "anything else", 1);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::automatic), cuda::TcTiles::automatic);
  ::setenv(kVar, "swizzled", 1);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::automatic), cuda::TcTiles::swizzled);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::padded), cuda::TcTiles::padded);
  ::setenv(kVar, "padded", 1);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::automatic), cuda::TcTiles::padded);
  EXPECT_EQ(cuda::resolve_tc_tiles(cuda::TcTiles::swizzled), cuda::TcTiles::swizzled);
  if (before != nullptr)
    ::setenv(kVar, saved.c_str(), 1);
  else
    ::unsetenv(kVar);
}

}  // namespace
}  // namespace ladder
