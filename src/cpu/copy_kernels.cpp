// The data-movement twins: row store (G1), and the row copy behind the vec tail pad (G3)
// and wrapped-ring staging (G5).
// Pure copies and conversions: no arithmetic order to preserve, only addresses to get right. The
// copies move words bit for bit, so they serve every KV dtype (a zero word is +0 in both).
#include <algorithm>
#include <cstring>

#include "cpu/kv_convert.hpp"
#include "cpu/thread_pool.hpp"
#include "ladder/cpu/cpu_backend.hpp"

namespace ladder::cpu {
namespace {

// A row copy takes at least this many rows per pool task, so pads and small windows stay on one
// thread.
constexpr int kCopyRowsPerTask = 256;

void copy_head_row(const KvWord* src, KvWord* dst, int head_dim) {
  std::memcpy(dst, src, sizeof(KvWord) * static_cast<std::size_t>(head_dim));
}

void zero_head_row(KvWord* dst, int head_dim) {
  std::fill(dst, dst + head_dim, KvWord{0});
}

}  // namespace

void store_rows(const StoreParams& p) {
  for (int h = 0; h < p.n_kv_heads; ++h) {
    const std::int64_t at = p.strides.offset(p.slot, h);
    const std::size_t from = static_cast<std::size_t>(h) * p.head_dim;
    detail::narrow_row(p.k + from, p.plane_k + at, p.head_dim, p.kv_dtype);
    detail::narrow_row(p.v + from, p.plane_v + at, p.head_dim, p.kv_dtype);
  }
}

Status copy_rows(const RowCopyParams& p) {
  const int tasks = std::max(1, (p.rows + kCopyRowsPerTask - 1) / kCopyRowsPerTask);
  const auto copy_range = [&](int task) {
    const int begin = task * kCopyRowsPerTask;
    const int end = std::min(p.rows, begin + kCopyRowsPerTask);
    for (int t = begin; t < end; ++t) {
      const int r = t < p.count ? p.src.row(p.first + t) : -1;
      for (int h = 0; h < p.n_kv_heads; ++h) {
        KvWord* dk = p.dst_k + p.dst_strides.offset(t, h);
        KvWord* dv = p.dst_v + p.dst_strides.offset(t, h);
        if (r >= 0) {
          copy_head_row(p.src.k + p.src.strides.offset(r, h), dk, p.head_dim);
          copy_head_row(p.src.v + p.src.strides.offset(r, h), dv, p.head_dim);
        } else {
          zero_head_row(dk, p.head_dim);
          zero_head_row(dv, p.head_dim);
        }
      }
    }
  };
  if (tasks == 1) {
    copy_range(0);
    return {};
  }
  return detail::parallel_for(tasks, copy_range);
}

}  // namespace ladder::cpu
