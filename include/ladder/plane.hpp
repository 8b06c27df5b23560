// KV planes (K1–K4). A plane is two arrays of KvWord (K and V) holding elements of the plane's
// kv_dtype (kv_dtype.hpp: f16 or bf16) plus the explicit-origin metadata
// below. The metadata and its append rule are shared by the CPU and GPU planes; only where
// the rows live differs.
//
//   SWA ring (token-major): row r holds all KV heads of one token:
//       element (row, kv_head, d) at  row * n_kv_heads * head_dim + kv_head * head_dim + d
//   NoPE growing plane (head-major): each KV head's rows are contiguous:
//       element (row, kv_head, d) at  kv_head * capacity * head_dim + row * head_dim + d
#pragma once

#include <cstdint>
#include <vector>

#include "ladder/errors.hpp"
#include "ladder/geometry.hpp"
#include "ladder/hd.hpp"
#include "ladder/kv_dtype.hpp"
#include "ladder/nonfinite.hpp"
#include "ladder/plane_rows.hpp"

namespace ladder {

enum class PlaneKind : std::uint8_t { ring, growing };
const char* plane_kind_name(PlaneKind k);

// Explicit origins (Ch 15): rows held are logical tokens [origin_logical, origin_logical+len),
// and logical origin_logical lives at physical slot origin_physical.
struct PlaneState {
  int capacity = 0;
  int len = 0;
  int origin_logical = 0;
  int origin_physical = 0;
  int next_position = 0;  // the only position the next append accepts

  // K1: the one logical -> physical accessor. Every kernel, CPU and GPU, addresses through it.
  LADDER_HD int physical(int logical) const {
    return (origin_physical + (logical - origin_logical)) % capacity;
  }
  // Partially wrapped: the held rows are not one contiguous physical span.
  LADDER_HD bool partially_wrapped() const { return origin_physical != 0 && len != capacity; }
  bool operator==(const PlaneState&) const = default;
};

// Element strides of a plane: offset(row, kv_head, d) = row*row_stride + kv_head*head_stride + d.
struct PlaneStrides {
  std::int64_t row_stride = 0;
  std::int64_t head_stride = 0;
  LADDER_HD std::int64_t offset(int row, int kv_head) const {
    return static_cast<std::int64_t>(row) * row_stride + static_cast<std::int64_t>(kv_head) * head_stride;
  }
};
PlaneStrides plane_strides(PlaneKind kind, int capacity, int n_kv_heads, int head_dim);

// What one append will do, computed without touching the plane (K4: a refused append leaves
// the plane untouched because nothing is mutated until the plan is valid).
struct AppendPlan {
  PlaneState next;       // the state after the append
  int slot = 0;          // physical row the new token is written to
  int grow_to = 0;       // growing plane: new capacity if it must grow first, else 0
};

struct PlaneConfig {
  PlaneKind kind = PlaneKind::ring;
  int n_kv_heads = 0;
  int head_dim = 0;
  int window = 0;           // ring: tokens kept in window (0 = unbounded)
  // ring: fixed capacity >= min(window, max_context) (window 0: >= max_context); growing:
  // initial capacity (the plane grows by doubling, capped at max_context).
  int capacity = 0;
  int max_context = 0;      // positions >= max_context are refused
  KvDtype kv_dtype = KvDtype::f16;  // what the plane's words mean (kv_dtype.hpp)

  // Refuses (invalid_argument) fields outside their ranges (the upper bounds of
  // geometry.hpp's `limits`) and a plane whose largest size in bytes does not fit in 64 bits.
  Status validate() const;
  // Bytes of one of the plane's two arrays (K or V) at `rows` rows, with checked
  // arithmetic: invalid_argument when the product overflows 64 bits.
  Result<std::int64_t> array_bytes(int rows) const;
  // The most rows the plane ever holds: the ring's capacity; a growing plane's initial capacity
  // or max_context, whichever is larger.
  int max_rows() const { return kind == PlaneKind::ring || capacity > max_context ? capacity : max_context; }
  // The plane a geometry gives a layer of class c.
  static PlaneConfig for_layer(const Geometry& g, LayerClass c, int initial_growing_capacity = 0);
};

// K1/K2/K4 append rule. Ring: len grows to the window, then the oldest row is evicted
// (origin advances) — an in-window row is never overwritten because capacity >= window.
// Growing: never wraps; doubles capacity (capped at max_context) when full.
// rows > 1 plans this append with room for rows - 1 more after it (a prompt's rows): a growing
// plane that would grow during them grows here instead, to the capacity the last of them would
// have reached by the same doubling, so the next rows - 1 appends never grow; every state after
// the last of them equals the one-by-one result (room past the max context that the plane would
// have to grow for is refused: out_of_range). Rings are unaffected.
Result<AppendPlan> plan_append(const PlaneConfig& cfg, const PlaneState& state, int position, int rows = 1);

// The state a fresh plane reaches after appending positions 0..position, in closed form (the
// same state as `position + 1` calls of plan_append, in O(log) instead of O(position), so a
// trace at position 2^30 - 1 answers at once). out_of_range past the max context; the config
// must validate.
Result<PlaneState> state_after(const PlaneConfig& cfg, int position);

// An append planned and, when a growing plane must grow, its grown rows already allocated (the
// old rows copied in): committing it cannot fail. An engine prepares every layer's append
// before it commits any, so running out of memory while a plane grows leaves every plane as it
// was. The cost is holding every growing layer's new rows at once at the token where they grow.
struct PreparedAppend {
  AppendPlan plan;
  PlaneRows k, v;  // the grown rows; empty when the plane does not grow
};

// A plane in host memory: the CPU device's storage and the tests' reference storage.
// Threads (docs/threads.md): const members may be used from several threads at once; append,
// prepare/commit, write_row and attend_layer on the plane need it to themselves. plan_append
// and state_after are pure functions.
class HostPlane {
 public:
  static Result<HostPlane> create(const PlaneConfig& cfg);

  const PlaneConfig& config() const { return cfg_; }
  const PlaneState& state() const { return state_; }
  PlaneStrides strides() const { return plane_strides(cfg_.kind, state_.capacity, cfg_.n_kv_heads, cfg_.head_dim); }

  // Metadata half of an append; growth (with data preserved) happens here. Returns the slot.
  // The row itself is written by a store kernel (or by write_row below).
  Result<int> append(int position);
  // The same in two steps: prepare (may fail: a refused position, out of memory; the plane is
  // untouched), then commit (cannot fail). `p` must come from this plane's prepare_append with
  // no other append in between. Returns the slot.
  // rows: plan_append's room for a prompt's rows (growth for all of them happens here).
  Result<PreparedAppend> prepare_append(int position, int rows = 1) const;
  int commit_append(PreparedAppend&& p) noexcept;
  // Convenience: append and store f32 K/V for all KV heads ([n_kv_heads][head_dim] each).
  Result<int> append_row(int position, const float* k, const float* v);
  // Write f32 K/V rows of one token into a physical slot (range rule, then rounded to the
  // plane's dtype; counted in range_stats).
  void write_row(int slot, const float* k, const float* v);

  // N1's counters: what the range rule (nonfinite.hpp) did to the values read by the calls on
  // this plane. count_inputs adds one call's q ([q_count] values, nullptr for none) and one
  // token's k and v rows ([n_kv_heads][head_dim] each); attend_layer calls it.
  const RangeStats& range_stats() const { return range_; }
  void count_inputs(const float* q, std::size_t q_count, const float* k, const float* v);

  KvWord* k() { return k_.data(); }
  KvWord* v() { return v_.data(); }
  const KvWord* k() const { return k_.data(); }
  const KvWord* v() const { return v_.data(); }
  std::size_t elements() const { return k_.size(); }

 private:
  HostPlane(PlaneConfig cfg, PlaneState st) : cfg_(cfg), state_(st) {}
  // The rows relaid out for a larger capacity (head-major: each KV head's rows move to their
  // new, longer span), unwritten rows poisoned. Throws std::bad_alloc.
  void grown_rows(int new_capacity, PlaneRows& k, PlaneRows& v) const;
  PlaneConfig cfg_;
  PlaneState state_;
  PlaneRows k_, v_;
  RangeStats range_;
};

}  // namespace ladder
