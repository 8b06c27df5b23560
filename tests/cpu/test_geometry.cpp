// Geometry (SPEC "Reference geometry", M1) and scratch sizing (R5).
#include <gtest/gtest.h>

#include <cmath>

#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"

namespace ladder {
namespace {

TEST(Geometry, MuseGlimmerPreset) {
  const Geometry g = Geometry::muse_glimmer();
  ASSERT_TRUE(g.validate().ok());
  EXPECT_EQ(g.n_layers, 52);
  EXPECT_EQ(g.count_layers(LayerClass::swa), 39);
  EXPECT_EQ(g.count_layers(LayerClass::nope), 13);
  for (int i = 0; i < g.n_layers; ++i)
    EXPECT_EQ(g.layer_class(i), i % 4 == 3 ? LayerClass::nope : LayerClass::swa) << "layer " << i;
  EXPECT_EQ(g.heads_per_kv(), 16);
  EXPECT_EQ(g.kv_bytes_per_token_layer(), 1024);  // the chapter's 1,024 B per token per layer
  EXPECT_FLOAT_EQ(g.scale(), 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(g.weight_bytes_per_token, 16'756'681'056);
}

TEST(Geometry, GqaMapping) {
  const Geometry g = Geometry::muse_glimmer();
  for (int h = 0; h < 16; ++h) EXPECT_EQ(g.kv_head_of(h), 0);
  for (int h = 16; h < 32; ++h) EXPECT_EQ(g.kv_head_of(h), 1);
  Geometry g2 = g;
  g2.n_heads = 12;
  g2.n_kv_heads = 4;
  ASSERT_TRUE(g2.validate().ok());
  EXPECT_EQ(g2.kv_head_of(0), 0);
  EXPECT_EQ(g2.kv_head_of(5), 1);
  EXPECT_EQ(g2.kv_head_of(11), 3);
}

TEST(Geometry, VisibleAndLogicalStart) {
  EXPECT_EQ(visible_rows(0, 2048), 1);
  EXPECT_EQ(visible_rows(2046, 2048), 2047);
  EXPECT_EQ(visible_rows(2047, 2048), 2048);
  EXPECT_EQ(visible_rows(5000, 2048), 2048);
  EXPECT_EQ(logical_start(5000, 2048), 5000 + 1 - 2048);
  EXPECT_EQ(visible_rows(5000, 0), 5001);  // window 0 means unbounded
  EXPECT_EQ(logical_start(5000, 0), 0);
}

struct BadGeometry {
  const char* what;
  void (*mutate)(Geometry&);
};

class GeometryValidation : public ::testing::TestWithParam<BadGeometry> {};

TEST_P(GeometryValidation, RefusedWithAClearMessage) {
  Geometry g = Geometry::muse_glimmer();
  GetParam().mutate(g);
  const Status s = g.validate();
  ASSERT_FALSE(s.ok()) << GetParam().what;
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_FALSE(s.message().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GeometryValidation,
    ::testing::Values(BadGeometry{"zero layers", [](Geometry& g) { g.n_layers = 0; }},
                      BadGeometry{"heads not divisible", [](Geometry& g) { g.n_heads = 31; }},
                      BadGeometry{"no kv heads", [](Geometry& g) { g.n_kv_heads = 0; }},
                      BadGeometry{"odd head_dim", [](Geometry& g) { g.head_dim = 126; }},
                      BadGeometry{"negative window", [](Geometry& g) { g.window = -1; }},
                      BadGeometry{"no context", [](Geometry& g) { g.max_context = 0; }},
                      BadGeometry{"negative slack", [](Geometry& g) { g.ring_slack = -3; }},
                      BadGeometry{"phase out of period", [](Geometry& g) { g.nope_phase = 4; }},
                      BadGeometry{"layer list length", [](Geometry& g) { g.layer_classes = {LayerClass::swa}; }},
                      BadGeometry{"too many layers", [](Geometry& g) { g.n_layers = limits::kMaxLayers + 1; }},
                      BadGeometry{"two billion layers", [](Geometry& g) { g.n_layers = 2'000'000'000; }},
                      BadGeometry{"too many heads", [](Geometry& g) { g.n_heads = limits::kMaxHeads * 2; }},
                      BadGeometry{"more kv heads than heads", [](Geometry& g) { g.n_kv_heads = 64; }},
                      BadGeometry{"head_dim past 512", [](Geometry& g) { g.head_dim = 516; }},
                      BadGeometry{"context past 2^30", [](Geometry& g) { g.max_context = limits::kMaxContext + 1; }},
                      BadGeometry{"ring past 2^30 rows", [](Geometry& g) { g.ring_slack = limits::kMaxRows; }},
                      BadGeometry{"negative weights", [](Geometry& g) { g.weight_bytes_per_token = -1; }}));

// The upper bounds themselves validate, and a window past max_context is not an error: the
// ring holds min(window, max_context) + ring_slack rows.
TEST(Geometry, LimitsAreInclusiveAndTheRingIsBoundedByMaxContext) {
  Geometry g = Geometry::muse_glimmer();
  g.n_layers = limits::kMaxLayers;
  g.n_heads = limits::kMaxHeads;
  g.n_kv_heads = limits::kMaxHeads;
  g.head_dim = limits::kMaxHeadDim;
  g.max_context = limits::kMaxContext;
  g.window = 0;
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
  EXPECT_EQ(g.ring_capacity(), limits::kMaxContext);

  Geometry w = Geometry::muse_glimmer();
  const int windows[] = {1, 2047, 2048, 2049, 131072, 1 << 30};
  for (int window : windows) {
    w.window = window;
    w.max_context = 2048;
    w.ring_slack = 5;
    ASSERT_TRUE(w.validate().ok()) << window;
    const int expected_rows = window < 2048 ? window : 2048;  // min(window, max_context)
    EXPECT_EQ(w.ring_capacity(), expected_rows + 5) << window;
  }
}

TEST(Scratch, SizedFromTheLadderAndTheSchedule) {
  const Geometry g = Geometry::muse_glimmer();
  // splitk at a full window: nwg = min(64 blocks, 32), nsg 1: 32 partials of 2 + 128 floats per head.
  EXPECT_EQ(scratch_needs(Route::splitk, g, 2048).partial_floats, 32 * 32 * 130);
  // At 8192 the schedule has 4 warps per workgroup: one partial per warp slot.
  EXPECT_EQ(scratch_needs(Route::splitk, g, 8192).partial_floats, 32 * 32 * 4 * 130);
  EXPECT_EQ(scratch_needs(Route::splitk, g, 2048).stage_halfs, 0);
  // staged pads visible up to a multiple of 32 rows: 2017 -> 64 blocks = 2048 rows, x 2 planes x 2 heads x 128.
  EXPECT_EQ(scratch_needs(Route::staged, g, 2017).stage_halfs, 2 * 2048 * 2 * 128);
  EXPECT_EQ(scratch_needs(Route::vec, g, 100).pad_halfs, 2 * 32 * 2 * 128);
  const ScratchNeeds worst = max_scratch_needs(g);
  // The NoPE layers reach max_context (nwg 32, nsg 4).
  EXPECT_EQ(worst.partial_floats, 32 * 32 * 4 * 130);
  EXPECT_EQ(worst.stage_halfs, 2 * 2048 * 2 * 128);
  EXPECT_EQ(worst.pad_halfs, 2 * 32 * 2 * 128);
}

}  // namespace
}  // namespace ladder
