// R1/R3: the ladder's predicates and routes as a truth table, plus an exhaustive check of
// choose_route against the chapter's formula written out again here.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace ladder {
namespace {

PlaneState state(int capacity, int len, int origin_physical) {
  PlaneState s;
  s.capacity = capacity;
  s.len = len;
  s.origin_physical = origin_physical;
  return s;
}

struct Row {
  const char* why;
  LayerClass cls;
  PlaneState st;
  bool has_vec, strict, disable_vec, stage;
  bool vec_rows, swa_vec;
  Route route;
};

constexpr auto S = LayerClass::swa;
constexpr auto N = LayerClass::nope;

TEST(Ladder, TruthTable) {
  const Row rows[] = {
      // capacity < 32 never takes vec, even full, unwrapped, aligned or strict.
      {"tiny ring", S, state(20, 20, 0), true, false, false, false, false, false, Route::splitk},
      {"tiny ring strict", S, state(16, 16, 0), true, true, false, false, false, false, Route::splitk},
      {"tiny growing", N, state(24, 5, 0), true, false, false, false, false, false, Route::interleaved},
      {"tiny growing strict", N, state(31, 31, 0), false, true, false, false, false, false, Route::interleaved},
      // Unwrapped ring, aligned: vec.
      {"unwrapped aligned", S, state(64, 32, 0), true, false, false, false, true, true, Route::vec},
      // Unwrapped ring, ragged: vec rows, but token-major rows cannot pad: splitk.
      {"unwrapped ragged", S, state(64, 33, 0), true, false, false, false, true, false, Route::splitk},
      // Partially wrapped ring never takes vec, aligned or not.
      {"partially wrapped aligned", S, state(80, 64, 5), true, false, false, false, false, false, Route::splitk},
      {"partially wrapped strict", S, state(80, 64, 5), true, true, false, false, false, false, Route::splitk},
      // A full wrapped ring is one contiguous span: vec when aligned.
      {"full wrapped aligned", S, state(64, 64, 17), true, false, false, false, true, true, Route::vec},
      {"full wrapped ragged", S, state(40, 40, 3), true, false, false, false, true, false, Route::splitk},
      // Empty plane: nothing to attend to, no vec.
      {"empty ring", S, state(64, 0, 0), true, false, false, false, false, false, Route::splitk},
      {"empty growing", N, state(64, 0, 0), true, false, false, false, false, false, Route::interleaved},
      // NoPE: vec_rows alone decides (the vec family pads a head-major tail).
      {"growing ragged", N, state(4096, 33, 0), true, false, false, false, true, false, Route::vec},
      {"growing aligned", N, state(4096, 64, 0), true, false, false, false, true, true, Route::vec},
      // R3: no vec family, or switched off, falls to the owned kernels...
      {"no vec family", S, state(64, 64, 0), false, false, false, false, false, false, Route::splitk},
      {"no vec family nope", N, state(4096, 64, 0), false, false, false, false, false, false, Route::interleaved},
      {"vec disabled", S, state(64, 64, 0), true, false, true, false, false, false, Route::splitk},
      {"vec disabled nope", N, state(4096, 64, 0), true, false, true, false, false, false, Route::interleaved},
      // ...unless strict, which takes vec rows regardless (R1: strict || has_vec).
      {"strict without vec", S, state(64, 64, 0), false, true, false, false, true, true, Route::vec},
      {"strict and disabled", N, state(4096, 7, 0), true, true, true, false, true, false, Route::vec},
      // G5: staging on a wrapped ring (partially or fully) when switched on.
      {"stage partially wrapped", S, state(80, 64, 5), true, false, false, true, false, false, Route::staged},
      {"stage full wrapped", S, state(64, 64, 17), true, false, false, true, true, true, Route::staged},
      {"stage ragged wrapped", S, state(45, 40, 9), true, false, false, true, false, false, Route::staged},
      // Staging never applies to an unwrapped ring, a tiny ring, a NoPE plane, or without vec.
      {"stage unwrapped", S, state(64, 64, 0), true, false, false, true, true, true, Route::vec},
      {"stage tiny", S, state(20, 20, 7), true, false, false, true, false, false, Route::splitk},
      {"stage nope", N, state(4096, 64, 0), true, false, false, true, true, true, Route::vec},
      {"stage without vec", S, state(80, 64, 5), false, false, false, true, false, false, Route::splitk},
      {"stage disabled vec", S, state(80, 64, 5), true, false, true, true, false, false, Route::splitk},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.why);
    Capabilities caps;
    caps.has_vec = r.has_vec;
    Switches sw;
    sw.strict = r.strict;
    sw.disable_vec = r.disable_vec;
    sw.stage_wrapped_swa = r.stage;
    const RouteDecision d = choose_route(r.cls, r.st, caps, sw);
    EXPECT_EQ(d.pred.vec_rows, r.vec_rows);
    EXPECT_EQ(d.pred.swa_vec, r.swa_vec);
    EXPECT_EQ(d.pred.has_vec, r.has_vec && !r.disable_vec);
    EXPECT_EQ(d.pred.strict, r.strict);
    EXPECT_EQ(d.route, r.route) << route_name(d.route) << " vs " << route_name(r.route);
  }
}

// The chapter's predicates (decode.rs:5643-5657), restated independently, over every small state.
TEST(Ladder, ExhaustiveAgainstTheChapterFormula) {
  constexpr int kMaxCapacity = 70;
  for (int cls_i = 0; cls_i < 2; ++cls_i)
    for (int flags = 0; flags < 16; ++flags)
      for (int cap = 1; cap <= kMaxCapacity; ++cap)
        for (int len = 0; len <= cap; ++len)
          for (int origin : {0, 1, cap - 1}) {
            const LayerClass cls = cls_i == 0 ? LayerClass::swa : LayerClass::nope;
            Capabilities caps;
            caps.has_vec = (flags & 1) != 0;
            Switches sw;
            sw.strict = (flags & 2) != 0;
            sw.disable_vec = (flags & 4) != 0;
            sw.stage_wrapped_swa = (flags & 8) != 0;
            const PlaneState st = state(cap, len, origin);
            const bool has = caps.has_vec && !sw.disable_vec;
            const bool vec_rows = (sw.strict || has) && len > 0 && cap >= 32 && (origin == 0 || len == cap);
            const bool swa_vec = vec_rows && len % 32 == 0;
            const bool stage = cls == LayerClass::swa && sw.stage_wrapped_swa && (sw.strict || has) && len > 0 &&
                               cap >= 32 && origin != 0;
            const Route want = cls == LayerClass::swa ? (stage ? Route::staged : swa_vec ? Route::vec : Route::splitk)
                                                      : (vec_rows ? Route::vec : Route::interleaved);
            const RouteDecision d = choose_route(cls, st, caps, sw);
            ASSERT_EQ(d.route, want) << fmt::format("cls {} flags {} cap {} len {} origin {}", cls_i, flags, cap,
                                                    len, origin);
            ASSERT_EQ(d.pred.vec_rows, vec_rows);
            ASSERT_EQ(d.pred.swa_vec, swa_vec);
            ASSERT_EQ(d.pred.stage, stage);
            // R1 is stated once (route_refusal), and choose_route never picks what it refuses.
            PlaneConfig cfg;
            cfg.kind = cls == LayerClass::swa ? PlaneKind::ring : PlaneKind::growing;
            cfg.capacity = cap;
            ASSERT_EQ(route_refusal(d.route, cfg, st), "")
                << fmt::format("cls {} flags {} cap {} len {} origin {}", cls_i, flags, cap, len, origin);
            // Fail-closed: vec is never chosen where it would read past or out of order.
            if (d.route == Route::vec) {
              ASSERT_GE(cap, 32);
              ASSERT_FALSE(st.partially_wrapped());
            }
          }
}

// route_refusal's own cases, each with the reason a user reads: vec past a small plane, vec over a
// partially wrapped ring, vec over a ragged ring, interleaved on a ring, staged on a growing
// plane; splitk reads any plane.
TEST(Ladder, RouteRefusalNamesWhy) {
  PlaneConfig ring;
  ring.kind = PlaneKind::ring;
  PlaneConfig growing;
  growing.kind = PlaneKind::growing;
  const auto refused = [](Route r, const PlaneConfig& cfg, const PlaneState& st, const char* why) {
    const std::string got = route_refusal(r, cfg, st);
    EXPECT_NE(got.find(why), std::string::npos) << route_name(r) << ": '" << got << "'";
    const Status s = check_route(r, cfg, st);
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
    EXPECT_NE(s.message().find(got), std::string::npos) << s.message();
  };
  refused(Route::vec, ring, state(16, 16, 0), "capacity < 32");
  refused(Route::vec, ring, state(64, 40, 10), "partially wrapped");
  refused(Route::vec, ring, state(64, 40, 0), "len % 32 == 0");
  refused(Route::interleaved, ring, state(64, 64, 0), "growing");
  refused(Route::staged, growing, state(64, 40, 0), "wrapped ring");
  for (const PlaneState& st : {state(16, 16, 0), state(64, 40, 10), state(64, 40, 0), state(1, 1, 0)}) {
    EXPECT_EQ(route_refusal(Route::splitk, ring, st), "");
    EXPECT_TRUE(check_route(Route::splitk, ring, st).ok());
  }
  EXPECT_EQ(route_refusal(Route::vec, ring, state(64, 64, 10)), "") << "a full ring is one span in logical order";
  EXPECT_EQ(route_refusal(Route::vec, growing, state(64, 40, 0)), "") << "a growing plane pads its ragged tail";
}

}  // namespace
}  // namespace ladder
