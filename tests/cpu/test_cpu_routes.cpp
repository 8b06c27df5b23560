// Every route of both CPU producers against the f64 reference (P3), and the exact twin also
// against a literal transcription of THE PRODUCER DAG (bit for bit), over sweeps of plane geometry and wrap
// state, GQA ratio and head_dim. A route that does not apply to a plane state must be refused
// with invalid_argument and leave the plane and the output untouched.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu_twin_helpers.hpp"

namespace ladder {
namespace {

using test::Token;

// P3's bar: ||out - ref|| / ||ref|| < 2e-3 (for both KV dtypes: the reference reads the stored
// elements, so the dtype's rounding is not part of this error).
constexpr double kSpecTolerance = 2e-3;
// The reference is fed the very stored (f16 or bf16) rows the kernels read (and the unrounded f32
// current token on the interleaved route), so the storage rounding contributes no error here: what is
// left is f32 accumulation (128-term dot products, softmax_exp's 2e-7, sums over at most a few
// thousand tokens in f32). Measured worst over this sweep: 2.3e-7, four orders of magnitude under
// P3's bar; the tighter bound (40x the measurement) catches an addressing or ordering bug that
// P3's slack would hide.
constexpr double kTightTolerance = 1e-5;

struct SweepCase {
  std::string name;
  PlaneConfig cfg;
  int n_heads = 0;
  int last_position = 0;     // history runs 0 .. last_position
  std::vector<int> positions;  // positions to test; empty: every position
};

void PrintTo(const SweepCase& c, std::ostream* os) { *os << c.name; }

// What the ladder's fail-closed predicates allow each route to read (written independently of
// run_route): vec needs >= 32 rows of backing store, one contiguous span, and on a token-major
// ring no ragged tail; interleaved is for growing planes, staged for rings; splitk reads all.
bool route_applies(Route r, PlaneKind kind, const PlaneState& st) {
  switch (r) {
    case Route::vec:
      return st.capacity >= kBlockTokens && (st.origin_physical == 0 || st.len == st.capacity) &&
             (kind == PlaneKind::growing || st.len % kBlockTokens == 0);
    case Route::splitk: return true;
    case Route::interleaved: return kind == PlaneKind::growing;
    case Route::staged: return kind == PlaneKind::ring;
  }
  return false;
}

// The rows a route reads, in the order it visits them (the DAG's token index t): logical order
// on every route (vec on a full wrapped ring included); the interleaved route takes the current
// token from the f32 activations.
test::RowFetch route_rows(Route r, const HostPlane& p, int position, const Token& tok) {
  return test::logical_rows(p, position, r == Route::interleaved ? &tok : nullptr);
}

class RouteSweep : public ::testing::TestWithParam<SweepCase> {};

TEST_P(RouteSweep, MatchesReferenceAndDag) {
  const SweepCase& c = GetParam();
  const HeadShape shape = test::make_shape(c.n_heads, c.cfg.n_kv_heads, c.cfg.head_dim);
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(c.name)));
  HostPlane plane = HostPlane::create(c.cfg).value();
  int tested = 0;
  double worst = 0;
  for (int pos = 0; pos <= c.last_position; ++pos) {
    const Token tok = test::random_token(shape, rng);
    const bool test_here = c.positions.empty() || std::find(c.positions.begin(), c.positions.end(), pos) !=
                                                      c.positions.end();
    if (test_here) {
      for (cpu::CpuProducer producer : test::kAllProducers) {
        for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged}) {
          SCOPED_TRACE(fmt::format("position {} route {} producer {}", pos, route_name(r), cpu::cpu_producer_name(producer)));
          const test::ProducerScope scope(producer);
          test::RouteRun run = test::run_on_copy(r, plane, pos, shape, tok);
          HostPlane appended = plane;
          ASSERT_TRUE(appended.append(pos).ok());
          if (!route_applies(r, c.cfg.kind, appended.state())) {
            EXPECT_EQ(run.status.code(), ErrorCode::invalid_argument) << run.status.to_string();
            EXPECT_TRUE(test::same_plane(run.plane, appended)) << "a refused route touched the plane";
            EXPECT_TRUE(std::all_of(run.out.begin(), run.out.end(), [](float x) { return std::isnan(x); }))
                << "a refused route wrote its output";
            continue;
          }
          ASSERT_TRUE(run.status.ok()) << run.status.to_string();
          // The current row landed in its slot, rounded once to f16 (on every route, including
          // the interleaved one whose producer stores it).
          appended.write_row(run.slot, tok.k.data(), tok.v.data());
          EXPECT_TRUE(test::same_plane(run.plane, appended)) << "the route wrote the plane somewhere else";
          const int visible = run.plane.state().len;
          const test::RowFetch rows = route_rows(r, run.plane, pos, tok);
          const std::vector<double> ref = test::reference_from(shape, tok.q, visible, rows);
          const double err = relative_error(run.out.data(), ref.data(), ref.size());
          EXPECT_LT(err, kSpecTolerance);
          EXPECT_LT(err, kTightTolerance);
          worst = std::max(worst, err);
          if (producer == cpu::CpuProducer::exact) {
            const std::vector<float> dag = test::dag_oracle(shape, tok.q, visible, rows);
            EXPECT_TRUE(test::same_bits(run.out, dag)) << "the exact twin departs from THE PRODUCER DAG";
          }
          ++tested;
        }
      }
    }
    ASSERT_TRUE(plane.append_row(pos, tok.k.data(), tok.v.data()).ok());
  }
  EXPECT_GT(tested, 0);
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
}

std::vector<SweepCase> sweep_cases() {
  constexpr int kHd128 = 128;
  constexpr int kHd64 = 64;
  std::vector<SweepCase> c;
  // Ring exactly one window: unwrapped until len = 64, then a full wrapped ring (vec reads it).
  c.push_back({"ring_w64_c64_gqa8x2_hd128", test::ring_config(2, kHd128, 64, 64, 1000), 8, 200, {}});
  // Slack 16: partially wrapped most of the time, unwrapped again when origin_physical
  // returns to 0 (position 143, 223).
  c.push_back({"ring_w64_c80_gqa6x3_hd64", test::ring_config(3, kHd64, 64, 80, 1000), 6, 260, {}});
  // Capacity under 32: vec must never be taken, every other ring route must still be exact.
  c.push_back({"ring_w20_c20_gqa4x4_hd64", test::ring_config(4, kHd64, 20, 20, 1000), 4, 70, {}});
  c.push_back({"ring_w20_c27_gqa8x2_hd128", test::ring_config(2, kHd128, 20, 27, 1000), 8, 60, {}});
  // A window that is not a multiple of 32: a full wrapped token-major ring still may not pad.
  c.push_back({"ring_w40_c45_gqa32x2_hd64", test::ring_config(2, kHd64, 40, 45, 1000), 32, 120, {}});
  c.push_back({"ring_w96_c96_gqa32x2_hd128", test::ring_config(2, kHd128, 96, 96, 1000), 32, 200,
               {0, 1, 31, 32, 33, 63, 64, 95, 96, 97, 150, 191, 192, 200}});
  // Unbounded ring (window 0): never evicts, so it is always unwrapped.
  c.push_back({"ring_unbounded_c70_gqa6x3_hd64", test::ring_config(3, kHd64, 0, 70, 70), 6, 69, {}});
  // Growing planes: from a tiny initial capacity through growth past 32 rows; odd lengths pad.
  c.push_back({"growing_c8_gqa6x3_hd128", test::growing_config(3, kHd128, 8, 300), 6, 150, {}});
  c.push_back({"growing_c40_gqa4x4_hd128", test::growing_config(4, kHd128, 40, 200), 4, 110, {}});
  // Never reaches 32 rows (the chapter's tiny-capacity NaN case): interleaved, never vec.
  c.push_back({"growing_c24_max24_gqa8x2_hd64", test::growing_config(2, kHd64, 24, 24), 8, 23, {}});
  // Head dims other than the two production ones exercise partial lane rounds.
  c.push_back({"growing_c64_gqa4x2_hd160", test::growing_config(2, 160, 64, 100), 4, 70, {1, 32, 33, 64, 65, 70}});
  c.push_back({"ring_w36_c40_gqa2x1_hd32", test::ring_config(1, 32, 36, 40, 200), 2, 120, {}});
  // Muse Glimmer shapes at depth: schedules with nsg 2 and 4, full and partially wrapped rings.
  c.push_back({"ring_w2048_c2048_muse", test::ring_config(2, kHd128, 2048, 2048, 131072), 32, 2084,
               {2047, 2084}});
  c.push_back({"ring_w2048_c2096_muse_slack", test::ring_config(2, kHd128, 2048, 2096, 131072), 32, 2100,
               {2100}});
  c.push_back({"growing_muse_nsg4", test::growing_config(2, kHd128, 4096, 131072), 32, 4999, {4096, 4999}});
  // Every case again on bf16 planes: the same routes and bounds, the rows read as bf16.
  const std::size_t f16_cases = c.size();
  for (std::size_t i = 0; i < f16_cases; ++i) {
    SweepCase b = c[i];
    b.name += "_bf16";
    b.cfg.kv_dtype = KvDtype::bf16;
    c.push_back(b);
  }
  return c;
}

INSTANTIATE_TEST_SUITE_P(Sweep, RouteSweep, ::testing::ValuesIn(sweep_cases()),
                         [](const ::testing::TestParamInfo<SweepCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ladder
