#include "ladder/softmax.hpp"

namespace ladder {

void SoftmaxState::fold(float score, const float* v) {
  const float corr = fold_block_max(st, score);
  for (float& x : o) x *= corr;
  const float w = score_weight(st, score);
  st.s += w;
  for (std::size_t d = 0; d < o.size(); ++d) o[d] = fmaf(w, v[d], o[d]);
}

SoftmaxState SoftmaxState::merge(const SoftmaxState* parts, int count) {
  SoftmaxState out(count > 0 ? static_cast<int>(parts[0].o.size()) : 0);
  out.st = merge_stats(
      count, [&](int i) { return parts[i].st.m; }, [&](int i) { return parts[i].st.s; },
      [&](int i, float c) {
        for (std::size_t d = 0; d < out.o.size(); ++d) out.o[d] = merge_add(out.o[d], parts[i].o[d], c);
      });
  return out;
}

void SoftmaxState::normalize(float* out) const {
  for (std::size_t d = 0; d < o.size(); ++d) out[d] = o[d] / st.s;
}

}  // namespace ladder
