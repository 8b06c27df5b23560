// Model geometry: how many layers of which class, the GQA head layout, window, max context.
// Muse Glimmer (the chapter's model) is the preset; any geometry that validates is supported
// on the CPU. The GPU kernels support head_dim limits::kGpuHeadDim only and say so
// (ErrorCode::unsupported). The KV element type is the geometry's kv_dtype (kv_dtype.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/errors.hpp"
#include "ladder/kv_dtype.hpp"

namespace ladder {

// Upper bounds a geometry or plane configuration must respect. They are limits, not tuned
// values: each keeps every derived count (rows, elements, bytes) far inside 64-bit arithmetic
// and every position inside int, so that an absurd request is refused by validate() with a
// message instead of overflowing into an empty allocation or a loop that runs for minutes.
namespace limits {
inline constexpr int kMaxLayers = 4096;          // 32x the deepest published decoder (128 layers)
inline constexpr int kMaxHeads = 4096;           // query heads; KV heads are at most this too
inline constexpr int kMaxHeadDim = 512;          // twice the largest head of published decoders (256)
// head_dim must be a multiple of this: the exact producers deal dims to lanes in chunks of 4
// (THE PRODUCER DAG, kernel_params.hpp).
inline constexpr int kHeadDimMultiple = 4;
// The one head_dim the CUDA kernels are written for: 32 lanes x 4 dims (src/cuda/common.cuh).
inline constexpr int kGpuHeadDim = 128;
inline constexpr int kMaxContext = 1 << 30;      // positions 0 .. 2^30-1; position + 1 stays an int
inline constexpr int kMaxRows = 1 << 30;         // rows of one plane (ring capacity incl. slack)
}  // namespace limits

// SWA layers keep a ring plane (token-major); NoPE (global) layers keep a growing plane
// (head-major). See plane.hpp.
enum class LayerClass : std::uint8_t { swa, nope };
const char* layer_class_name(LayerClass c);

// A plain value: const use from any number of threads (docs/threads.md).
struct Geometry {
  std::string name = "custom";
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // KV heads; n_heads % n_kv_heads == 0 (GQA)
  int head_dim = 0;
  // SWA window in tokens; 0 means unbounded (visible = position + 1). A window at or above
  // max_context is accepted and behaves as unbounded: no more than max_context tokens ever
  // exist, so the ring is sized by min(window, max_context) (see ring_capacity()).
  int window = 0;
  int max_context = 0;  // positions 0 .. max_context-1 may be appended
  // Extra ring rows beyond the window (capacity = window + ring_slack). Slack > 0 makes
  // partially wrapped rings occur, which the vec predicate must refuse (R1).
  int ring_slack = 0;
  // Layer i is NoPE when (i % nope_period) == nope_phase; nope_period 0 means no NoPE layers.
  // An explicit per-layer list overrides the pattern when non-empty.
  int nope_period = 0;
  int nope_phase = 0;
  std::vector<LayerClass> layer_classes;
  // Weight bytes streamed per decoded token; used only by the budget arithmetic (C3).
  std::int64_t weight_bytes_per_token = 0;
  // The element type of every KV plane (kv_dtype.hpp); f16 unless a caller asks for bf16.
  KvDtype kv_dtype = KvDtype::f16;

  static Geometry muse_glimmer();

  // Refuses (invalid_argument) any field outside its range, including the upper bounds in
  // `limits`; a geometry that validates has every derived count representable.
  Status validate() const;
  LayerClass layer_class(int layer) const;
  int heads_per_kv() const { return n_heads / n_kv_heads; }
  int kv_head_of(int head) const { return head / heads_per_kv(); }  // M1
  // 1/sqrt(head_dim): the softmax scale every route uses.
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
  double scale_f64() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  // Rows of an SWA layer's ring: the rows that can be in the window at once, plus the slack.
  // Bounded by max_context, so `window 131072, max_context 2048` holds 2048 rows, not 131072.
  int ring_capacity() const { return ring_rows(window, max_context) + ring_slack; }
  // Rows a ring keeps in its window: min(window, max_context), window 0 meaning max_context.
  static int ring_rows(int window, int max_context) {
    return window > 0 && window < max_context ? window : max_context;
  }
  // Tokens of KV a layer at `position` attends to (K3).
  int visible(LayerClass c, int position) const;
  // Floats of one layer's activations in a TokenIO: q and out [n_heads][head_dim], k and v
  // [n_kv_heads][head_dim].
  std::size_t q_floats_per_layer() const { return static_cast<std::size_t>(n_heads) * head_dim; }
  std::size_t kv_floats_per_layer() const { return static_cast<std::size_t>(n_kv_heads) * head_dim; }
  // Bytes of K and V per token per layer: 2 planes x n_kv_heads x head_dim x element bytes.
  std::int64_t kv_bytes_per_token_layer() const {
    return std::int64_t{2} * n_kv_heads * head_dim * kv_dtype_bytes(kv_dtype);
  }
  int count_layers(LayerClass c) const;
  std::string describe() const;
};

// The head_dim rule of every geometry, plane and route (invalid_argument naming `what`):
// 1..limits::kMaxHeadDim and a multiple of limits::kHeadDimMultiple.
Status check_head_dim(int head_dim, const char* what);

// K3: visible = min(position + 1, window) (window 0: position + 1); the window's first token.
inline int visible_rows(int position, int window) {
  const int upto = position + 1;
  return window > 0 && window < upto ? window : upto;
}
inline int logical_start(int position, int window) { return position + 1 - visible_rows(position, window); }

}  // namespace ladder
