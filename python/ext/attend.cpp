#include "attend.hpp"

#include <fmt/format.h>

#include <cmath>

#include "device_convert.hpp"
#include "device_plane.hpp"
#include "integers.hpp"
#include "ladder/attention.hpp"
#include "names.hpp"
#include "tensors.hpp"

namespace ladder::py {

int query_heads(const ArrayInfo& q, const PlaneConfig& cfg) {
  const std::int64_t head_dim = cfg.head_dim;
  if (q.shape.size() != 2 || q.shape[1] != head_dim || q.shape[0] <= 0 || q.shape[0] % cfg.n_kv_heads != 0)
    raise(error_types().shape,
          fmt::format("q must have shape (n_heads, {}) = (n_heads, head_dim) with n_heads a positive multiple of "
                      "n_kv_heads ({}), got {}",
                      head_dim, cfg.n_kv_heads, shape_of(q)));
  return static_cast<int>(q.shape[0]);
}

namespace {
Where parse_where(const std::string& s) {
  if (s == "cpu") return Where::cpu;
  if (s == "cuda" || s.rfind("cuda:", 0) == 0) return Where::cuda;
  raise(error_types().invalid_argument, fmt::format("device must be 'cpu' or 'cuda', got '{}'", s));
}
}  // namespace

void attend(const std::string& route, Plane& plane, nanobind::handle position_arg, nanobind::handle slot_arg,
            nanobind::handle q_arg, nanobind::handle k_arg, nanobind::handle v_arg, nanobind::handle out_arg,
            std::optional<std::string> device, std::uintptr_t stream) {
  const int position = int_arg(position_arg, "position", error_types().position);
  const int slot = int_arg(slot_arg, "slot", error_types().position);
  const ArrayInfo q = in_array(q_arg, "q"), k = in_array(k_arg, "k"), v = in_array(v_arg, "v"),
                  out = out_array(out_arg, "out");
  const PlaneGuard guard(plane);
  const PlaneConfig& cfg = plane.config();
  const PlaneState& st = plane.state();

  const Where arrays_at = where_of(q, "q");
  const Where where = device ? parse_where(*device) : arrays_at;
  if (arrays_at == Where::cuda && !device_available())
    raise(error_types().no_device,
          "q is a CUDA tensor but this build of the ladder module has no CUDA support; rebuild it on a machine "
          "with nvcc (pip install ./python) or pass numpy arrays with device='cpu'");
  if (plane.where() == Where::cuda && arrays_at != Where::cuda)
    raise(error_types().device_mismatch,
          "the plane lives in device memory, so q, k, v and out must be CUDA tensors (the same device)");
  if (plane.where() == Where::cpu && arrays_at == Where::cuda)
    raise(error_types().device_mismatch,
          "q is a CUDA tensor but the plane lives in host memory; create it with ladder.Plane(config, "
          "device='cuda') to attend over CUDA tensors without copies");
  if (where == Where::cpu && arrays_at == Where::cuda)
    raise(error_types().device_mismatch, "device='cpu' but q is a CUDA tensor");

  const std::int64_t head_dim = cfg.head_dim;
  const int n_heads = query_heads(q, cfg);
  if (plane.where() == Where::cuda && n_heads != plane.device().n_heads())
    raise(error_types().shape,
          fmt::format("q has {} heads but this device plane was made for n_heads={} (its device is sized for them)",
                      n_heads, plane.device().n_heads()));
  const std::vector<Dim> q_dims{{n_heads, "n_heads"}, {head_dim, "head_dim"}};
  const std::vector<Dim> kv_dims = row_dims(cfg);
  // Checked here, converted (float16 / bfloat16 -> float32) only once every check has passed.
  F32In qf(q, "q", q_dims, arrays_at), kf(k, "k", kv_dims, arrays_at), vf(v, "v", kv_dims, arrays_at);
  F32Out of(out, "out", q_dims, arrays_at);

  if (position < 0 || position != st.next_position - 1)
    raise(error_types().position,
          fmt::format("attend needs the plane's last append: position {} was given, but the plane's last append "
                      "was position {} (call plane.append(position) first; it returns the slot)",
                      position, st.next_position - 1));
  if (slot != st.physical(position))
    raise(error_types().position, fmt::format("slot {} is not where position {} lives (slot {}, as "
                                              "plane.append returned)",
                                              slot, position, st.physical(position)));

  Route r;
  if (route == "auto") {
    r = choose_route(class_of(cfg.kind), st, Capabilities{}, Switches::from_env()).route;
  } else {
    r = parse_route(route);
  }
  if (const std::string why = route_refusal(r, cfg, st); !why.empty())
    raise(error_types().route, fmt::format("route '{}' cannot run on this plane: {}", route_name(r), why));

  if (plane.where() == Where::cuda) {
    nanobind::gil_scoped_release unlocked;
    const float* qd = qf.data(stream);
    const float* kd = kf.data(stream);
    const float* vd = vf.data(stream);
    float* od = of.data(stream);
    // The library's device runs on its own stream: the caller's stream (its tensors, their
    // conversions) must be done first; the call returns once out is written.
    sync_stream(stream);
    plane.device().attend(r, position, slot, qd, kd, vd, od);
    of.finish(stream);
    return;
  }

  HeadShape shape;
  shape.n_heads = n_heads;
  shape.n_kv_heads = cfg.n_kv_heads;
  shape.head_dim = cfg.head_dim;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));

  Status s;
  {
    nanobind::gil_scoped_release unlocked;
    const LayerIO io{qf.data(), kf.data(), vf.data(), of.data()};
    s = attend_layer(where == Where::cuda ? Device::cuda : Device::cpu, r, plane.host(), position, slot, shape, io);
    if (s.ok()) of.finish();
  }
  check(s);
}

}  // namespace ladder::py
