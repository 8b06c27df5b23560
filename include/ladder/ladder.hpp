// R1–R5: the route ladder. One plain host function, choose_route(), decides per layer and per
// token (after the append) which kernel family runs. Dispatch, support checks and scratch
// sizing all call it; nothing else re-derives a route.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/geometry.hpp"
#include "ladder/plane.hpp"
#include "ladder/schedule.hpp"

namespace ladder {

enum class Route : std::uint8_t {
  vec,          // store -> ordering point -> vec (+ pad for a ragged head-major tail) -> reduce
  splitk,       // store -> ring-native split-K producer -> reducer (SWA fallback)
  interleaved,  // fused-store interleaved producer (f32 current-token bypass) -> LSE reducer
  staged,       // store -> stage wrapped SWA rows into absolute padded order -> vec -> reduce
};
inline constexpr int kRouteCount = 4;
const char* route_name(Route r);

// What the running build offers. has_vec: the vec family is available (the analog of the
// chapter's pinned metallib being loaded).
struct Capabilities {
  bool has_vec = true;
};

// Run-time switches (R3). from_env() reads LADDER_DISABLE_VEC=1 and LADDER_STRICT_ATTENTION=1.
struct Switches {
  bool strict = false;             // LADDER_STRICT_ATTENTION: take vec rows even without has_vec
  bool disable_vec = false;        // LADDER_DISABLE_VEC: the vec family is switched off
  bool stage_wrapped_swa = false;  // serving-graph parity: stage wrapped SWA rings (G5)
  static Switches from_env();
  // What an engine runs with: these switches or the environment's (either one switches on).
  Switches with_env() const;
};

// Every predicate's value, recorded for the trace (R4).
struct Predicates {
  bool has_vec = false;    // capability after switches
  bool strict = false;
  bool vec_rows = false;   // (strict || has_vec) && len > 0 && capacity >= 32 && (origin_physical == 0 || len == capacity)
  bool swa_vec = false;    // vec_rows && len % 32 == 0
  bool stage = false;      // SWA, staging switched on, a usable vec family, len > 0, capacity >= 32, ring wrapped
};

struct RouteDecision {
  Route route = Route::splitk;
  Predicates pred;
};

// The ladder (§16.0, exactly). `state` is the plane state after this token's append.
RouteDecision choose_route(LayerClass cls, const PlaneState& state, Capabilities caps, Switches sw);

// R1's admissibility, stated once: why route `r` cannot read plane `cfg` in state `st` (the
// state after the token's append), or "" when it can. Every caller that runs or offers a
// route asks this (the engine, attend_layer, both devices, the CLI, Python), so no two places
// disagree about what a route may read. choose_route never picks a route this refuses.
std::string route_refusal(Route r, const PlaneConfig& cfg, const PlaneState& st);
// The same as a Status: invalid_argument "route <name> refused: <why>".
Status check_route(Route r, const PlaneConfig& cfg, const PlaneState& st);
// The call contract of one layer's attention, stated once: `st` holds `position` as its last
// append, `slot` is where it lives and the plane holds exactly the rows `position` sees
// (invalid_argument naming what is wrong; internal for a state no append can produce).
Status check_layer_call(const PlaneConfig& cfg, const PlaneState& st, int position, int slot);

// R4: one record per (token, layer).
struct TraceEntry {
  std::int64_t sequence = 0;
  int position = 0;
  int layer = 0;
  LayerClass cls = LayerClass::swa;
  RouteDecision decision;
  PlaneState state;
  int visible = 0;
  // The block partition the layer's producer folds by: in an engine's trace, the device's
  // (DeviceBackend::schedule; the CUDA tensor-core producer's tc_schedule); in a trace made
  // without a device (`ladder routes`, the Python module's route_trace), the pinned one.
  Schedule schedule;
};
std::string format_trace_header();
std::string format_trace(const TraceEntry& e);

// Scratch (bytes) a route needs for one layer at `visible` tokens; engines size their scratch
// as the maximum over the states a plane can reach (R5).
struct ScratchNeeds {
  std::int64_t partial_floats = 0;  // [n_heads][nwg][nsg][2 + head_dim]
  std::int64_t pad_halfs = 0;       // vec tail pad: 2 planes x 32 rows x n_kv_heads x head_dim
  std::int64_t stage_halfs = 0;     // staging: 2 planes x ceil32(visible) rows x n_kv_heads x head_dim
};
ScratchNeeds scratch_needs(Route r, const Geometry& g, int visible);
// Worst case over every route and visible length up to the layer class's maximum.
ScratchNeeds max_scratch_needs(const Geometry& g);

}  // namespace ladder
