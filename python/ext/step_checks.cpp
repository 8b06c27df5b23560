// ladder._check_step: everything ladder.attend would refuse about the next decode step on a
// plane (the arrays' dtype, shape, layout and device, and the plane's next append), checked
// without changing anything. A whole-model cache (ladder.cache) checks every sequence of a
// batch this way before the first append, so a bad argument leaves every plane untouched.
#include "step_checks.hpp"

#include <fmt/format.h>

#include "attend.hpp"
#include "integers.hpp"
#include "tensors.hpp"

namespace ladder::py {

void check_step(const Plane& plane, nanobind::handle q_arg, nanobind::handle k_arg, nanobind::handle v_arg,
                nanobind::handle out_arg) {
  const ArrayInfo q = in_array(q_arg, "q"), k = in_array(k_arg, "k"), v = in_array(v_arg, "v"),
                  out = out_array(out_arg, "out");
  const PlaneGuard guard(plane);
  const PlaneConfig& cfg = plane.config();
  const Where at = where_of(q, "q");
  if (at == Where::cuda && !device_available())
    raise(error_types().no_device, "q is a CUDA tensor but this build of the ladder module has no CUDA support");
  if (plane.where() != at)
    raise(error_types().device_mismatch,
          fmt::format("q is on {} but the plane lives in {} memory: the arrays and the plane must share a device",
                      where_name(at), plane.where() == Where::cpu ? "host" : "device"));
  const std::int64_t head_dim = cfg.head_dim;
  const std::vector<Dim> q_dims{{query_heads(q, cfg), "n_heads"}, {head_dim, "head_dim"}};
  const std::vector<Dim> kv_dims = row_dims(cfg);
  checked_float(q, "q", q_dims, at);
  checked_float(k, "k", kv_dims, at);
  checked_float(v, "v", kv_dims, at);
  checked_float(out, "out", q_dims, at);
  // The next append's plan (PositionError past the max context), not taken.
  take(plan_append(cfg, plane.state(), plane.state().next_position));
}

}  // namespace ladder::py
