#include "ladder/geometry.hpp"

#include <fmt/format.h>

namespace ladder {

const char* layer_class_name(LayerClass c) { return c == LayerClass::swa ? "swa" : "nope"; }

Geometry Geometry::muse_glimmer() {
  Geometry g;
  g.name = "muse-glimmer";
  g.n_layers = 52;
  g.n_heads = 32;
  g.n_kv_heads = 2;
  g.head_dim = 128;
  g.window = 2048;
  g.max_context = 131072;
  g.ring_slack = 0;
  g.nope_period = 4;  // layer i is NoPE when i % 4 == 3: 39 SWA + 13 NoPE
  g.nope_phase = 3;
  g.weight_bytes_per_token = 16'756'681'056;
  return g;
}

namespace {
Status bad(std::string msg) { return make_error(ErrorCode::invalid_argument, std::move(msg)); }
}  // namespace

Status Geometry::validate() const {
  if (n_layers <= 0 || n_layers > limits::kMaxLayers)
    return bad(fmt::format("n_layers must be in 1..{} (got {})", limits::kMaxLayers, n_layers));
  if (n_heads <= 0 || n_heads > limits::kMaxHeads)
    return bad(fmt::format("n_heads must be in 1..{} (got {})", limits::kMaxHeads, n_heads));
  if (n_kv_heads <= 0 || n_kv_heads > n_heads)
    return bad(fmt::format("n_kv_heads must be in 1..n_heads ({}) (got {})", n_heads, n_kv_heads));
  if (n_heads % n_kv_heads != 0)
    return bad(fmt::format("n_heads ({}) must be a multiple of n_kv_heads ({}) for grouped-query attention",
                           n_heads, n_kv_heads));
  LADDER_TRY(check_head_dim(head_dim, "head_dim"));
  if (!kv_dtype_valid(kv_dtype))
    return bad(fmt::format("kv_dtype must be f16 or bf16 (got enum value {})", static_cast<int>(kv_dtype)));
  if (window < 0) return bad(fmt::format("window must be >= 0, 0 meaning unbounded (got {})", window));
  if (max_context <= 0 || max_context > limits::kMaxContext)
    return bad(fmt::format("max_context must be in 1..{} (got {})", limits::kMaxContext, max_context));
  if (ring_slack < 0) return bad(fmt::format("ring_slack must be >= 0 (got {})", ring_slack));
  // 64-bit sum: both terms are ints, so it cannot overflow here.
  const long long cap = static_cast<long long>(ring_rows(window, max_context)) + ring_slack;
  if (cap > limits::kMaxRows)
    return bad(fmt::format("ring capacity min(window, max_context) + ring_slack = {} exceeds {} rows", cap,
                           limits::kMaxRows));
  if (nope_period < 0 || (nope_period > 0 && (nope_phase < 0 || nope_phase >= nope_period)))
    return bad(fmt::format("NoPE pattern needs 0 <= phase < period (got period {}, phase {})", nope_period,
                           nope_phase));
  if (!layer_classes.empty() && static_cast<int>(layer_classes.size()) != n_layers)
    return bad(fmt::format("layer_classes lists {} layers but n_layers is {}", layer_classes.size(), n_layers));
  if (weight_bytes_per_token < 0) return bad("weight_bytes_per_token must be >= 0");
  return {};
}

Status check_head_dim(int head_dim, const char* what) {
  if (head_dim <= 0 || head_dim % limits::kHeadDimMultiple != 0 || head_dim > limits::kMaxHeadDim)
    return bad(fmt::format("{} must be a positive multiple of {} up to {} (got {})", what, limits::kHeadDimMultiple,
                           limits::kMaxHeadDim, head_dim));
  return {};
}

LayerClass Geometry::layer_class(int layer) const {
  if (!layer_classes.empty()) return layer_classes[static_cast<std::size_t>(layer)];
  if (nope_period > 0 && layer % nope_period == nope_phase) return LayerClass::nope;
  return LayerClass::swa;
}

int Geometry::visible(LayerClass c, int position) const {
  return visible_rows(position, c == LayerClass::swa ? window : 0);
}

int Geometry::count_layers(LayerClass c) const {
  int n = 0;
  for (int i = 0; i < n_layers; ++i) n += layer_class(i) == c ? 1 : 0;
  return n;
}

std::string Geometry::describe() const {
  return fmt::format("{}: {} layers ({} SWA + {} NoPE), {}:{} heads (GQA {}:1), head_dim {}, window {}, "
                     "max context {}, ring capacity {}, KV {}",
                     name, n_layers, count_layers(LayerClass::swa), count_layers(LayerClass::nope), n_heads,
                     n_kv_heads, n_heads / (n_kv_heads > 0 ? n_kv_heads : 1), head_dim, window, max_context,
                     ring_capacity(), kv_dtype_name(kv_dtype));
}

}  // namespace ladder
