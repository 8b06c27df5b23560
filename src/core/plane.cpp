#include "ladder/plane.hpp"

#include <algorithm>
#include <new>
#include <utility>
#include <fmt/format.h>

#include "ladder/fault_injection.hpp"
#include "ladder/heuristics.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/reference.hpp"

namespace ladder {

namespace {
Status bad(std::string msg) { return make_error(ErrorCode::invalid_argument, std::move(msg)); }
}  // namespace

const char* plane_kind_name(PlaneKind k) { return k == PlaneKind::ring ? "ring" : "growing"; }

PlaneStrides plane_strides(PlaneKind kind, int capacity, int n_kv_heads, int head_dim) {
  PlaneStrides s;
  if (kind == PlaneKind::ring) {  // token-major
    s.row_stride = static_cast<std::int64_t>(n_kv_heads) * head_dim;
    s.head_stride = head_dim;
  } else {  // head-major
    s.row_stride = head_dim;
    s.head_stride = static_cast<std::int64_t>(capacity) * head_dim;
  }
  return s;
}

Status PlaneConfig::validate() const {
  if (n_kv_heads <= 0 || n_kv_heads > limits::kMaxHeads)
    return bad(fmt::format("plane n_kv_heads must be in 1..{} (got {})", limits::kMaxHeads, n_kv_heads));
  // Only the size limit here: the multiple-of-kHeadDimMultiple rule is the routes' (check_head_dim),
  // so a plane of any head_dim can hold rows and refuse attention with a message.
  if (head_dim <= 0 || head_dim > limits::kMaxHeadDim)
    return bad(fmt::format("plane head_dim must be in 1..{} (got {})", limits::kMaxHeadDim, head_dim));
  if (!kv_dtype_valid(kv_dtype))
    return bad(fmt::format("plane kv_dtype must be f16 or bf16 (got enum value {})", static_cast<int>(kv_dtype)));
  if (max_context <= 0 || max_context > limits::kMaxContext)
    return bad(fmt::format("plane max_context must be in 1..{} (got {})", limits::kMaxContext, max_context));
  if (capacity <= 0 || capacity > limits::kMaxRows)
    return bad(fmt::format("plane capacity must be in 1..{} (got {})", limits::kMaxRows, capacity));
  if (kind == PlaneKind::ring) {
    if (window < 0) return bad(fmt::format("ring window must be >= 0 (got {})", window));
    // No more than max_context tokens ever exist, so a window at or past it keeps them all.
    const int keep = Geometry::ring_rows(window, max_context);
    if (capacity < keep)
      return bad(fmt::format("ring capacity {} is smaller than its window (it keeps min(window {}, max_context {}) "
                             "= {} rows): in-window rows would be overwritten",
                             capacity, window, max_context, keep));
  } else if (window != 0) {
    return bad("a growing plane has no window (window must be 0)");
  }
  // Both arrays at the largest size the plane can reach must be countable in bytes.
  const Result<std::int64_t> bytes = array_bytes(max_rows());
  if (!bytes) return bytes.status();
  return {};
}

Result<std::int64_t> PlaneConfig::array_bytes(int rows) const {
  std::int64_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(rows), static_cast<std::int64_t>(n_kv_heads), &elements) ||
      __builtin_mul_overflow(elements, static_cast<std::int64_t>(head_dim), &elements) ||
      __builtin_mul_overflow(elements, static_cast<std::int64_t>(kv_dtype_bytes(kv_dtype)), &bytes) ||
      rows < 0 || n_kv_heads < 0 || head_dim < 0)
    return bad(fmt::format("a plane of {} rows x {} KV heads x {} dims does not fit in 64-bit byte counts", rows,
                           n_kv_heads, head_dim));
  return bytes;
}

PlaneConfig PlaneConfig::for_layer(const Geometry& g, LayerClass c, int initial_growing_capacity) {
  PlaneConfig p;
  p.n_kv_heads = g.n_kv_heads;
  p.head_dim = g.head_dim;
  p.max_context = g.max_context;
  p.kv_dtype = g.kv_dtype;
  if (c == LayerClass::swa) {
    p.kind = PlaneKind::ring;
    p.window = g.window;
    p.capacity = g.ring_capacity();
  } else {
    p.kind = PlaneKind::growing;
    p.window = 0;
    const int initial = initial_growing_capacity > 0 ? initial_growing_capacity : kDefaultGrowingCapacity;
    p.capacity = std::min(initial, g.max_context);
  }
  return p;
}

Result<AppendPlan> plan_append(const PlaneConfig& cfg, const PlaneState& st, int position, int rows) {
  if (position < 0) return bad(fmt::format("position must be >= 0 (got {})", position));
  if (rows < 1) return bad(fmt::format("an append plans room for rows >= 1 (got {})", rows));
  if (position >= cfg.max_context)
    return make_error(ErrorCode::out_of_range,
                      fmt::format("position {} is past the max context ({} positions: 0..{})", position,
                                  cfg.max_context, cfg.max_context - 1));
  if (position != st.next_position)
    return make_error(ErrorCode::out_of_order,
                      fmt::format("append of position {} refused: the plane expects position {} next "
                                  "(positions arrive in order, each exactly once)",
                                  position, st.next_position));
  AppendPlan plan;
  plan.next = st;
  if (cfg.kind == PlaneKind::ring) {
    const int keep = cfg.window > 0 ? cfg.window : st.capacity;
    if (st.len == keep) {
      if (cfg.window == 0)
        return make_error(ErrorCode::out_of_range, "ring with an unbounded window is full");
      // Evict the oldest row: it is outside the window now, and capacity >= window means the
      // slot the new token lands in never holds an in-window row.
      plan.next.origin_logical += 1;
      plan.next.origin_physical = (st.origin_physical + 1) % st.capacity;
    } else {
      plan.next.len += 1;
    }
  } else {
    const long long need = static_cast<long long>(st.len) + rows;
    if (need > st.capacity) {
      long long grown = st.capacity;
      while (grown < need && grown < cfg.max_context) grown = std::min(grown * 2, static_cast<long long>(cfg.max_context));
      if (grown <= st.capacity || grown < need)
        return make_error(ErrorCode::out_of_range,
                          fmt::format("growing plane cannot hold {} more rows (capacity {} of at most {}, len {})", rows,
                                      st.capacity, cfg.max_context, st.len));
      plan.grow_to = static_cast<int>(grown);
      plan.next.capacity = static_cast<int>(grown);
    }
    plan.next.len += 1;
  }
  plan.next.next_position = position + 1;
  plan.slot = plan.next.physical(position);
  return plan;
}

Result<PlaneState> state_after(const PlaneConfig& cfg, int position) {
  LADDER_TRY(cfg.validate());
  if (position < 0) return bad(fmt::format("position must be >= 0 (got {})", position));
  if (position >= cfg.max_context)
    return make_error(ErrorCode::out_of_range, fmt::format("position {} is past the max context ({} positions)",
                                                           position, cfg.max_context));
  const int appended = position + 1;  // <= max_context <= 2^30: no overflow
  PlaneState st;
  st.capacity = cfg.capacity;
  st.next_position = appended;
  if (cfg.kind == PlaneKind::ring) {
    // len grows to the rows the window keeps, then every append evicts one row and advances
    // both origins by one (the physical one modulo the capacity).
    const int keep = cfg.window > 0 ? cfg.window : cfg.capacity;
    st.len = std::min(appended, keep);
    st.origin_logical = appended - st.len;
    st.origin_physical = st.origin_logical % cfg.capacity;
  } else {
    // The capacity doubles (capped at max_context) each time an append finds the plane full.
    long long cap = cfg.capacity;
    while (cap < appended) cap = std::min(cap * 2, static_cast<long long>(cfg.max_context));
    st.capacity = static_cast<int>(cap);
    st.len = appended;
  }
  return st;
}

Result<HostPlane> HostPlane::create(const PlaneConfig& cfg) {
  LADDER_TRY(cfg.validate());
  PlaneState st;
  st.capacity = cfg.capacity;
  HostPlane p(cfg, st);
  Result<std::int64_t> bytes = cfg.array_bytes(cfg.capacity);
  if (!bytes) return bytes.status();
  const std::size_t n = static_cast<std::size_t>(*bytes) / sizeof(KvWord);
  // Unwritten rows hold a NaN of the plane's dtype, so a kernel that reads a row nobody stored
  // poisons its output instead of silently using stale data.
  const KvWord poison = kv_quiet_nan(cfg.kv_dtype);
  try {
    if (detail::injected_allocation_failure()) throw std::bad_alloc();
    p.k_.assign(n, poison);
    p.v_.assign(n, poison);
  } catch (const std::exception&) {  // bad_alloc, or length_error past the vector's max_size
    return make_error(ErrorCode::out_of_memory,
                      fmt::format("cannot allocate a plane of {} rows ({} bytes each for K and V)", cfg.capacity,
                                  *bytes));
  }
  return p;
}

void HostPlane::grown_rows(int new_capacity, PlaneRows& nk, PlaneRows& nv) const {
  const KvWord poison = kv_quiet_nan(cfg_.kv_dtype);
  const std::size_t hd = static_cast<std::size_t>(cfg_.head_dim);
  const std::size_t old_cap = static_cast<std::size_t>(state_.capacity);
  const std::size_t new_cap = static_cast<std::size_t>(new_capacity);
  nk.assign(new_cap * cfg_.n_kv_heads * hd, poison);
  nv.assign(nk.size(), poison);
  for (int h = 0; h < cfg_.n_kv_heads; ++h) {
    std::copy_n(k_.begin() + h * old_cap * hd, old_cap * hd, nk.begin() + h * new_cap * hd);
    std::copy_n(v_.begin() + h * old_cap * hd, old_cap * hd, nv.begin() + h * new_cap * hd);
  }
}

Result<PreparedAppend> HostPlane::prepare_append(int position, int rows) const {
  Result<AppendPlan> plan = plan_append(cfg_, state_, position, rows);
  if (!plan) return plan.status();
  PreparedAppend p;
  p.plan = *plan;
  if (p.plan.grow_to > 0) {
    try {
      if (detail::injected_allocation_failure()) throw std::bad_alloc();
      grown_rows(p.plan.grow_to, p.k, p.v);
    } catch (const std::exception&) {  // bad_alloc, or length_error past the vector's max_size
      return make_error(ErrorCode::out_of_memory, fmt::format("cannot grow plane to {} rows", p.plan.grow_to));
    }
  }
  return p;
}

int HostPlane::commit_append(PreparedAppend&& p) noexcept {
  if (p.plan.grow_to > 0) {
    k_.swap(p.k);
    v_.swap(p.v);
  }
  state_ = p.plan.next;
  return p.plan.slot;
}

Result<int> HostPlane::append(int position) {
  Result<PreparedAppend> p = prepare_append(position);
  if (!p) return p.status();
  return commit_append(std::move(*p));
}

void HostPlane::write_row(int slot, const float* k, const float* v) {
  const PlaneStrides s = strides();
  for (int h = 0; h < cfg_.n_kv_heads; ++h) {
    const std::int64_t base = s.offset(slot, h);
    for (int d = 0; d < cfg_.head_dim; ++d) {
      k_[static_cast<std::size_t>(base + d)] = kv_encode(k[h * cfg_.head_dim + d], cfg_.kv_dtype);
      v_[static_cast<std::size_t>(base + d)] = kv_encode(v[h * cfg_.head_dim + d], cfg_.kv_dtype);
    }
  }
  count_inputs(nullptr, 0, k, v);
}

void HostPlane::count_inputs(const float* q, std::size_t q_count, const float* k, const float* v) {
  const std::size_t row = static_cast<std::size_t>(cfg_.n_kv_heads) * cfg_.head_dim;
  if (q != nullptr) count_range(q, q_count, range_, cfg_.kv_dtype);
  count_range(k, row, range_, cfg_.kv_dtype);
  count_range(v, row, range_, cfg_.kv_dtype);
}

Result<int> HostPlane::append_row(int position, const float* k, const float* v) {
  Result<int> slot = append(position);
  if (slot) write_row(*slot, k, v);
  return slot;
}

}  // namespace ladder
