// A user's program against the installed package (public headers only): a CPU engine on a small
// geometry with a sliding-window (ring) layer and a global (growing) layer decodes tokens, and
// every output is compared with attention computed here directly in f64. Exit 0 and "PASS" when
// every check holds; the first failure is printed and the exit code is 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ladder/engine.hpp"
#include "ladder/version.hpp"

namespace {

// Layer 0 is a ring of kWindow rows, layer 1 grows (nope_period 2, phase 1). kTokens is
// 2.5 windows, so the ring wraps twice.
constexpr int kHeads = 4;
constexpr int kKvHeads = 2;
constexpr int kHeadDim = 16;
constexpr int kWindow = 8;
constexpr int kTokens = 20;
constexpr int kMaxContext = 64;
// K and V are integers / 256 in [-2, 2]: exact in f16, so the planes' f16 storage loses nothing
// and the f64 computation below needs no rounding model. q is any f32 (it is read in f32).
constexpr int kKvSteps = 512;
constexpr double kKvUnit = 1.0 / 256.0;
// Each output is a softmax-weighted mean of at most kTokens rows of 16 products, computed in
// f32: its error is a few f32 ulps (~1e-6 of the largest |output|). 1e-4 leaves a wide margin
// and still fails for any wrong row, head mapping, scale or window (errors of order 1e-2 and up).
constexpr double kRelativeBound = 1e-4;

int fail(const char* what) {
  std::printf("FAIL: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  std::printf("ladder %s\n", ladder::kVersion);
  if (std::strcmp(ladder::kVersion, LADDER_PACKAGE_VERSION) != 0) {
    std::printf("FAIL: version.hpp says %s, the CMake package %s\n", ladder::kVersion, LADDER_PACKAGE_VERSION);
    return 1;
  }

  ladder::Geometry g;
  g.name = "package-test";
  g.n_layers = 2;
  g.n_heads = kHeads;
  g.n_kv_heads = kKvHeads;
  g.head_dim = kHeadDim;
  g.window = kWindow;
  g.max_context = kMaxContext;
  g.nope_period = 2;
  g.nope_phase = 1;
  if (!g.validate().ok()) return fail("geometry refused");

  ladder::EngineOptions opt;  // the CPU device
  auto created = ladder::Engine::create(g, opt);
  if (!created) {
    std::printf("FAIL: Engine::create: %s\n", created.status().to_string().c_str());
    return 1;
  }
  ladder::Engine& engine = **created;

  const std::size_t q_size = std::size_t{2} * kHeads * kHeadDim;
  const std::size_t kv_size = std::size_t{2} * kKvHeads * kHeadDim;
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> kv_step(-kKvSteps, kKvSteps);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Every token's K and V, kept for the f64 computation: [token][layer][kv_head][dim].
  std::vector<std::vector<float>> all_k, all_v;
  std::vector<float> q(q_size), out(q_size);
  double worst = 0.0;

  for (int pos = 0; pos < kTokens; ++pos) {
    std::vector<float> k(kv_size), v(kv_size);
    for (float& x : q) x = normal(rng);
    for (float& x : k) x = static_cast<float>(kv_step(rng) * kKvUnit);
    for (float& x : v) x = static_cast<float>(kv_step(rng) * kKvUnit);
    all_k.push_back(k);
    all_v.push_back(v);
    // Poisoned: an output the engine does not write fails the comparison.
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    const ladder::Status st = engine.encode_token(pos, {q.data(), k.data(), v.data(), out.data()});
    if (!st.ok()) {
      std::printf("FAIL: encode_token(%d): %s\n", pos, st.to_string().c_str());
      return 1;
    }
    for (int layer = 0; layer < g.n_layers; ++layer) {
      const bool ring = g.layer_class(layer) == ladder::LayerClass::swa;
      const int first = ring ? std::max(0, pos + 1 - kWindow) : 0;
      for (int h = 0; h < kHeads; ++h) {
        const int kvh = h / (kHeads / kKvHeads);
        const float* qh = &q[(static_cast<std::size_t>(layer) * kHeads + h) * kHeadDim];
        const std::size_t kv_at = (static_cast<std::size_t>(layer) * kKvHeads + kvh) * kHeadDim;
        std::vector<double> score;
        double top = -std::numeric_limits<double>::infinity();
        for (int t = first; t <= pos; ++t) {
          double s = 0.0;
          for (int d = 0; d < kHeadDim; ++d) s += double(qh[d]) * double(all_k[t][kv_at + d]);
          score.push_back(s / std::sqrt(double(kHeadDim)));
          top = std::max(top, score.back());
        }
        double sum = 0.0;
        for (double& s : score) sum += (s = std::exp(s - top));
        std::vector<double> ref(kHeadDim, 0.0);
        double ref_max = 0.0;
        for (int d = 0; d < kHeadDim; ++d) {
          for (int t = first; t <= pos; ++t) ref[d] += score[t - first] / sum * double(all_v[t][kv_at + d]);
          ref_max = std::max(ref_max, std::abs(ref[d]));
        }
        const float* oh = &out[(static_cast<std::size_t>(layer) * kHeads + h) * kHeadDim];
        for (int d = 0; d < kHeadDim; ++d) {
          const double err = std::abs(double(oh[d]) - ref[d]) / ref_max;
          if (!(err <= kRelativeBound)) {
            std::printf("FAIL: token %d layer %d head %d dim %d: %.9g vs f64 %.9g (relative %.3g, bound %.1g)\n", pos,
                        layer, h, d, double(oh[d]), ref[d], err, kRelativeBound);
            return 1;
          }
          worst = std::max(worst, err);
        }
      }
    }
  }

  // A repeated position is refused with an error value and changes nothing.
  const ladder::PlaneState before = engine.plane_state(0);
  if (engine.encode_token(kTokens - 1, {q.data(), all_k.back().data(), all_v.back().data(), out.data()}).ok()) {
    return fail("a repeated position was accepted");
  }
  const ladder::PlaneState after = engine.plane_state(0);
  if (!(before == after)) return fail("a refused position changed the ring's state");

  std::printf("%d tokens x %d layers x %d heads vs f64: max relative error %.3g (bound %.1g)\nPASS\n", kTokens,
              g.n_layers, kHeads, worst, kRelativeBound);
  return 0;
}
