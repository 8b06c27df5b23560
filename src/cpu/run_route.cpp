// run_route: one route for one layer on a host plane — validate, store, (pad | stage)
// (prepare_route), then produce and reduce as one pool job (run_layers, layer_job.cpp).
// Everything is checked before anything is written, so a refused call leaves the plane, the
// workspace contents that matter and io.out exactly as they were.
#include <cmath>
#include <fmt/format.h>

#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

Status bad(std::string msg) { return make_error(ErrorCode::invalid_argument, std::move(msg)); }

bool known_route(Route r) {
  return r == Route::vec || r == Route::splitk || r == Route::interleaved || r == Route::staged;
}

Status check_io(const HeadShape& shape, const PlaneConfig& cfg, const LayerIO& io) {
  if (io.q == nullptr || io.k == nullptr || io.v == nullptr || io.out == nullptr)
    return bad(fmt::format("LayerIO has a null pointer (q {}, k {}, v {}, out {}): every buffer is required",
                           io.q ? "set" : "null", io.k ? "set" : "null", io.v ? "set" : "null",
                           io.out ? "set" : "null"));
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0)
    return bad(fmt::format("head shape {}:{} is not grouped-query attention (n_heads must be a positive multiple "
                           "of n_kv_heads)",
                           shape.n_heads, shape.n_kv_heads));
  LADDER_TRY(check_head_dim(shape.head_dim, "head_dim"));
  if (!std::isfinite(shape.scale))
    return bad(fmt::format("softmax scale must be finite (got {})", shape.scale));
  if (shape.n_kv_heads != cfg.n_kv_heads || shape.head_dim != cfg.head_dim)
    return bad(fmt::format("head shape ({} KV heads, head_dim {}) does not match the plane ({} KV heads, head_dim {})",
                           shape.n_kv_heads, shape.head_dim, cfg.n_kv_heads, cfg.head_dim));
  return {};
}

}  // namespace

void Workspace::reserve(const ScratchNeeds& n) {
  const auto grow = [](auto& v, std::int64_t want) {
    if (want > 0 && v.size() < static_cast<std::size_t>(want)) v.resize(static_cast<std::size_t>(want));
  };
  grow(partials, n.partial_floats);
  grow(pad, n.pad_halfs);
  grow(stage, n.stage_halfs);
}

ScratchNeeds route_scratch_needs(Route r, const HeadShape& shape, int visible, bool fast) {
  ScratchNeeds n = scratch_needs(r, shape_geometry(shape), visible);
  // The fast producer writes [n_heads][splits][2 + head_dim]: a quarter of the pinned
  // schedule's worst case (nsg warp partials per workgroup) at depth.
  if (fast)
    n.partial_floats = static_cast<std::int64_t>(shape.n_heads) * fast_schedule(visible).splits *
                       partial_stride(shape.head_dim);
  return n;
}

Status prepare_route(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape, const LayerIO& io,
                     Workspace& ws, LayerWork& work) {
  if (!known_route(r)) return bad(fmt::format("unknown route {}", static_cast<int>(r)));
  const PlaneConfig& cfg = plane.config();
  const PlaneState& st = plane.state();
  LADDER_TRY(check_io(shape, cfg, io));
  LADDER_TRY(check_layer_call(cfg, st, position, slot));
  LADDER_TRY(check_route(r, cfg, st));

  Result<CpuProducer> which = producer();
  if (!which.ok()) return which.status();
  const bool fast = *which == CpuProducer::fast;
  Result<CpuVectors> width = vectors();
  if (!width.ok()) return width.status();
  work.route = r;
  work.fast = fast;
  work.vectors = *width;
  // Start (or find) the worker pool before the row is stored: a pool that cannot start its
  // threads is refused here with the plane untouched.
  LADDER_TRY(detail::shared_pool().status());

  const int visible = st.len;
  try {
    ws.reserve(route_scratch_needs(r, shape, visible, fast));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::out_of_memory, fmt::format("cannot allocate scratch for {} rows", visible));
  }

  const PlaneStrides strides = plane.strides();
  const Schedule sched = pinned_schedule(visible);

  ProducerParams& pp = work.params;
  pp = ProducerParams{};
  pp.shape = shape;
  pp.kv_dtype = cfg.kv_dtype;
  pp.visible = visible;
  pp.sched = sched;
  pp.q = io.q;
  pp.partials = ws.partials.data();
  pp.rows = logical_window(plane.k(), plane.v(), strides, st, logical_start(position, cfg.window));
  pp.tail_first = visible;

  if (r != Route::interleaved) {
    StoreParams sp;
    sp.kv_dtype = cfg.kv_dtype;
    sp.n_kv_heads = shape.n_kv_heads;
    sp.head_dim = shape.head_dim;
    sp.k = io.k;
    sp.v = io.v;
    sp.plane_k = plane.k();
    sp.plane_v = plane.v();
    sp.strides = strides;
    sp.slot = slot;
    store_rows(sp);
  }

  switch (r) {
    case Route::splitk:
      break;
    case Route::vec: {
      // vec reads the window in logical order like splitk (a full wrapped ring as two spans,
      // the older first), so the two give the same bits. A ragged head-major tail (its last
      // visible % 32 logical tokens) is copied into a whole 32-row block of scratch so the
      // producer never reads a plane row past len.
      const RowCopyParams pad = pad_copy(pp.rows, cfg.kind, visible, shape,
                                         ws.pad.data(), ws.pad.data() + ws.pad.size() / 2);
      if (pad.rows > 0) {
        LADDER_TRY(copy_rows(pad));
        pp.tail = copied_rows(pad);
        pp.tail_first = pad.first;
      }
      break;
    }
    case Route::staged: {
      const int padded_rows = sched.blocks * kBlockTokens;
      const std::size_t plane_halfs = static_cast<std::size_t>(padded_rows) * shape.n_kv_heads * shape.head_dim;
      const RowCopyParams sg = stage_copy(pp.rows, pp.rows.logical_start, visible, padded_rows, shape, ws.stage.data(),
                                          ws.stage.data() + plane_halfs);
      LADDER_TRY(copy_rows(sg));
      pp.rows = copied_rows(sg);
      break;
    }
    case Route::interleaved:
      pp.rows.order = RowOrder::contiguous;
      pp.cur_k = io.k;
      pp.cur_v = io.v;
      pp.store_k = plane.k();
      pp.store_v = plane.v();
      pp.store_slot = slot;
      break;
  }

  ReduceParams& rp = work.reduce;
  rp = ReduceParams{};
  rp.shape = shape;
  rp.groups = fast ? fast_schedule(visible).splits : sched.nwg;
  rp.partials = ws.partials.data();
  rp.out = io.out;
  return {};
}

Status run_route(Route r, HostPlane& plane, int position, int slot, const HeadShape& shape, const LayerIO& io,
                 Workspace& ws) {
  LayerWork work;
  LADDER_TRY(prepare_route(r, plane, position, slot, shape, io, ws, work));
  return run_layers(std::span<const LayerWork>(&work, 1));
}

}  // namespace ladder::cpu
