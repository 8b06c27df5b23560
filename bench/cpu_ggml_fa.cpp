// llama.cpp's CPU flash attention (ggml_flash_attn_ext, f16 K/V) on ladder's decode shapes, for
// bench/cpu_peers.py. Built by bench/cpu_peers.sh against the ggml sources of the
// llama-cpp-python source package (fetched at run time; none of them are in this repository).
//
// Shapes: batch 1, one query token, 32 query heads over 2 KV heads, head_dim 128, scale
// 1/sqrt(128), no mask; q f32 [128, 1, 32, 1], K and V f16 [128, L, 2, 1]. Inputs uniform in
// [-1, 1). First the output is checked against an f64 reference on the same f16 rows (relative
// error printed with whether it is under P3's 2e-3: ggml's CPU kernel accumulates V in f16 when
// V is f16, which costs it ~1e-2 here; reported, not fatal); then timed: K/V sets rotated so they total >= 4x the last-level
// cache (as `ladder bench` does), one graph computation per call, median of --reps calls.
// Prints one JSON object per depth on stdout.
//
// usage: cpu_ggml_fa --threads N --depths 2048,8192 --reps R
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "ggml-cpu.h"
#include "ggml.h"

namespace {

constexpr int kHeads = 32;
constexpr int kKvHeads = 2;
constexpr int kHeadDim = 128;
constexpr double kBound = 2e-3;
constexpr double kRotateFactor = 4.0;
constexpr int kMaxSets = 64;
constexpr long kFallbackLlc = 64L << 20;
constexpr int kWarmups = 2;

struct Args {
  int threads = 1;
  std::vector<int> depths = {2048, 8192, 32768, 131072};
  int reps = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--threads") {
      a.threads = std::atoi(v.c_str());
    } else if (k == "--reps") {
      a.reps = std::atoi(v.c_str());
    } else if (k == "--depths") {
      a.depths.clear();
      std::size_t s = 0;
      while (s <= v.size()) {
        const std::size_t c = v.find(',', s);
        a.depths.push_back(std::atoi(v.substr(s, c - s).c_str()));
        if (c == std::string::npos) break;
        s = c + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

long llc_bytes() {
  const long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return s > 0 ? s : kFallbackLlc;
}

struct Set {
  ggml_tensor* k = nullptr;
  ggml_tensor* v = nullptr;
  ggml_tensor* out = nullptr;
  ggml_cgraph* graph = nullptr;
};

// f64 reference for one set: out[h][d] = softmax(q_h . k / sqrt(D)) . v over the f16 rows.
double check(const std::vector<float>& q, const Set& s, int depth) {
  const auto* kh = static_cast<const ggml_fp16_t*>(s.k->data);
  const auto* vh = static_cast<const ggml_fp16_t*>(s.v->data);
  const auto* out = static_cast<const float*>(s.out->data);  // [D, heads, 1, 1]
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  double num = 0.0, den = 0.0;
  std::vector<double> w(static_cast<std::size_t>(depth));
  for (int h = 0; h < kHeads; ++h) {
    const int g = h / (kHeads / kKvHeads);
    double m = -INFINITY;
    for (int t = 0; t < depth; ++t) {
      double dot = 0.0;
      const ggml_fp16_t* kr = kh + (static_cast<std::size_t>(g) * depth + t) * kHeadDim;
      for (int d = 0; d < kHeadDim; ++d) dot += static_cast<double>(q[h * kHeadDim + d]) * ggml_fp16_to_fp32(kr[d]);
      w[t] = dot * scale;
      m = std::max(m, w[t]);
    }
    double sum = 0.0;
    for (int t = 0; t < depth; ++t) sum += (w[t] = std::exp(w[t] - m));
    for (int d = 0; d < kHeadDim; ++d) {
      double acc = 0.0;
      for (int t = 0; t < depth; ++t)
        acc += w[t] * ggml_fp16_to_fp32(vh[(static_cast<std::size_t>(g) * depth + t) * kHeadDim + d]);
      const double ref = acc / sum;
      const double diff = out[h * kHeadDim + d] - ref;
      num += diff * diff;
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  ggml_cpu_init();
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int depth : a.depths) {
    const std::size_t kv_elems = static_cast<std::size_t>(kHeadDim) * depth * kKvHeads;
    const long set_bytes = static_cast<long>(2 * kv_elems * sizeof(ggml_fp16_t));
    const int sets = std::clamp(static_cast<int>(std::ceil(kRotateFactor * llc_bytes() / set_bytes)), 1, kMaxSets);
    // Tensors, outputs and graphs live in one context (work buffers are separate).
    constexpr std::size_t kSlack = std::size_t{1} << 20;
    const std::size_t mem = static_cast<std::size_t>(sets) * (2 * kv_elems * sizeof(ggml_fp16_t) +
                                                               ggml_graph_overhead() + kSlack) +
                            kSlack;
    ggml_init_params ip{mem, nullptr, false};
    ggml_context* ctx = ggml_init(ip);
    if (ctx == nullptr) {
      std::fprintf(stderr, "ggml_init failed for %zu bytes\n", mem);
      return 1;
    }
    ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kHeadDim, 1, kHeads, 1);
    std::vector<float> qv(static_cast<std::size_t>(kHeadDim) * kHeads);
    for (float& x : qv) x = u(gen);
    std::memcpy(q->data, qv.data(), qv.size() * sizeof(float));
    std::vector<Set> all(static_cast<std::size_t>(sets));
    for (Set& s : all) {
      s.k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kHeadDim, depth, kKvHeads, 1);
      s.v = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kHeadDim, depth, kKvHeads, 1);
      for (ggml_tensor* t : {s.k, s.v}) {
        auto* h = static_cast<ggml_fp16_t*>(t->data);
        for (std::size_t i = 0; i < kv_elems; ++i) h[i] = ggml_fp32_to_fp16(u(gen));
      }
      s.out = ggml_flash_attn_ext(ctx, q, s.k, s.v, nullptr, 1.0f / std::sqrt(static_cast<float>(kHeadDim)), 0.0f, 0.0f);
      ggml_flash_attn_ext_set_prec(s.out, GGML_PREC_F32);
      s.graph = ggml_new_graph(ctx);
      ggml_build_forward_expand(s.graph, s.out);
    }
    // One persistent thread pool, as llama.cpp keeps one; one work buffer per graph.
    ggml_threadpool_params tpp = ggml_threadpool_params_default(a.threads);
    ggml_threadpool* pool = ggml_threadpool_new(&tpp);
    std::vector<ggml_cplan> plans;
    std::vector<std::vector<std::uint8_t>> work_bufs;
    for (Set& s : all) {
      plans.push_back(ggml_graph_plan(s.graph, a.threads, pool));
      work_bufs.emplace_back(plans.back().work_size);
      plans.back().work_data = work_bufs.back().data();
    }
    // Poison the first output, compute, check.
    std::fill_n(static_cast<float*>(all[0].out->data), kHeadDim * kHeads, NAN);
    if (ggml_graph_compute(all[0].graph, &plans[0]) != GGML_STATUS_SUCCESS) {
      std::fprintf(stderr, "ggml graph compute failed\n");
      return 1;
    }
    const double err = check(qv, all[0], depth);
    std::vector<double> us;
    for (int r = 0; r < kWarmups + a.reps; ++r) {
      const std::size_t i = static_cast<std::size_t>(r % sets);
      const auto t0 = std::chrono::steady_clock::now();
      ggml_graph_compute(all[i].graph, &plans[i]);
      const auto t1 = std::chrono::steady_clock::now();
      if (r >= kWarmups) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::printf("{\"peer\": \"llama.cpp flash_attn_ext (f16 KV)\", \"threads\": %d, \"depth\": %d, \"median_us\": %.2f, "
                "\"min_us\": %.2f, \"max_us\": %.2f, \"rel_err\": %.3g, \"within_bound\": %s, \"sets\": %d}\n",
                a.threads, depth, us[us.size() / 2], us.front(), us.back(), err, err < kBound ? "true" : "false", sets);
    std::fflush(stdout);
    ggml_threadpool_free(pool);
    ggml_free(ctx);
  }
  return 0;
}
