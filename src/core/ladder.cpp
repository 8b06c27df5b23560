#include "ladder/ladder.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

namespace ladder {

const char* route_name(Route r) {
  switch (r) {
    case Route::vec: return "vec";
    case Route::splitk: return "splitk";
    case Route::interleaved: return "interleaved";
    case Route::staged: return "staged";
  }
  return "?";
}

namespace {
bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}
}  // namespace

Switches Switches::from_env() {
  Switches s;
  s.strict = env_on("LADDER_STRICT_ATTENTION");
  s.disable_vec = env_on("LADDER_DISABLE_VEC");
  return s;
}

Switches Switches::with_env() const {
  const Switches env = from_env();
  Switches s = *this;
  s.strict = strict || env.strict;
  s.disable_vec = disable_vec || env.disable_vec;
  s.stage_wrapped_swa = stage_wrapped_swa || env.stage_wrapped_swa;
  return s;
}

RouteDecision choose_route(LayerClass cls, const PlaneState& st, Capabilities caps, Switches sw) {
  RouteDecision d;
  Predicates& p = d.pred;
  p.has_vec = caps.has_vec && !sw.disable_vec;
  p.strict = sw.strict;
  // The chapter's R1, kept exactly: vec reads 32-row blocks, so a backing store under 32 rows
  // would be read past its end (the chapter's NaN case); and the rows must be one span, which a
  // partially wrapped ring is not. A full wrapped ring is (every slot is in-window); ladder's vec
  // reads it as two spans in logical order, so it gives splitk's bits (P7).
  p.vec_rows = (p.strict || p.has_vec) && st.len > 0 && st.capacity >= kBlockTokens &&
               (st.origin_physical == 0 || st.len == st.capacity);
  // Token-major rows cannot be padded per head, so SWA takes vec only when nothing pads.
  p.swa_vec = p.vec_rows && st.len % kBlockTokens == 0;
  p.stage = cls == LayerClass::swa && sw.stage_wrapped_swa && (p.strict || p.has_vec) && st.len > 0 &&
            st.capacity >= kBlockTokens && st.origin_physical != 0;
  if (cls == LayerClass::swa) {
    d.route = p.stage ? Route::staged : (p.swa_vec ? Route::vec : Route::splitk);
  } else {
    d.route = p.vec_rows ? Route::vec : Route::interleaved;
  }
  return d;
}

std::string route_refusal(Route r, const PlaneConfig& cfg, const PlaneState& st) {
  const bool ring = cfg.kind == PlaneKind::ring;
  switch (r) {
    case Route::splitk:
      return {};
    case Route::vec:
      // R1: vec reads whole 32-row blocks of in-window rows that fill one physical span: an
      // unwrapped plane, or a full ring (which ladder's vec walks in logical order).
      if (st.capacity < kBlockTokens)
        return fmt::format("vec reads {}-row blocks and this plane holds only {} rows (capacity < {}): it would read "
                           "past the allocation; use {}",
                           kBlockTokens, st.capacity, kBlockTokens, ring ? "splitk" : "interleaved");
      if (st.partially_wrapped())
        return fmt::format("vec reads one span of in-window rows (an unwrapped plane or a full ring), and this ring "
                           "is partially wrapped (origin_physical {}, len {} < capacity {}); use splitk or staged",
                           st.origin_physical, st.len, st.capacity);
      if (ring && st.len % kBlockTokens != 0)
        return fmt::format("vec cannot pad a token-major ring row, so a ring needs len % {} == 0 (len {}); use "
                           "splitk or staged",
                           kBlockTokens, st.len);
      return {};
    case Route::interleaved:
      if (ring) return "interleaved reads a growing (NoPE) head-major plane; a ring takes splitk, vec or staged";
      return {};
    case Route::staged:
      // Staging copies into its own buffer of whole 32-row blocks, so any ring capacity works.
      if (!ring) return "staged reorders a wrapped ring; a growing plane never wraps (use vec or interleaved)";
      return {};
  }
  return fmt::format("unknown route {}", static_cast<int>(r));
}

Status check_route(Route r, const PlaneConfig& cfg, const PlaneState& st) {
  const std::string why = route_refusal(r, cfg, st);
  if (why.empty()) return {};
  return make_error(ErrorCode::invalid_argument, fmt::format("route {} refused: {}", route_name(r), why));
}

Status check_layer_call(const PlaneConfig& cfg, const PlaneState& st, int position, int slot) {
  const auto bad = [](std::string m) { return make_error(ErrorCode::invalid_argument, std::move(m)); };
  if (position < 0) return bad(fmt::format("position must be >= 0 (got {})", position));
  if (st.len <= 0 || st.capacity <= 0)
    return bad("the plane holds no rows: append the token's position before attending");
  if (st.next_position != position + 1)
    return bad(fmt::format("the plane's last append was position {}, not {}: append position {} first",
                           st.next_position - 1, position, position));
  if (slot < 0 || slot >= st.capacity || slot != st.physical(position))
    return bad(fmt::format("slot {} is not where position {} lives (physical slot {})", slot, position,
                           st.physical(position)));
  const int visible = visible_rows(position, cfg.window);
  if (visible != st.len)
    return make_error(ErrorCode::internal,
                      fmt::format("plane holds {} rows but position {} sees {}", st.len, position, visible));
  return {};
}

std::string format_trace_header() {
  return fmt::format("{:>8} {:>5} {:>5} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>7} {:>6} {:>5} {:>4}",
                     "position", "layer", "class", "route", "capacity", "len", "orig_log", "orig_phy", "visible",
                     "has_vec", "vec_rows", "swa_vec", "stage", "nwg", "nsg");
}

std::string format_trace(const TraceEntry& e) {
  const Predicates& p = e.decision.pred;
  return fmt::format("{:>8} {:>5} {:>5} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>7} {:>6} {:>5} {:>4}",
                     e.position, e.layer, layer_class_name(e.cls), route_name(e.decision.route), e.state.capacity,
                     e.state.len, e.state.origin_logical, e.state.origin_physical, e.visible, p.has_vec ? 1 : 0,
                     p.vec_rows ? 1 : 0, p.swa_vec ? 1 : 0, p.stage ? 1 : 0, e.schedule.nwg, e.schedule.nsg);
}

ScratchNeeds scratch_needs(Route r, const Geometry& g, int visible) {
  ScratchNeeds n;
  const Schedule s = pinned_schedule(visible);
  const std::int64_t row_halfs = static_cast<std::int64_t>(g.n_kv_heads) * g.head_dim;
  // One partial per warp slot: the tensor-core GPU producer leaves the warp merge to the
  // reducer (kernel_params.hpp, step 5); producers that merge use the first nwg of them.
  n.partial_floats = static_cast<std::int64_t>(g.n_heads) * s.nwg * s.nsg * (2 + g.head_dim);
  if (r == Route::vec) n.pad_halfs = 2 * kBlockTokens * row_halfs;
  if (r == Route::staged) n.stage_halfs = 2 * static_cast<std::int64_t>(s.blocks) * kBlockTokens * row_halfs;
  return n;
}

ScratchNeeds max_scratch_needs(const Geometry& g) {
  // The schedule's nwg and the staged rows grow monotonically with visible, so the worst case
  // is each route at the largest visible length its layer class can reach.
  const int swa_max = std::min(g.window > 0 ? g.window : g.max_context, g.max_context);
  ScratchNeeds worst;
  const auto take = [&](Route r, int visible) {
    const ScratchNeeds n = scratch_needs(r, g, visible);
    worst.partial_floats = std::max(worst.partial_floats, n.partial_floats);
    worst.pad_halfs = std::max(worst.pad_halfs, n.pad_halfs);
    worst.stage_halfs = std::max(worst.stage_halfs, n.stage_halfs);
  };
  for (Route r : {Route::vec, Route::splitk, Route::staged}) take(r, swa_max);
  for (Route r : {Route::vec, Route::interleaved}) take(r, g.max_context);
  return worst;
}

}  // namespace ladder
