// K1–K4: ring and growing planes — append slots, refusals that leave the plane untouched,
// in-window rows never overwritten, growth that preserves data, poisoned unwritten rows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
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

}  // namespace
}  // namespace ladder
