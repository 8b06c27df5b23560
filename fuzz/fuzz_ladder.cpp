// libFuzzer target: drives plane append/addressing and the ladder against the f64 reference.
// Build: scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
//
// Input bytes choose a small geometry, then a stream of operations: appends (mostly in order,
// sometimes repeated, skipped or past max context) and attention calls through the route the
// ladder picks. Checked after every step:
//  * a refused append leaves the plane state and bytes untouched, with the right error code;
//  * the held rows map to distinct physical slots and every in-window row still holds the
//    token that was written for it (no in-window overwrite);
//  * the routed attention agrees with the f64 reference (relative error < 2e-3, SPEC P3).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "ladder/attention.hpp"
#include "ladder/cpu/cpu_backend.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"
#include "ladder/reference.hpp"

namespace {

using namespace ladder;

class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  std::uint8_t next() { return i_ < n_ ? d_[i_++] : 0; }
  int range(int lo, int hi) { return lo + next() % (hi - lo + 1); }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t i_ = 0;
};

// Deterministic value of element e of token `position` (never zero): lets the checker know
// what every in-window row must still hold.
float token_value(int position, int e, int salt) {
  const std::uint32_t h = static_cast<std::uint32_t>(position) * 2654435761u ^
                          static_cast<std::uint32_t>(e) * 40503u ^ static_cast<std::uint32_t>(salt) * 97u;
  return 0.25f + static_cast<float>(h % 1024u) / 512.0f - 1.0f;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

constexpr double kRelTol = 2e-3;  // SPEC P3 bound for f16 KV

void check_attention(HostPlane& plane, LayerClass cls, int position, int slot, const HeadShape& shape,
                     const std::vector<float>& k, const std::vector<float>& v, Bytes& in) {
  Switches sw;
  sw.disable_vec = in.next() % 4 == 0;
  sw.stage_wrapped_swa = in.next() % 2 == 0;
  const RouteDecision d = choose_route(cls, plane.state(), Capabilities{}, sw);
  const int hd = shape.head_dim;
  std::vector<float> q(static_cast<std::size_t>(shape.n_heads) * hd);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = token_value(position, static_cast<int>(i), 7);
  std::vector<float> out(q.size(), std::nanf(""));
  const LayerIO io{q.data(), k.data(), v.data(), out.data()};
  const Status st = attend_layer(Device::cpu, d.route, plane, position, slot, shape, io);
  if (!st.ok()) fail("a route the ladder chose was refused");
  // Reference over the logical rows, rebuilt from the deterministic token values: f16-rounded,
  // except the interleaved route's current token, which it reads unrounded.
  const int window = plane.config().window;
  const int visible = visible_rows(position, window);
  const int first = logical_start(position, window);
  const std::size_t row = static_cast<std::size_t>(shape.n_kv_heads) * hd;
  std::vector<double> kr(visible * row), vr(visible * row), qd(q.begin(), q.end()), ref(q.size());
  for (int t = 0; t < visible; ++t) {
    for (std::size_t e = 0; e < row; ++e) {
      const float kf = token_value(first + t, static_cast<int>(e), 1);
      const float vf = token_value(first + t, static_cast<int>(e), 2);
      const bool raw = d.route == Route::interleaved && first + t == position;
      kr[t * row + e] = raw ? kf : f16_to_f32(f32_to_f16(kf));
      vr[t * row + e] = raw ? vf : f16_to_f32(f32_to_f16(vf));
    }
  }
  reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
  if (!(relative_error(out.data(), ref.data(), out.size()) < kRelTol)) fail("route disagrees with the reference");
}

void check_rows(const HostPlane& plane, const HeadShape& shape) {
  const PlaneState& s = plane.state();
  const PlaneStrides str = plane.strides();
  std::set<int> slots;
  for (int logical = s.origin_logical; logical < s.origin_logical + s.len; ++logical) {
    const int phys = s.physical(logical);
    if (phys < 0 || phys >= s.capacity || !slots.insert(phys).second) fail("held rows collide");
    for (int h = 0; h < shape.n_kv_heads; ++h) {
      for (int d = 0; d < shape.head_dim; ++d) {
        const int e = h * shape.head_dim + d;
        const std::uint16_t want = f32_to_f16(token_value(logical, e, 1));
        if (plane.k()[str.offset(phys, h) + d] != want) fail("an in-window row was overwritten");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  HeadShape shape;
  shape.n_kv_heads = in.range(1, 3);
  shape.n_heads = shape.n_kv_heads * in.range(1, 4);
  shape.head_dim = 4 * in.range(1, 8);
  shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const LayerClass cls = in.next() % 2 ? LayerClass::swa : LayerClass::nope;
  PlaneConfig cfg;
  cfg.n_kv_heads = shape.n_kv_heads;
  cfg.head_dim = shape.head_dim;
  cfg.max_context = in.range(1, 160);
  if (cls == LayerClass::swa) {
    cfg.kind = PlaneKind::ring;
    cfg.window = in.range(1, 70);
    cfg.capacity = cfg.window + in.range(0, 40);
  } else {
    cfg.kind = PlaneKind::growing;
    cfg.capacity = in.range(1, 48);
  }
  Result<HostPlane> made = HostPlane::create(cfg);
  if (!made) return 0;
  HostPlane plane = std::move(made.value());
  const std::size_t row = static_cast<std::size_t>(shape.n_kv_heads) * shape.head_dim;
  std::vector<float> k(row), v(row);
  while (!in.empty()) {
    const int op = in.next() % 16;
    int position = plane.state().next_position;
    if (op == 0) position -= 1;                        // repeated
    if (op == 1) position += in.range(1, 3);           // skipped
    if (op == 2) position = cfg.max_context + in.next();  // past max context
    const PlaneState before = plane.state();
    const std::vector<std::uint16_t> kb(plane.k(), plane.k() + plane.elements());
    Result<int> slot = plane.append(position);
    if (!slot) {
      if (position == before.next_position && position < cfg.max_context && position >= 0) fail("valid append refused");
      if (!(plane.state() == before)) fail("refused append changed the state");
      if (std::memcmp(kb.data(), plane.k(), kb.size() * sizeof(std::uint16_t)) != 0) fail("refused append changed rows");
      continue;
    }
    if (position != before.next_position) fail("an out-of-order append was accepted");
    if (*slot != plane.state().physical(position)) fail("slot is not physical(position)");
    for (std::size_t e = 0; e < row; ++e) {
      k[e] = token_value(position, static_cast<int>(e), 1);
      v[e] = token_value(position, static_cast<int>(e), 2);
    }
    if (op % 3 == 0) {
      check_attention(plane, cls, position, *slot, shape, k, v, in);
    } else {
      plane.write_row(*slot, k.data(), v.data());
    }
    check_rows(plane, shape);
  }
  return 0;
}
