// ladder._ladder: the nanobind extension. Enums cross as strings ('swa', 'ring', 'vec');
// arrays cross in place (arrays.hpp); every library error becomes a Python exception (errors.hpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arrays.hpp"
#include "attend.hpp"
#include "cpu/kv_convert.hpp"
#include "device_convert.hpp"
#include "engine_calls.hpp"
#include "errors.hpp"
#include "integers.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/reference.hpp"
#include "ladder/engine.hpp"
#include "ladder/geometry.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"
#include "ladder/schedule.hpp"
#include "names.hpp"
#include "planes.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace ladder::py {

// ---- errors ---------------------------------------------------------------------------------
ErrorTypes& error_types() {
  static ErrorTypes t;
  return t;
}

void check(const Status& s) {
  if (s.ok()) return;
  const ErrorTypes& t = error_types();
  PyObject* type = t.base;
  switch (s.code()) {
    case ErrorCode::ok: return;
    case ErrorCode::invalid_argument: type = t.invalid_argument; break;
    case ErrorCode::out_of_order:
    case ErrorCode::out_of_range: type = t.position; break;
    case ErrorCode::unsupported: type = t.unsupported; break;
    case ErrorCode::out_of_memory: type = t.out_of_memory; break;
    case ErrorCode::no_device: type = t.no_device; break;
    case ErrorCode::device_error: type = t.device_error; break;
    case ErrorCode::non_finite: type = t.invalid_argument; break;
    case ErrorCode::internal: type = t.base; break;
  }
  raise(type, s.message());
}

namespace {

PyObject* new_error(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(bases.size()));
  Py_ssize_t i = 0;
  for (PyObject* b : bases) {
    Py_INCREF(b);
    PyTuple_SET_ITEM(tuple, i++, b);
  }
  const std::string qualified = fmt::format("ladder.{}", name);
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, tuple, nullptr);
  Py_DECREF(tuple);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::borrow(type);  // the module keeps a reference for the process lifetime
  return type;
}

void make_errors(nb::module_& m) {
  ErrorTypes& t = error_types();
  t.base = new_error(m, "LadderError", {PyExc_RuntimeError}, "Base class of every ladder error.");
  t.invalid_argument = new_error(m, "InvalidArgumentError", {t.base, PyExc_ValueError},
                                 "An argument is invalid (geometry, configuration, flag value).");
  t.shape = new_error(m, "ShapeError", {t.invalid_argument}, "An array has the wrong shape or layout.");
  t.dtype = new_error(m, "DTypeError", {t.invalid_argument}, "An array has the wrong dtype (float32, float16 or bfloat16 expected).");
  t.device_mismatch = new_error(m, "DeviceMismatchError", {t.invalid_argument},
                                "Arrays and plane live on different devices.");
  t.position = new_error(m, "PositionError", {t.invalid_argument},
                         "A position or slot is out of order, repeated or past the max context.");
  t.route = new_error(m, "RouteError", {t.invalid_argument}, "A route cannot run on the plane's state.");
  t.unsupported = new_error(m, "UnsupportedError", {t.base}, "Not supported by this device (e.g. head_dim).");
  t.no_device = new_error(m, "NoDeviceError", {t.base}, "No usable CUDA device, or no CUDA in this build.");
  t.device_error = new_error(m, "DeviceError", {t.base}, "A CUDA call or kernel launch failed.");
  t.out_of_memory = new_error(m, "OutOfMemoryError", {t.base, PyExc_MemoryError}, "An allocation failed.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Raise& e) {
      PyErr_SetString(e.type, e.message.c_str());
    }
  });
}

}  // namespace

// ---- names ----------------------------------------------------------------------------------
LayerClass parse_layer_class(const std::string& s) {
  if (s == "swa") return LayerClass::swa;
  if (s == "nope") return LayerClass::nope;
  raise(error_types().invalid_argument, fmt::format("layer class must be 'swa' or 'nope', got '{}'", s));
}
PlaneKind parse_plane_kind(const std::string& s) {
  if (s == "ring") return PlaneKind::ring;
  if (s == "growing") return PlaneKind::growing;
  raise(error_types().invalid_argument, fmt::format("plane kind must be 'ring' or 'growing', got '{}'", s));
}
Route parse_route(const std::string& s) {
  for (Route r : {Route::vec, Route::splitk, Route::interleaved, Route::staged})
    if (s == route_name(r)) return r;
  raise(error_types().invalid_argument,
        fmt::format("route must be one of 'vec', 'splitk', 'interleaved', 'staged' or 'auto', got '{}'", s));
}
LayerClass class_of(PlaneKind k) { return k == PlaneKind::ring ? LayerClass::swa : LayerClass::nope; }

namespace {

// The stream that wrote a CUDA tensor: `stream` when given (a cudaStream_t as an int, or a
// torch.cuda.Stream), else torch's current stream on the tensor's device for a torch CUDA tensor
// (what ladder.attend takes), else the default stream.
std::uintptr_t writer_stream(nb::handle stream, nb::handle tensor) {
  if (!stream.is_none()) {
    // A torch.cuda.Stream (or anything carrying its handle) as well as the bare handle.
    if (nb::hasattr(stream, "cuda_stream")) return nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
    return nb::cast<std::uintptr_t>(stream);
  }
  if (nb::hasattr(tensor, "is_cuda") && nb::cast<bool>(tensor.attr("is_cuda"))) {
    const nb::object cuda = nb::module_::import_("torch.cuda");
    return nb::cast<std::uintptr_t>(cuda.attr("current_stream")(tensor.attr("device")).attr("cuda_stream"));
  }
  return 0;
}

// ---- dictionaries for the trace ---------------------------------------------------------------
nb::dict state_dict(const PlaneState& s) {
  nb::dict d;
  d["capacity"] = s.capacity;
  d["len"] = s.len;
  d["origin_logical"] = s.origin_logical;
  d["origin_physical"] = s.origin_physical;
  d["next_position"] = s.next_position;
  return d;
}
nb::dict predicate_dict(const Predicates& p) {
  nb::dict d;
  d["has_vec"] = p.has_vec;
  d["strict"] = p.strict;
  d["vec_rows"] = p.vec_rows;
  d["swa_vec"] = p.swa_vec;
  d["stage"] = p.stage;
  return d;
}
nb::dict schedule_dict(const Schedule& s) {
  nb::dict d;
  d["blocks"] = s.blocks;
  d["nwg"] = s.nwg;
  d["nsg"] = s.nsg;
  return d;
}

// Switches from keyword arguments; None takes the environment's value (R3).
Switches switches_from(std::optional<bool> strict, std::optional<bool> disable_vec, bool stage_wrapped_swa) {
  Switches sw = Switches::from_env();
  if (strict) sw.strict = *strict;
  if (disable_vec) sw.disable_vec = *disable_vec;
  sw.stage_wrapped_swa = stage_wrapped_swa;
  return sw;
}

nb::tuple choose_route_py(const std::string& cls, const PlaneState& st, bool has_vec, std::optional<bool> strict,
                          std::optional<bool> disable_vec, bool stage_wrapped_swa) {
  const RouteDecision d = choose_route(parse_layer_class(cls), st, Capabilities{has_vec},
                                       switches_from(strict, disable_vec, stage_wrapped_swa));
  return nb::make_tuple(std::string(route_name(d.route)), predicate_dict(d.pred));
}

// R4 without data: the planes' metadata follows the append rule from position 0 to the last
// requested position, and each requested (position, layer) records the ladder's decision.
nb::list route_trace_py(const Geometry& g, nb::handle positions_arg, nb::handle layers_arg, bool has_vec,
                        std::optional<bool> strict, std::optional<bool> disable_vec, bool stage_wrapped_swa,
                        nb::handle initial_capacity_arg) {
  check(g.validate());
  std::vector<int> positions = int_list_arg(positions_arg, "positions", error_types().position);
  const int initial_growing_capacity =
      int_arg(initial_capacity_arg, "initial_growing_capacity", error_types().invalid_argument);
  std::vector<int> layers;
  if (!layers_arg.is_none()) {
    layers = int_list_arg(layers_arg, "layers", error_types().invalid_argument);
  } else {
    for (int l = 0; l < g.n_layers; ++l) layers.push_back(l);
  }
  for (int l : layers)
    if (l < 0 || l >= g.n_layers)
      raise(error_types().invalid_argument,
            fmt::format("layer {} does not exist (the geometry has {} layers: 0..{})", l, g.n_layers, g.n_layers - 1));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  for (int p : positions)
    if (p < 0 || p >= g.max_context)
      raise(error_types().position,
            fmt::format("position {} is outside 0..{} (max context {})", p, g.max_context - 1, g.max_context));
  const Switches sw = switches_from(strict, disable_vec, stage_wrapped_swa);

  if (initial_growing_capacity < 0 || initial_growing_capacity > g.max_context)
    raise(error_types().invalid_argument,
          fmt::format("initial_growing_capacity must be in 0..{} (0 picks the default; got {})", g.max_context,
                      initial_growing_capacity));

  // Each plane state comes in closed form (state_after), so a position near a huge max context
  // costs what position 0 costs.
  std::vector<TraceEntry> entries;
  for (int layer : layers) {
    const LayerClass cls = g.layer_class(layer);
    const PlaneConfig cfg = PlaneConfig::for_layer(g, cls, initial_growing_capacity);
    for (int pos : positions) {
      TraceEntry e;
      e.position = pos;
      e.layer = layer;
      e.cls = cls;
      e.state = take(state_after(cfg, pos));
      e.decision = choose_route(cls, e.state, Capabilities{has_vec}, sw);
      e.visible = g.visible(cls, pos);
      e.schedule = pinned_schedule(e.visible);
      entries.push_back(e);
    }
  }
  std::sort(entries.begin(), entries.end(), [](const TraceEntry& a, const TraceEntry& b) {
    return a.position != b.position ? a.position < b.position : a.layer < b.layer;
  });
  nb::list out;
  for (const TraceEntry& e : entries) {
    nb::dict d;
    d["position"] = e.position;
    d["layer"] = e.layer;
    d["class"] = std::string(layer_class_name(e.cls));
    d["route"] = std::string(route_name(e.decision.route));
    d["predicates"] = predicate_dict(e.decision.pred);
    d["state"] = state_dict(e.state);
    d["visible"] = e.visible;
    d["schedule"] = schedule_dict(e.schedule);
    d["line"] = format_trace(e);
    out.append(d);
  }
  return out;
}

// ---- plane data as numpy ------------------------------------------------------------------------
nb::ndarray<nb::numpy, KvWord> owned_u16(std::vector<KvWord> data, std::vector<std::size_t> shape) {
  auto* heap = new std::vector<KvWord>(std::move(data));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<KvWord>*>(p); });
  return nb::ndarray<nb::numpy, KvWord>(heap->data(), shape.size(), shape.data(), owner);
}

nb::ndarray<nb::numpy, float> new_f32(std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  auto* heap = new std::vector<float>(n);
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::ndarray<nb::numpy, float>(heap->data(), shape.size(), shape.data(), owner);
}

std::vector<std::size_t> storage_shape(const PlaneConfig& cfg, const PlaneState& st) {
  const auto cap = static_cast<std::size_t>(st.capacity);
  const auto h = static_cast<std::size_t>(cfg.n_kv_heads);
  const auto d = static_cast<std::size_t>(cfg.head_dim);
  return cfg.kind == PlaneKind::ring ? std::vector<std::size_t>{cap, h, d} : std::vector<std::size_t>{h, cap, d};
}


// The visible window ending at the last appended position, in logical order, as f32:
// (k, v), each [visible, n_kv_heads, head_dim]. What a reference implementation attends to.
nb::tuple window_rows(const Plane& p) {
  const PlaneGuard guard(p);
  const PlaneConfig& cfg = p.config();
  const PlaneState& st = p.state();
  const int last = st.next_position - 1;
  const int visible = last < 0 ? 0 : visible_rows(last, cfg.window);
  const int first = last < 0 ? 0 : logical_start(last, cfg.window);
  const std::vector<KvWord> kh = p.copy_k(), vh = p.copy_v();
  const PlaneStrides s = plane_strides(cfg.kind, st.capacity, cfg.n_kv_heads, cfg.head_dim);
  const std::vector<std::size_t> shape{static_cast<std::size_t>(visible), static_cast<std::size_t>(cfg.n_kv_heads),
                                       static_cast<std::size_t>(cfg.head_dim)};
  auto ko = new_f32(shape), vo = new_f32(shape);
  float* kd = ko.data();
  float* vd = vo.data();
  for (int t = 0; t < visible; ++t) {
    const int row = st.physical(first + t);
    for (int h = 0; h < cfg.n_kv_heads; ++h) {
      const std::int64_t src = s.offset(row, h);
      const std::int64_t dst = (static_cast<std::int64_t>(t) * cfg.n_kv_heads + h) * cfg.head_dim;
      for (int d = 0; d < cfg.head_dim; ++d) {
        kd[dst + d] = kv_decode(kh[src + d], cfg.kv_dtype);
        vd[dst + d] = kv_decode(vh[src + d], cfg.kv_dtype);
      }
    }
  }
  return nb::make_tuple(ko, vo);
}

Where where_from(const std::string& device) {
  if (device == "cpu") return Where::cpu;
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) return Where::cuda;
  raise(error_types().invalid_argument, fmt::format("device must be 'cpu' or 'cuda', got '{}'", device));
}

// A Geometry int field read-write from Python; the setter checks the value like every integer
// argument (integers.hpp), so 2**31 is an InvalidArgumentError, not a TypeError.
auto int_getter(int Geometry::*field) {
  return [field](const Geometry& g) { return g.*field; };
}
auto int_setter(int Geometry::*field, const char* name) {
  return [field, name](Geometry& g, nb::handle v) { g.*field = int_arg(v, name, error_types().invalid_argument); };
}

// A plane's state read under its lock (a copy: another thread may append right after).
PlaneState locked_state(const Plane& p) {
  const PlaneGuard guard(p);
  return p.state();
}

// K or V as float16 in storage layout, copied under the plane's lock.
// K or V in storage layout: float16 for an f16 plane; float32 for a bf16 plane (numpy has no
// bfloat16; the widening is exact, so the values are the stored ones).
nb::object storage_copy(const Plane& p, bool values) {
  std::vector<KvWord> data;
  std::vector<std::size_t> shape;
  {
    const PlaneGuard guard(p);
    data = values ? p.copy_v() : p.copy_k();
    shape = storage_shape(p.config(), p.state());
  }
  if (p.config().kv_dtype == KvDtype::f16)
    return owned_u16(std::move(data), std::move(shape)).cast().attr("view")("float16");
  auto wide = new_f32(std::move(shape));
  cpu::detail::widen_row(data.data(), wide.data(), static_cast<int>(data.size()), p.config().kv_dtype);
  return wide.cast();
}

KvDtype dtype_arg(const std::string& name) {
  Result<KvDtype> d = parse_kv_dtype(name);
  if (!d) raise(error_types().invalid_argument, d.status().message());
  return *d;
}

std::string geometry_repr(const Geometry& g) {
  return fmt::format("Geometry(name='{}', n_layers={}, n_heads={}, n_kv_heads={}, head_dim={}, window={}, "
                     "max_context={}, ring_slack={}, nope_period={}, nope_phase={}, kv_dtype='{}')",
                     g.name, g.n_layers, g.n_heads, g.n_kv_heads, g.head_dim, g.window, g.max_context, g.ring_slack,
                     g.nope_period, g.nope_phase, kv_dtype_name(g.kv_dtype));
}

}  // namespace
}  // namespace ladder::py

NB_MODULE(_ladder, m) {
  using namespace ladder;
  using namespace ladder::py;
  m.doc() = "ladder: decode attention over ring-buffer (SWA) and growing (NoPE) KV planes, CPU and CUDA.";
  // Objects that user or test modules still hold at interpreter exit (parametrize lists of
  // PlaneConfig, say) are reported by nanobind as leaks; they are not reference-count errors.
  nb::set_leak_warnings(false);
  make_errors(m);

  m.attr("__version__") = LADDER_PY_VERSION;
  m.attr("ROUTES") = nb::make_tuple("vec", "splitk", "interleaved", "staged");
  m.attr("BLOCK_TOKENS") = kBlockTokens;

  // ---- Geometry ----
  nb::class_<Geometry>(m, "Geometry", "Model geometry: layer classes, GQA head layout, window, max context.")
      .def(
          "__init__",
          [](Geometry* g, nb::handle n_layers, nb::handle n_heads, nb::handle n_kv_heads, nb::handle head_dim,
             nb::handle window, nb::handle max_context, nb::handle ring_slack, nb::handle nope_period,
             nb::handle nope_phase, std::optional<std::vector<std::string>> classes, std::string name,
             const std::string& kv_dtype) {
            PyObject* bad = error_types().invalid_argument;
            Geometry v;
            v.name = std::move(name);
            v.n_layers = int_arg(n_layers, "n_layers", bad);
            v.n_heads = int_arg(n_heads, "n_heads", bad);
            v.n_kv_heads = int_arg(n_kv_heads, "n_kv_heads", bad);
            v.head_dim = int_arg(head_dim, "head_dim", bad);
            v.window = int_arg(window, "window", bad);
            v.max_context = int_arg(max_context, "max_context", bad);
            v.ring_slack = int_arg(ring_slack, "ring_slack", bad);
            v.nope_period = int_arg(nope_period, "nope_period", bad);
            v.nope_phase = int_arg(nope_phase, "nope_phase", bad);
            if (classes)
              for (const std::string& c : *classes) v.layer_classes.push_back(parse_layer_class(c));
            v.kv_dtype = dtype_arg(kv_dtype);
            check(v.validate());
            new (g) Geometry(std::move(v));
          },
          "n_layers"_a, "n_heads"_a, "n_kv_heads"_a, "head_dim"_a, "window"_a, "max_context"_a, "ring_slack"_a = 0,
          "nope_period"_a = 0, "nope_phase"_a = 0, "layer_classes"_a = nb::none(), "name"_a = "custom",
          "kv_dtype"_a = "f16",
          "A validated geometry (raises InvalidArgumentError). layer_classes: optional per-layer 'swa'/'nope'. "
          "kv_dtype: the KV planes' element type, 'f16' (default) or 'bf16'.")
      .def_static("muse_glimmer", &Geometry::muse_glimmer,
                  "The chapter's model: 52 layers (39 SWA + 13 NoPE), 32:2 heads, head_dim 128, window 2048.")
      .def_rw("name", &Geometry::name)
      .def_prop_rw("n_layers", int_getter(&Geometry::n_layers), int_setter(&Geometry::n_layers, "n_layers"))
      .def_prop_rw("n_heads", int_getter(&Geometry::n_heads), int_setter(&Geometry::n_heads, "n_heads"))
      .def_prop_rw("n_kv_heads", int_getter(&Geometry::n_kv_heads), int_setter(&Geometry::n_kv_heads, "n_kv_heads"))
      .def_prop_rw("head_dim", int_getter(&Geometry::head_dim), int_setter(&Geometry::head_dim, "head_dim"))
      .def_prop_rw("window", int_getter(&Geometry::window), int_setter(&Geometry::window, "window"))
      .def_prop_rw("max_context", int_getter(&Geometry::max_context), int_setter(&Geometry::max_context, "max_context"))
      .def_prop_rw("ring_slack", int_getter(&Geometry::ring_slack), int_setter(&Geometry::ring_slack, "ring_slack"))
      .def_prop_rw("nope_period", int_getter(&Geometry::nope_period), int_setter(&Geometry::nope_period, "nope_period"))
      .def_prop_rw("nope_phase", int_getter(&Geometry::nope_phase), int_setter(&Geometry::nope_phase, "nope_phase"))
      .def_rw("weight_bytes_per_token", &Geometry::weight_bytes_per_token)
      .def_prop_rw("kv_dtype", [](const Geometry& g) { return std::string(kv_dtype_name(g.kv_dtype)); },
                   [](Geometry& g, const std::string& d) { g.kv_dtype = dtype_arg(d); },
                   "The KV planes' element type: 'f16' or 'bf16' (anything else raises InvalidArgumentError).")
      .def("with_kv_dtype", [](const Geometry& g, const std::string& d) {
            Geometry c = g;
            c.kv_dtype = dtype_arg(d);
            return c;
          }, "kv_dtype"_a, "A copy of this geometry with another KV element type.")
      .def("validate", [](const Geometry& g) { check(g.validate()); }, "Raises InvalidArgumentError when invalid.")
      .def("layer_class", [](const Geometry& g, nb::handle layer_arg) {
            const int layer = int_arg(layer_arg, "layer", error_types().invalid_argument);
            if (layer < 0 || layer >= g.n_layers)
              raise(error_types().invalid_argument, fmt::format("layer {} does not exist (0..{})", layer, g.n_layers - 1));
            return std::string(layer_class_name(g.layer_class(layer)));
          })
      .def("visible", [](const Geometry& g, const std::string& cls, nb::handle position_arg) {
            const int position = int_arg(position_arg, "position", error_types().position);
            if (position < 0)
              raise(error_types().position, fmt::format("position must be >= 0 (got {})", position));
            return g.visible(parse_layer_class(cls), position);
          }, "cls"_a, "position"_a.none(), "Tokens a layer of this class attends to at `position` (K3).")
      .def("count_layers", [](const Geometry& g, const std::string& cls) { return g.count_layers(parse_layer_class(cls)); })
      .def_prop_ro("scale", &Geometry::scale)
      .def_prop_ro("heads_per_kv", &Geometry::heads_per_kv)
      .def_prop_ro("ring_capacity", &Geometry::ring_capacity)
      .def_prop_ro("kv_bytes_per_token_layer", &Geometry::kv_bytes_per_token_layer)
      .def("describe", &Geometry::describe)
      .def("plane_config", [](const Geometry& g, const std::string& cls, nb::handle initial) {
            check(g.validate());
            const int initial_rows = int_arg(initial, "initial_growing_capacity", error_types().invalid_argument);
            const PlaneConfig c = PlaneConfig::for_layer(g, parse_layer_class(cls), initial_rows);
            check(c.validate());
            return c;
          }, "cls"_a, "initial_growing_capacity"_a = 0, "The plane configuration of a layer of class `cls`.")
      .def("__repr__", &geometry_repr);

  // ---- PlaneConfig / PlaneState ----
  nb::class_<PlaneConfig>(m, "PlaneConfig", "A plane's configuration: kind ('ring' or 'growing'), heads, capacity.")
      .def(
          "__init__",
          [](PlaneConfig* c, const std::string& kind, nb::handle n_kv_heads, nb::handle head_dim, nb::handle capacity,
             nb::handle max_context, nb::handle window, const std::string& kv_dtype) {
            PyObject* bad = error_types().invalid_argument;
            PlaneConfig v;
            v.kv_dtype = dtype_arg(kv_dtype);
            v.kind = parse_plane_kind(kind);
            v.n_kv_heads = int_arg(n_kv_heads, "n_kv_heads", bad);
            v.head_dim = int_arg(head_dim, "head_dim", bad);
            v.capacity = int_arg(capacity, "capacity", bad);
            v.max_context = int_arg(max_context, "max_context", bad);
            v.window = int_arg(window, "window", bad);
            check(v.validate());
            new (c) PlaneConfig(v);
          },
          "kind"_a, "n_kv_heads"_a, "head_dim"_a, "capacity"_a, "max_context"_a, "window"_a = 0, "kv_dtype"_a = "f16")
      .def_prop_ro("kind", [](const PlaneConfig& c) { return std::string(plane_kind_name(c.kind)); })
      .def_ro("n_kv_heads", &PlaneConfig::n_kv_heads)
      .def_ro("head_dim", &PlaneConfig::head_dim)
      .def_ro("window", &PlaneConfig::window)
      .def_ro("capacity", &PlaneConfig::capacity)
      .def_ro("max_context", &PlaneConfig::max_context)
      .def_prop_ro("kv_dtype", [](const PlaneConfig& c) { return std::string(kv_dtype_name(c.kv_dtype)); })
      .def("__repr__", [](const PlaneConfig& c) {
        return fmt::format("PlaneConfig(kind='{}', n_kv_heads={}, head_dim={}, capacity={}, max_context={}, window={}, "
                           "kv_dtype='{}')",
                           plane_kind_name(c.kind), c.n_kv_heads, c.head_dim, c.capacity, c.max_context, c.window,
                           kv_dtype_name(c.kv_dtype));
      });

  nb::class_<PlaneState>(m, "PlaneState", "Explicit origins: logical origin_logical lives at physical origin_physical.")
      .def(
          "__init__",
          [](PlaneState* s, nb::handle capacity_arg, nb::handle len_arg, nb::handle origin_logical_arg,
             nb::handle origin_physical_arg, nb::handle next_position_arg) {
            PyObject* bad = error_types().invalid_argument;
            const int capacity = int_arg(capacity_arg, "capacity", bad);
            const int len = int_arg(len_arg, "len", bad);
            const int origin_logical = int_arg(origin_logical_arg, "origin_logical", bad);
            const int origin_physical = int_arg(origin_physical_arg, "origin_physical", bad);
            const int next_position = int_arg(next_position_arg, "next_position", error_types().position);
            if (capacity <= 0 || len < 0 || len > capacity || origin_physical < 0 || origin_physical >= capacity ||
                origin_logical < 0)
              raise(error_types().invalid_argument,
                    fmt::format("invalid plane state: need capacity > 0, 0 <= len <= capacity, 0 <= origin_physical < "
                                "capacity, origin_logical >= 0 (got capacity {}, len {}, origin_logical {}, "
                                "origin_physical {})",
                                capacity, len, origin_logical, origin_physical));
            PlaneState v;
            v.capacity = capacity;
            v.len = len;
            v.origin_logical = origin_logical;
            v.origin_physical = origin_physical;
            v.next_position = next_position >= 0 ? next_position : origin_logical + len;
            new (s) PlaneState(v);
          },
          "capacity"_a, "len"_a, "origin_logical"_a = 0, "origin_physical"_a = 0, "next_position"_a = -1)
      .def_ro("capacity", &PlaneState::capacity)
      .def_ro("len", &PlaneState::len)
      .def_ro("origin_logical", &PlaneState::origin_logical)
      .def_ro("origin_physical", &PlaneState::origin_physical)
      .def_ro("next_position", &PlaneState::next_position)
      .def("physical", [](const PlaneState& s, nb::handle logical_arg) {
            const int logical = int_arg(logical_arg, "logical", error_types().position);
            if (logical < s.origin_logical || logical >= s.origin_logical + s.len)
              raise(error_types().position, fmt::format("logical token {} is not held (held: {}..{})", logical,
                                                        s.origin_logical, s.origin_logical + s.len - 1));
            return s.physical(logical);
          }, "logical"_a.none(), "The physical row of a held logical token (K1).")
      .def_prop_ro("partially_wrapped", &PlaneState::partially_wrapped)
      .def("as_dict", &state_dict)
      .def("__eq__", [](const PlaneState& a, const PlaneState& b) { return a == b; })
      .def("__repr__", [](const PlaneState& s) {
        return fmt::format("PlaneState(capacity={}, len={}, origin_logical={}, origin_physical={}, next_position={})",
                           s.capacity, s.len, s.origin_logical, s.origin_physical, s.next_position);
      });

  // ---- Plane ----
  nb::class_<Plane>(m, "Plane", "A KV plane (K and V, f16 or bf16: config.kv_dtype) with explicit origins, in host or device memory.")
      .def(
          "__init__",
          [](Plane* p, const PlaneConfig& cfg, const std::string& device, nb::handle n_heads) {
            const Where where = where_from(device);
            const int heads = n_heads.is_none() ? 0 : int_arg(n_heads, "n_heads", error_types().invalid_argument);
            new (p) Plane(cfg, where, heads);
          },
          "config"_a, "device"_a = "cpu", "n_heads"_a.none() = nb::none(),
          "A plane in host memory (device='cpu') or the library's device plane (device='cuda'), which is made for "
          "the query heads of its attend calls: n_heads (required there; a host plane takes any multiple of "
          "n_kv_heads per call).")
      .def_static(
          "for_layer",
          [](const Geometry& g, const std::string& cls, nb::handle initial, const std::string& device) {
            check(g.validate());
            const int initial_growing_capacity =
                int_arg(initial, "initial_growing_capacity", error_types().invalid_argument);
            return Plane(PlaneConfig::for_layer(g, parse_layer_class(cls), initial_growing_capacity), where_from(device),
                         g.n_heads);
          },
          "geometry"_a, "cls"_a, "initial_growing_capacity"_a = 0, "device"_a = "cpu",
          "The plane a layer of class `cls` ('swa' -> ring, 'nope' -> growing) keeps (a device plane for the "
          "geometry's n_heads).")
      .def_prop_ro("device", [](const Plane& p) { return std::string(where_name(p.where())); })
      .def_prop_ro("config", [](const Plane& p) { return p.config(); })
      .def_prop_ro("kind", [](const Plane& p) { return std::string(plane_kind_name(p.config().kind)); })
      .def_prop_ro("layer_class", [](const Plane& p) { return std::string(layer_class_name(class_of(p.config().kind))); })
      .def_prop_ro("state", [](const Plane& p) { return locked_state(p); })
      .def_prop_ro("capacity", [](const Plane& p) { return locked_state(p).capacity; })
      .def_prop_ro("len", [](const Plane& p) { return locked_state(p).len; })
      .def_prop_ro("origin_logical", [](const Plane& p) { return locked_state(p).origin_logical; })
      .def_prop_ro("origin_physical", [](const Plane& p) { return locked_state(p).origin_physical; })
      .def_prop_ro("next_position", [](const Plane& p) { return locked_state(p).next_position; })
      .def_prop_ro("range_stats", [](Plane& p) -> nb::object {
            // N1's counters (docs/nonfinite.md); device planes apply the rule but count nothing.
            if (p.where() != Where::cpu) return nb::none();
            const PlaneGuard guard(p);
            const RangeStats& r = p.host().range_stats();
            nb::dict d;
            d["saturated"] = r.saturated;
            d["nonfinite"] = r.nonfinite;
            return d;
          },
          "Values the range rule changed in this host plane's writes and attends: {'saturated': finite values "
          "beyond +-65504 read as +-65504 (both dtypes), 'nonfinite': NaN/Inf values read as NaN}; None for a device plane.")
      .def("append", [](Plane& p, nb::handle position) {
            const int pos = int_arg(position, "position", error_types().position);
            const PlaneGuard guard(p);
            return p.append(pos);
          }, "position"_a.none(),
           "Append `position` (metadata only) and return the physical slot its row goes to. Out-of-order, repeated "
           "or past-max-context positions raise PositionError and leave the plane untouched.")
      .def("write_row", [](Plane& p, nb::handle slot, nb::handle k, nb::handle v, nb::handle stream) {
            const int s = int_arg(slot, "slot", error_types().position);
            const ArrayInfo ki = in_array(k, "k"), vi = in_array(v, "v");
            const std::uintptr_t st = writer_stream(stream, k);
            const PlaneGuard guard(p);
            p.write_row(s, ki, vi, st);
          }, "slot"_a.none(), "k"_a.none(), "v"_a.none(), "stream"_a.none() = nb::none(),
          "Store one token's K and V (float32, float16 or bfloat16), each (n_kv_heads, head_dim), at a slot (rounded "
          "to the plane's kv_dtype). stream: for CUDA tensors, the stream that wrote them (a torch.cuda.Stream or its "
          "cudaStream_t as an int); the store "
          "waits for it. None takes torch's current stream for a torch CUDA tensor, else the default stream.")
      .def("append_row", [](Plane& p, nb::handle position, nb::handle k, nb::handle v, nb::handle stream) {
            const int pos = int_arg(position, "position", error_types().position);
            const ArrayInfo ki = in_array(k, "k"), vi = in_array(v, "v");
            // Check the rows before the append so a bad row leaves the plane untouched.
            const Where at = p.where() == Where::cpu ? Where::cpu : where_of(ki, "k");
            checked_float(ki, "k", row_dims(p.config()), at);
            checked_float(vi, "v", row_dims(p.config()), at);
            const std::uintptr_t st = writer_stream(stream, k);
            const PlaneGuard guard(p);  // the append and the row as one step for other threads
            const int slot = p.append(pos);
            p.write_row(slot, ki, vi, st);
            return slot;
          }, "position"_a.none(), "k"_a.none(), "v"_a.none(), "stream"_a.none() = nb::none(),
          "append(position) then write_row(slot, k, v, stream); returns the slot.")
      .def("extend", [](Plane& p, nb::handle k, nb::handle v, nb::handle stream) {
            const ArrayInfo ki = in_array(k, "k"), vi = in_array(v, "v");
            const std::uintptr_t st = writer_stream(stream, k);
            const PlaneGuard guard(p);
            return p.extend(ki, vi, st);
          },
           "k"_a.none(), "v"_a.none(), "stream"_a.none() = nb::none(),
           "Append the next n positions with rows from arrays k, v (float32, float16 or bfloat16; host arrays, or "
           "CUDA tensors for a device plane) of shape (n, n_kv_heads, head_dim); returns the slots. Every append is checked first, so a refusal changes nothing. stream: as for write_row.")
      .def_prop_ro("kv_dtype", [](const Plane& p) { return std::string(kv_dtype_name(p.config().kv_dtype)); })
      .def("keys", [](const Plane& p) { return storage_copy(p, false); },
           "A copy of K in storage layout: ring (capacity, n_kv_heads, head_dim), growing "
           "(n_kv_heads, capacity, head_dim); float16 for an f16 plane, float32 (the stored bf16 values, exactly) "
           "for a bf16 plane. Unwritten rows are NaN.")
      .def("values", [](const Plane& p) { return storage_copy(p, true); },
           "A float16 copy of V in storage layout (see keys()).")
      .def("window_rows", &window_rows,
           "The visible window ending at the last appended position, in logical order: (k, v), float32, "
           "each (visible, n_kv_heads, head_dim).")
      .def("__repr__", [](const Plane& p) {
        const PlaneState s = locked_state(p);
        return fmt::format("Plane(kind='{}', device='{}', capacity={}, len={}, origin_logical={}, origin_physical={})",
                           plane_kind_name(p.config().kind), where_name(p.where()), s.capacity, s.len,
                           s.origin_logical, s.origin_physical);
      });

  // ---- the ladder ----
  nb::class_<EngineHandle>(m, "Engine",
                           "The library's decode engine, called one layer at a time: every layer's planes for a "
                           "batch of sequences, on the host ('cpu') or the GPU ('cuda', reading CUDA tensors in "
                           "place). ModelCache is built on it.")
      .def(
          "__init__",
          [](EngineHandle* self, const Geometry& g, const std::string& device, nb::handle initial) {
            new (self) EngineHandle(g, device, initial);
          },
          "geometry"_a, "device"_a = "cpu", "initial_growing_capacity"_a = 0)
      .def("add_sequence", &EngineHandle::add_sequence, "A new sequence with empty planes; returns its id.")
      .def("remove_sequence", &EngineHandle::remove_sequence, "id"_a)
      .def_prop_ro("sequences", &EngineHandle::sequences, "The sequence ids, in increasing order.")
      .def("next_position", &EngineHandle::next_position, "id"_a, "layer"_a,
           "The next position a layer of a sequence accepts (the tokens it holds).")
      .def("state", &EngineHandle::state, "id"_a, "layer"_a, "A layer's plane state for a sequence.")
      .def("encode_layer", &EngineHandle::encode_layer, "layer"_a, "ids"_a, "q"_a, "k"_a, "v"_a, "out"_a,
           "stream"_a = 0,
           "One token of one layer for the sequences `ids`: q, out (B, n_heads, head_dim), k, v (B, n_kv_heads, "
           "head_dim), float32/float16/bfloat16; all or nothing.")
      .def("fill_rows", &EngineHandle::fill_rows, "layer"_a, "id"_a, "k"_a, "v"_a, "stream"_a = 0,
           "A prompt's rows (rows, n_kv_heads, head_dim) of one layer, appended without attention; returns each row's "
           "slot. Arguments and the position range are checked before the first row (a refusal changes nothing).")
      .def("fill_batch", &EngineHandle::fill_batch, "layer"_a, "ids"_a, "counts"_a, "k"_a, "v"_a, "stream"_a = 0,
           "The prompts of several distinct sequences at one layer: k, v (sum(counts), n_kv_heads, head_dim), the "
           "sequences' rows one after another, counts[i] rows for ids[i]; row r of every sequence goes in one engine "
           "call. Returns each sequence's slots. Checked like fill_rows before the first row.")
      .def("range_stats",
           [](const EngineHandle& e) {
             const RangeStats r = e.range_stats();
             return nb::make_tuple(r.saturated, r.nonfinite);
           },
           "N1's counters (saturated, nonfinite) over every value read.")
      .def_prop_ro("device", [](const EngineHandle& e) { return std::string(where_name(e.where())); })
      .def("description", &EngineHandle::description);

  m.def("choose_route", &choose_route_py, "cls"_a, "state"_a, "has_vec"_a = true, "strict"_a = nb::none(),
        "disable_vec"_a = nb::none(), "stage_wrapped_swa"_a = false,
        "The route ladder (R1/R2) for a layer of class `cls` whose plane is in `state` after this token's append. "
        "Returns (route name, predicate dict). strict/disable_vec default to LADDER_STRICT_ATTENTION / "
        "LADDER_DISABLE_VEC.");
  m.def("route_trace", &route_trace_py, "geometry"_a, "positions"_a, "layers"_a = nb::none(), "has_vec"_a = true,
        "strict"_a = nb::none(), "disable_vec"_a = nb::none(), "stage_wrapped_swa"_a = false,
        "initial_growing_capacity"_a = 0,
        "The route trace (R4) for the given positions and layers (default all): one dict per (position, layer) with "
        "class, route, predicates, plane state, visible, schedule and the formatted trace line.");
  m.def("trace_header", &format_trace_header, "The header line of the formatted route trace.");
  m.def("schedule", [](nb::handle visible_arg) {
          const int visible = int_arg(visible_arg, "visible", error_types().invalid_argument);
          if (visible < 0 || visible > limits::kMaxContext)
            raise(error_types().invalid_argument,
                  fmt::format("visible must be in 0..{} (got {})", limits::kMaxContext, visible));
          return schedule_dict(pinned_schedule(visible));
        }, "visible"_a.none(),
        "The pinned split-K schedule (G6) for a visible length: blocks, nwg, nsg.");
  m.def("route_refusal", [](const std::string& route, const Plane& p) {
          const Route r = parse_route(route);
          return route_refusal(r, p.config(), locked_state(p));
        }, "route"_a, "plane"_a, "Why `route` cannot run on the plane's current state ('' when it can).");

  // ---- attention ----
  m.def("_writer_stream", &writer_stream, "stream"_a.none(), "tensor"_a.none(),
        "The cudaStream_t (an int) that wrote `tensor`: `stream` when given (an int or a torch.cuda.Stream), "
        "else torch's current stream for a torch CUDA tensor, else 0: the one rule of every call that takes "
        "CUDA tensors (attend, the Plane writes, ModelCache).");
  m.def("_attend", &attend, "route"_a, "plane"_a, "position"_a.none(), "slot"_a.none(), "q"_a.none(), "k"_a.none(),
        "v"_a.none(), "out"_a.none(),
        "device"_a = nb::none(), "stream"_a = 0);

  // ---- the CPU device's worker pool (docs/threads.md) ----
  m.def("cpu_threads", [] { return cpu::threads(); },
        "Worker threads the CPU device runs its layers on, the calling thread counted.");
  m.def("set_cpu_threads", [](nb::handle n) {
          check(cpu::set_threads(int_arg(n, "threads", error_types().invalid_argument)));
        }, "threads"_a,
        "Sets the CPU device's worker threads (0: one per usable CPU, see usable_cpus). A count outside "
        "0..1024 is an InvalidArgumentError; a thread the system refuses is an OutOfMemoryError that "
        "leaves the current pool in place. Safe while another thread decodes (it finishes on its pool).");
  m.def("usable_cpus", [] {
          const cpu::UsableCpus u = cpu::usable_cpus();
          return nb::make_tuple(u.count, u.limited_by);
        },
        "(count, limited_by): the CPUs this process may use, the default worker count: the online CPUs "
        "lowered to the affinity mask and the cgroup CPU quota; limited_by names the bound that set it.");
  m.def("cuda_available", &device_available, "True when this build has CUDA and a usable GPU is present.");
  m.def("cuda_description", &device_description);
  m.def("has_cuda_build", &has_cuda_build, "True when this build of the module has the CUDA device compiled in.");
}
