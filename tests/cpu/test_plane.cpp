// K1–K4: ring and growing planes — append slots, refusals that leave the plane untouched,
// in-window rows never overwritten, growth that preserves data, poisoned unwritten rows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_twin_helpers.hpp"

namespace ladder {
namespace {

constexpr std::uint16_t kHalfExponentMask = 0x7C00;
constexpr std::uint16_t kHalfMantissaMask = 0x03FF;

bool is_f16_nan(std::uint16_t h) {
  return (h & kHalfExponentMask) == kHalfExponentMask && (h & kHalfMantissaMask) != 0;
}

// Row values unique to (position, element), so a row written to the wrong slot is detected.
std::vector<float> row_values(int position, int elems, float plane_sign) {
  std::vector<float> r(static_cast<std::size_t>(elems));
  for (int i = 0; i < elems; ++i) r[i] = plane_sign * (static_cast<float>(position % 997) + 0.125f * (i % 8) + 1.0f);
  return r;
}

// Every in-window row of `p` holds what was written for its logical token.
void expect_window_intact(const HostPlane& p, int position) {
  const PlaneConfig& cfg = p.config();
  const int elems = cfg.n_kv_heads * cfg.head_dim;
  const int visible = visible_rows(position, cfg.window);
  const int start = logical_start(position, cfg.window);
  const PlaneStrides s = p.strides();
  for (int logical = start; logical < start + visible; ++logical) {
    const int phys = p.state().physical(logical);
    const std::vector<float> k = row_values(logical, elems, 1.0f), v = row_values(logical, elems, -1.0f);
    for (int h = 0; h < cfg.n_kv_heads; ++h)
      for (int d = 0; d < cfg.head_dim; ++d) {
        const std::int64_t at = s.offset(phys, h) + d;
        ASSERT_EQ(p.k()[at], f32_to_f16(k[h * cfg.head_dim + d]))
            << fmt::format("K of logical {} (slot {}) after position {}", logical, phys, position);
        ASSERT_EQ(p.v()[at], f32_to_f16(v[h * cfg.head_dim + d]))
            << fmt::format("V of logical {} (slot {}) after position {}", logical, phys, position);
      }
  }
}

TEST(RingPlane, AppendReturnsTheOriginArithmeticSlot) {
  // window 4, capacity 6: slots 0..3 fill, then the ring advances its origin one per token.
  HostPlane p = HostPlane::create(test::ring_config(1, 4, 4, 6, 100)).value();
  const int expected_slot[] = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0};
  for (int pos = 0; pos < 13; ++pos) {
    Result<int> slot = p.append(pos);
    ASSERT_TRUE(slot.ok()) << slot.status().to_string();
    EXPECT_EQ(*slot, expected_slot[pos]) << "position " << pos;
    EXPECT_EQ(*slot, p.state().physical(pos));
    EXPECT_EQ(p.state().len, std::min(pos + 1, 4));
    EXPECT_EQ(p.state().origin_logical, std::max(0, pos + 1 - 4));
    EXPECT_EQ(p.state().origin_physical, std::max(0, pos + 1 - 4) % 6);
  }
}

TEST(GrowingPlane, SlotIsThePositionAndGrowthPreservesRows) {
  const PlaneConfig cfg = test::growing_config(3, 8, 2, 100);
  HostPlane p = HostPlane::create(cfg).value();
  const int elems = cfg.n_kv_heads * cfg.head_dim;
  int growths = 0;
  for (int pos = 0; pos < cfg.max_context; ++pos) {
    const int before = p.state().capacity;
    const std::vector<float> k = row_values(pos, elems, 1.0f), v = row_values(pos, elems, -1.0f);
    Result<int> slot = p.append_row(pos, k.data(), v.data());
    ASSERT_TRUE(slot.ok()) << slot.status().to_string();
    EXPECT_EQ(*slot, pos);
    EXPECT_EQ(p.state().origin_physical, 0);
    growths += p.state().capacity != before ? 1 : 0;
    EXPECT_EQ(p.elements(), static_cast<std::size_t>(p.state().capacity) * elems);
    expect_window_intact(p, pos);
  }
  EXPECT_EQ(p.state().capacity, cfg.max_context);  // 2 -> 4 -> ... -> 64 -> capped at 100
  EXPECT_EQ(growths, 6);
}

// The two-step append the CPU engine uses so that an allocation failure while a NoPE plane
// grows leaves every layer untouched: prepare mutates nothing (state and bytes), commit gives
// exactly what append gives, on steps that grow and steps that do not.
TEST(GrowingPlane, PrepareTouchesNothingAndCommitEqualsAppend) {
  for (const PlaneConfig& cfg : {test::growing_config(2, 8, 2, 40), test::ring_config(2, 8, 5, 7, 40)}) {
    HostPlane two_step = HostPlane::create(cfg).value();
    HostPlane one_step = HostPlane::create(cfg).value();
    const int elems = cfg.n_kv_heads * cfg.head_dim;
    int grew = 0;
    for (int pos = 0; pos < cfg.max_context; ++pos) {
      const std::vector<float> k = row_values(pos, elems, 1.0f), v = row_values(pos, elems, -1.0f);
      const HostPlane before = two_step;
      Result<PreparedAppend> prepared = two_step.prepare_append(pos);
      ASSERT_TRUE(prepared.ok()) << prepared.status().to_string();
      EXPECT_TRUE(test::same_plane(two_step, before)) << "prepare changed the plane at " << pos;
      grew += prepared->plan.grow_to > 0 ? 1 : 0;
      const int slot = two_step.commit_append(std::move(*prepared));
      two_step.write_row(slot, k.data(), v.data());
      ASSERT_EQ(one_step.append_row(pos, k.data(), v.data()).value(), slot);
      EXPECT_TRUE(test::same_plane(two_step, one_step)) << "position " << pos;
    }
    EXPECT_EQ(grew, cfg.kind == PlaneKind::growing ? 5 : 0);  // 2 -> 4 -> 8 -> 16 -> 32 -> 40
    // A refused position is refused by prepare, and the plane stays as it was.
    const HostPlane before = two_step;
    EXPECT_FALSE(two_step.prepare_append(cfg.max_context).ok());
    EXPECT_TRUE(test::same_plane(two_step, before));
  }
}

TEST(Plane, UnwrittenRowsArePoisonedF16Nan) {
  for (const PlaneConfig& cfg : {test::ring_config(2, 8, 5, 7, 50), test::growing_config(2, 8, 4, 50)}) {
    HostPlane p = HostPlane::create(cfg).value();
    for (std::size_t i = 0; i < p.elements(); ++i) {
      ASSERT_TRUE(is_f16_nan(p.k()[i])) << plane_kind_name(cfg.kind) << " element " << i;
      ASSERT_TRUE(is_f16_nan(p.v()[i]));
    }
    // Metadata-only appends (and growth) never invent row contents.
    for (int pos = 0; pos < 9; ++pos) ASSERT_TRUE(p.append(pos).ok());
    for (std::size_t i = 0; i < p.elements(); ++i) ASSERT_TRUE(is_f16_nan(p.k()[i]) && is_f16_nan(p.v()[i]));
    EXPECT_TRUE(std::isnan(f16_to_f32(p.k()[0])));
  }
}

void expect_refused(HostPlane& p, int position, ErrorCode code) {
  const HostPlane before = p;
  Result<int> r = p.append(position);
  ASSERT_FALSE(r.ok()) << "position " << position << " was accepted";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_FALSE(r.status().message().empty());
  EXPECT_TRUE(test::same_plane(p, before)) << "a refused append changed the plane";
}

TEST(Plane, RefusesOutOfOrderRepeatedAndPastMaxContext) {
  for (const PlaneConfig& cfg : {test::ring_config(1, 4, 3, 4, 10), test::growing_config(1, 4, 2, 10)}) {
    SCOPED_TRACE(plane_kind_name(cfg.kind));
    HostPlane p = HostPlane::create(cfg).value();
    expect_refused(p, 1, ErrorCode::out_of_order);  // must start at 0
    expect_refused(p, -1, ErrorCode::invalid_argument);
    for (int pos = 0; pos < 5; ++pos) ASSERT_TRUE(p.append(pos).ok());
    expect_refused(p, 4, ErrorCode::out_of_order);   // repeated
    expect_refused(p, 2, ErrorCode::out_of_order);   // backwards
    expect_refused(p, 6, ErrorCode::out_of_order);   // skips 5
    expect_refused(p, 10, ErrorCode::out_of_range);  // past max context
    expect_refused(p, 1 << 30, ErrorCode::out_of_range);
    for (int pos = 5; pos < 10; ++pos) ASSERT_TRUE(p.append(pos).ok());
    expect_refused(p, 10, ErrorCode::out_of_range);  // the plane is at max context
  }
}

PlaneConfig random_config(std::mt19937& rng) {
  std::uniform_int_distribution<int> coin(0, 1), kv(1, 3), hd_pick(1, 2), win(1, 80), slack(0, 40), ctx(1, 300),
      init(1, 50);
  const int n_kv = kv(rng);
  const int hd = 4 * hd_pick(rng);
  if (coin(rng) == 0) {
    const int window = win(rng);
    return test::ring_config(n_kv, hd, window, window + slack(rng), window + ctx(rng));
  }
  return test::growing_config(n_kv, hd, init(rng), ctx(rng));
}

// K4 as a property: over random geometries and append sequences (interleaved with refused
// appends), every in-window row keeps the content written for its logical token after every
// append, and a refused append changes nothing.
TEST(PlaneProperty, InWindowRowsAreNeverOverwritten) {
  constexpr int kGeometries = 60;
  constexpr double kBadAppendRate = 0.1;
  std::mt19937 rng(20261130);
  std::bernoulli_distribution bad(kBadAppendRate);
  for (int g = 0; g < kGeometries; ++g) {
    const PlaneConfig cfg = random_config(rng);
    SCOPED_TRACE(fmt::format("{} kv {} hd {} window {} capacity {} max_context {}", plane_kind_name(cfg.kind),
                             cfg.n_kv_heads, cfg.head_dim, cfg.window, cfg.capacity, cfg.max_context));
    HostPlane p = HostPlane::create(cfg).value();
    const int elems = cfg.n_kv_heads * cfg.head_dim;
    for (int pos = 0; pos < cfg.max_context; ++pos) {
      if (bad(rng)) {
        std::uniform_int_distribution<int> which(0, 2);
        switch (which(rng)) {
          case 0: if (pos > 0) expect_refused(p, pos - 1, ErrorCode::out_of_order); break;
          case 1: {
            // Past max context wins over out of order: the position could never be appended.
            const int skip = pos + 1 + which(rng);
            expect_refused(p, skip, skip >= cfg.max_context ? ErrorCode::out_of_range : ErrorCode::out_of_order);
            break;
          }
          default: expect_refused(p, cfg.max_context + which(rng), ErrorCode::out_of_range); break;
        }
      }
      const std::vector<float> k = row_values(pos, elems, 1.0f), v = row_values(pos, elems, -1.0f);
      Result<int> slot = p.append_row(pos, k.data(), v.data());
      ASSERT_TRUE(slot.ok()) << slot.status().to_string();
      ASSERT_EQ(*slot, p.state().physical(pos));
      ASSERT_EQ(p.state().len, visible_rows(pos, cfg.window));
      ASSERT_GE(p.state().capacity, p.state().len);
      expect_window_intact(p, pos);
      if (HasFatalFailure()) return;
    }
    expect_refused(p, cfg.max_context, ErrorCode::out_of_range);
  }
}

TEST(PlaneConfig, RejectsRingSmallerThanItsWindow) {
  EXPECT_EQ(HostPlane::create(test::ring_config(1, 4, 10, 9, 100)).status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(HostPlane::create(test::ring_config(0, 4, 10, 10, 100)).status().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(HostPlane::create(test::ring_config(1, 4, 10, 10, 100)).ok());
}

// Upper bounds: each field one past its limit is refused with invalid_argument, before any
// allocation; the limit itself validates.
TEST(PlaneConfig, RefusesFieldsPastTheirLimits) {
  const PlaneConfig ok = test::ring_config(2, 8, 16, 16, 64);
  ASSERT_TRUE(ok.validate().ok());
  const auto refused = [](PlaneConfig c, const char* needle) {
    const Status s = c.validate();
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(HostPlane::create(c).status().code(), ErrorCode::invalid_argument) << needle;
  };
  PlaneConfig c = ok;
  c.n_kv_heads = limits::kMaxHeads + 1;
  refused(c, "n_kv_heads must be in 1..4096");
  c = ok;
  c.head_dim = limits::kMaxHeadDim + 1;
  refused(c, "head_dim must be in 1..512");
  c = ok;
  c.max_context = limits::kMaxContext + 1;
  refused(c, "max_context must be in 1..1073741824");
  c = ok;
  c.capacity = limits::kMaxRows + 1;
  refused(c, "capacity must be in 1..1073741824");
  c = test::growing_config(2, 8, 16, 64);
  c.window = 4;
  refused(c, "growing plane has no window");
}

// Checked byte counts: a product past 64 bits is an error, never a wrapped (small or zero)
// size; at the limits the count is exact.
TEST(PlaneConfig, ByteCountsAreCheckedNotWrapped) {
  PlaneConfig huge = test::ring_config(std::numeric_limits<int>::max(), std::numeric_limits<int>::max(), 0,
                                       std::numeric_limits<int>::max(), std::numeric_limits<int>::max());
  // (2^31 - 1)^3 x 2 B is about 2^94: it wraps a 64-bit size to a small number when unchecked.
  const Result<std::int64_t> wrapped = huge.array_bytes(huge.capacity);
  EXPECT_EQ(wrapped.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(wrapped.status().message().find("does not fit in 64-bit"), std::string::npos);
  const Result<HostPlane> made = HostPlane::create(huge);
  ASSERT_FALSE(made.ok()) << "a plane of 2^94 bytes was created";
  EXPECT_EQ(made.status().code(), ErrorCode::invalid_argument);

  PlaneConfig at_limits = test::ring_config(limits::kMaxHeads, limits::kMaxHeadDim, 0, limits::kMaxRows,
                                            limits::kMaxContext);
  ASSERT_TRUE(at_limits.validate().ok()) << at_limits.validate().to_string();
  Result<std::int64_t> bytes = at_limits.array_bytes(at_limits.capacity);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, std::int64_t{1} << (30 + 12 + 9 + 1));  // 2^30 rows x 2^12 heads x 2^9 dims x 2 B
  // A growing plane is checked at the largest size it can grow to (max_context rows).
  PlaneConfig growing = test::growing_config(limits::kMaxHeads, limits::kMaxHeadDim, 1, limits::kMaxContext);
  ASSERT_TRUE(growing.validate().ok());
  EXPECT_EQ(growing.max_rows(), limits::kMaxContext);
}

// A window at or past max_context keeps every token: the ring needs only max_context rows and
// behaves as unbounded (never evicts).
TEST(RingPlane, WindowPastMaxContextNeedsOnlyMaxContextRows) {
  constexpr int kMaxContext = 40, kWindow = 1000;
  for (int slack : {0, 3}) {
    const PlaneConfig cfg = test::ring_config(2, 4, kWindow, kMaxContext + slack, kMaxContext);
    Result<HostPlane> made = HostPlane::create(cfg);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    HostPlane p = std::move(made).value();
    EXPECT_EQ(p.elements(), static_cast<std::size_t>(kMaxContext + slack) * 2 * 4);
    for (int pos = 0; pos < kMaxContext; ++pos) {
      const std::vector<float> k = row_values(pos, 8, 1.0f), v = row_values(pos, 8, -1.0f);
      Result<int> slot = p.append_row(pos, k.data(), v.data());
      ASSERT_TRUE(slot.ok()) << slot.status().to_string();
      EXPECT_EQ(*slot, pos);  // never wraps: slot = position
      EXPECT_EQ(p.state().len, pos + 1);
      EXPECT_EQ(p.state().origin_logical, 0);
      expect_window_intact(p, pos);
    }
    expect_refused(p, kMaxContext, ErrorCode::out_of_range);
  }
  // One row short of max_context (when the window is larger) would overwrite a visible row.
  EXPECT_EQ(test::ring_config(2, 4, kWindow, kMaxContext - 1, kMaxContext).validate().code(),
            ErrorCode::invalid_argument);
  // The geometry sizes its rings the same way.
  Geometry g = Geometry::muse_glimmer();
  g.window = 131072;
  g.max_context = 2048;
  ASSERT_TRUE(g.validate().ok());
  EXPECT_EQ(g.ring_capacity(), 2048);
  EXPECT_TRUE(PlaneConfig::for_layer(g, LayerClass::swa).validate().ok());
}

// plan_append's `rows`: an append planned with room for n rows lands in the state the n-th of
// n one-by-one appends reaches (the next n - 1 appends then never grow), over random
// configurations, starting points and n; n < 1 is refused, and so is room past the max context
// that a growing plane would have to grow for.
TEST(PlaneProperty, RoomForRowsEqualsAppendingThemOneByOne) {
  constexpr int kConfigs = 60;
  std::mt19937 rng(11);
  for (int i = 0; i < kConfigs; ++i) {
    const PlaneConfig cfg = random_config(rng);
    SCOPED_TRACE(fmt::format("{} window {} capacity {} max_context {}", plane_kind_name(cfg.kind), cfg.window,
                             cfg.capacity, cfg.max_context));
    std::uniform_int_distribution<int> start_at(0, cfg.max_context - 1);
    const int start = start_at(rng);
    PlaneState st = start == 0 ? PlaneState{} : state_after(cfg, start - 1).value();
    if (start == 0) st.capacity = cfg.capacity;
    std::uniform_int_distribution<int> rows_of(1, cfg.max_context - start);
    const int rows = rows_of(rng);
    Result<AppendPlan> first = plan_append(cfg, st, start, rows);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    PlaneState ahead = first->next;
    PlaneState walked = plan_append(cfg, st, start).value().next;
    EXPECT_EQ(first->slot, plan_append(cfg, st, start).value().slot);
    for (int r = 1; r < rows; ++r) {
      Result<AppendPlan> next = plan_append(cfg, ahead, start + r);
      ASSERT_TRUE(next.ok()) << next.status().to_string();
      EXPECT_EQ(next->grow_to, 0) << "row " << r << " grew after the room was planned";
      ahead = next->next;
      walked = plan_append(cfg, walked, start + r).value().next;
    }
    EXPECT_EQ(ahead, walked) << "start " << start << " rows " << rows;
    EXPECT_EQ(plan_append(cfg, st, start, 0).status().code(), ErrorCode::invalid_argument);
    // Room past the max context, where the plane must grow for it, cannot be made.
    if (cfg.kind == PlaneKind::growing && cfg.capacity <= cfg.max_context) {
      EXPECT_EQ(plan_append(cfg, st, start, cfg.max_context - start + 1).status().code(), ErrorCode::out_of_range);
    }
  }
}

// state_after (closed form) against the append rule applied position by position, over random
// configurations (including windows past max_context) and every position.
TEST(PlaneProperty, StateAfterEqualsAppendingEveryPosition) {
  constexpr int kConfigs = 80;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> coin(0, 3), big_window(100, 400);
  for (int i = 0; i < kConfigs; ++i) {
    PlaneConfig cfg = random_config(rng);
    if (cfg.kind == PlaneKind::ring && coin(rng) == 0) {
      cfg.window = std::max(cfg.max_context, big_window(rng));  // at or past max_context
      cfg.capacity = cfg.max_context + coin(rng);
    }
    SCOPED_TRACE(fmt::format("{} window {} capacity {} max_context {}", plane_kind_name(cfg.kind), cfg.window,
                             cfg.capacity, cfg.max_context));
    ASSERT_TRUE(cfg.validate().ok()) << cfg.validate().to_string();
    PlaneState walked;
    walked.capacity = cfg.capacity;
    for (int pos = 0; pos < cfg.max_context; ++pos) {
      Result<AppendPlan> plan = plan_append(cfg, walked, pos);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      walked = plan->next;
      Result<PlaneState> closed = state_after(cfg, pos);
      ASSERT_TRUE(closed.ok()) << closed.status().to_string();
      ASSERT_EQ(*closed, walked) << "position " << pos;
    }
    EXPECT_EQ(state_after(cfg, cfg.max_context).status().code(), ErrorCode::out_of_range);
    EXPECT_EQ(state_after(cfg, -1).status().code(), ErrorCode::invalid_argument);
  }
  // Hand-derived: a 10-row ring with window 8 after positions 0..20 holds 13..20 (8 rows);
  // origin 13 sits at physical 13 % 10 = 3. A growing plane from 4 rows, max 100, after
  // 0..20 (21 rows) has doubled 4 -> 8 -> 16 -> 32.
  const PlaneState ring = state_after(test::ring_config(1, 4, 8, 10, 100), 20).value();
  EXPECT_EQ(ring.len, 8);
  EXPECT_EQ(ring.origin_logical, 13);
  EXPECT_EQ(ring.origin_physical, 3);
  EXPECT_EQ(ring.next_position, 21);
  const PlaneState grown = state_after(test::growing_config(1, 4, 4, 100), 20).value();
  EXPECT_EQ(grown.capacity, 32);
  EXPECT_EQ(grown.len, 21);
  EXPECT_EQ(state_after(test::growing_config(1, 4, 4, 100), 99).value().capacity, 100);  // capped
}

}  // namespace
}  // namespace ladder
