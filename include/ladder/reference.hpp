// M3: the f64 reference, the oracle of every test. Plain loops, no cleverness: scores in f64,
// max subtraction, one softmax, weighted sum.
#pragma once

#include <vector>

#include "ladder/kernel_params.hpp"

namespace ladder {

// k_rows/v_rows: the visible tokens in logical order, [visible][n_kv_heads][head_dim], given in
// f64 exactly as the kernels will see them (plane rows rounded to the plane's dtype; for the interleaved route
// the current token unrounded). out: [n_heads][head_dim].
void reference_attention(const HeadShape& shape, const double* q, const double* k_rows,
                         const double* v_rows, int visible, double* out);

// ||a - b|| / ||b|| over n values (the P3 metric).
double relative_error(const float* a, const double* b, std::size_t n);

// IEEE half <-> float (round to nearest even), exact on the f16 -> f32 side.
KvWord f32_to_f16(float f);
float f16_to_f32(KvWord h);

// Distance in units in the last place between two finite floats (0 when bit-identical).
std::int64_t ulp_distance(float a, float b);

}  // namespace ladder
