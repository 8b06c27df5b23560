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
  float m = neg_inf_f32();
  for (int i = 0; i < count; ++i) m = score_max(m, parts[i].st.m);
  out.st.m = m;
  for (int i = 0; i < count; ++i) {
    const float c = rescale_factor(parts[i].st.m, m);
    out.st.s = fmaf(parts[i].st.s, c, out.st.s);
    for (std::size_t d = 0; d < out.o.size(); ++d) out.o[d] = fmaf(parts[i].o[d], c, out.o[d]);
  }
  return out;
}

void SoftmaxState::normalize(float* out) const {
  for (std::size_t d = 0; d < o.size(); ++d) out[d] = o[d] / st.s;
}

}  // namespace ladder
