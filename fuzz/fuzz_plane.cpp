// libFuzzer target fuzz_plane: one KV plane (SWA ring or NoPE growing plane) driven through
// appends and single-layer attention on the CPU, every step checked against the f64 reference.
//
// Input: a 13-byte header choosing the plane and the head shape (layout below and in
// fuzz/make_corpus.py), then a stream of operations. Checked after each one:
//  * a plane config is the library's to judge: creation either succeeds or returns an error;
//  * a refused append (repeated, skipped, negative or past max context) returns an error that is
//    not `internal` and leaves the plane state as it was; an in-order append below max context
//    is never refused, and the state after it is what K3 says (len = visible rows, origins);
//  * attention through the route the ladder chooses is never refused; a forced route is either
//    refused (the output left bit-for-bit as poisoned) or runs; every output that runs matches
//    the f64 reference over the f16-rounded K and V rows (fuzz_support.hpp: NaN pattern, then
//    relative error < 2e-3);
//  * the stored row reads back exactly (K and V), and every held row still holds its token.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_support.hpp"
#include "ladder/attention.hpp"
#include "ladder/ladder.hpp"
#include "ladder/plane.hpp"

namespace {

using namespace ladder;
using namespace ladder::fuzz;

// Max context up to 8192: visible > 4096 rows is where the pinned schedule reaches 4 warps per
// workgroup (nwg = 32 and 2 * 32 * 2 * 32 < visible; schedule.hpp).
constexpr int kMaxContext = 8192;
// Without the header's deep flag max context stays under 512 (one or two warps' worth of
// blocks), and a fill is at most 224 rows unless its byte asks for more: most executions stay
// cheap, the seeds and the flag reach the deep states.
constexpr int kShallowContext = 512;
constexpr int kShortFill = 224;
// max_context x n_heads x head_dim is capped so one attention and its f64 reference stay near
// a millisecond under ASan: head_dim 256 runs with few heads at depth, many heads when shallow.
constexpr std::int64_t kWorkBudget = std::int64_t{1} << 22;
// Attention work (visible rows x n_heads x head_dim, summed over calls) one input may ask for
// before its remaining operations are ignored: bounds the time of one execution.
constexpr std::int64_t kInputWork = std::int64_t{1} << 22;
constexpr int kGqaRatios[] = {1, 2, 3, 4, 8, 16};
constexpr float kQAmplitude[] = {0.25f, 0.5f, 1.0f, 2.0f};  // |q| <= 2: the bound of kRelTol
constexpr float kVAmplitude[] = {1.0f, 0.5f, 16.0f, 1024.0f};
constexpr std::uint32_t kPoisonBits = 0x7fc0dead;  // a NaN no kernel computes
constexpr int kOpCount = 8;

struct Setup {
  LayerClass cls = LayerClass::swa;
  PlaneConfig cfg;
  HeadShape shape;
  float q_amp = 1.0f;
  float v_amp = 1.0f;
  Poke poke;
};

// Header: [0] n_kv_heads-1 (mod 4) [1] GQA ratio index [2] head_dim/4-1 (mod 64)
// [3] flags: bit0 NoPE (growing), bit1 unbounded window, bit2 head_dim + 2 (not a multiple of
// 4), bit3 deep (max context up to 8192, else 512), bits 4-5 q amplitude, bits 6-7 v amplitude  [4-5] max_context-1  [6-7] window-1 (ring) or
// initial capacity-1 (growing)  [8] ring slack  [9-12] poke.
Setup read_setup(Bytes& in) {
  Setup s;
  s.shape.n_kv_heads = in.range(1, 4);
  s.shape.n_heads = s.shape.n_kv_heads * kGqaRatios[in.next() % std::size(kGqaRatios)];
  s.shape.head_dim = 4 * in.range(1, 64);
  const int flags = in.next();
  if (flags & 4) s.shape.head_dim += 2;
  s.shape.scale = 1.0f / std::sqrt(static_cast<float>(s.shape.head_dim));
  s.cls = flags & 1 ? LayerClass::nope : LayerClass::swa;
  s.q_amp = kQAmplitude[(flags >> 4) & 3];
  s.v_amp = kVAmplitude[(flags >> 6) & 3];
  int max_context = 1 + in.u16() % (flags & 8 ? kMaxContext : kShallowContext);
  const std::int64_t per_row = static_cast<std::int64_t>(s.shape.n_heads) * s.shape.head_dim;
  if (max_context * per_row > kWorkBudget) max_context = static_cast<int>(std::max<std::int64_t>(1, kWorkBudget / per_row));
  // The window may exceed max context (by up to 64): whether that is valid is the library's call.
  const int span = 1 + in.u16() % (max_context + 64);
  const int slack = in.next() % 64;
  s.cfg.n_kv_heads = s.shape.n_kv_heads;
  s.cfg.head_dim = s.shape.head_dim;
  s.cfg.max_context = max_context;
  if (s.cls == LayerClass::swa) {
    s.cfg.kind = PlaneKind::ring;
    s.cfg.window = flags & 2 ? 0 : span;
    s.cfg.capacity = (flags & 2 ? max_context : span) + slack;
  } else {
    s.cfg.kind = PlaneKind::growing;
    s.cfg.capacity = span;
  }
  s.poke = read_poke(in);
  if (s.poke.position >= 0) s.poke.position %= max_context;
  s.poke.e %= (s.poke.stream == Stream::q ? s.shape.n_heads : s.shape.n_kv_heads) * s.shape.head_dim;
  return s;
}

// Two stored f16 words that hold the same value, any two NaNs counting as equal.
bool half_equal(KvWord a, KvWord b) {
  const auto is_nan = [](KvWord h) { return std::isnan(kv_decode(h, KvDtype::f16)); };
  return a == b || (is_nan(a) && is_nan(b));
}

class PlaneFuzz {
 public:
  PlaneFuzz(const Setup& s, HostPlane plane) : s_(s), plane_(std::move(plane)) {
    row_ = static_cast<std::size_t>(s_.shape.n_kv_heads) * s_.shape.head_dim;
  }

  void run(Bytes& in) {
    while (!in.empty() && work_ < kInputWork) {
      const int op = in.next() % kOpCount;
      const int next = plane_.state().next_position;
      switch (op) {
        case 0: refused_append(next - 1); break;
        case 1: refused_append(next + in.range(1, 3)); break;
        case 2: {
          const int kind = in.next() % 3;
          refused_append(kind == 0 ? s_.cfg.max_context + in.next() : kind == 1 ? -1 - in.next() : INT32_MAX);
          break;
        }
        case 3: {
          const int b = in.next();
          fill(b < kShortFill ? 1 + b : 1 + in.u16() % (kMaxContext + 1));
          break;
        }
        default: attend(in); break;
      }
    }
    check_held_rows();
  }

 private:
  float value(int position, int e, Stream stream) const {
    const float amp = stream == Stream::q ? s_.q_amp : stream == Stream::v ? s_.v_amp : 1.0f;
    return poked_value(s_.poke, position, e, stream, 0, amp);
  }

  // Computes token `position`'s K and V rows once, into the history the checkers read.
  void token_rows(int position) {
    const std::size_t at = static_cast<std::size_t>(position) * row_;
    if (hk_.size() < at + row_) {
      hk_.resize(at + row_);
      hv_.resize(at + row_);
    }
    for (std::size_t e = 0; e < row_; ++e) {
      hk_[at + e] = value(position, static_cast<int>(e), Stream::k);
      hv_[at + e] = value(position, static_cast<int>(e), Stream::v);
    }
  }
  const float* k_row(int position) const { return hk_.data() + static_cast<std::size_t>(position) * row_; }
  const float* v_row(int position) const { return hv_.data() + static_cast<std::size_t>(position) * row_; }

  void refused_append(int position) {
    const PlaneState before = plane_.state();
    Result<int> slot = plane_.append(position);
    if (slot) fail("append of position %d accepted when the next position is %d", position, before.next_position);
    if (slot.status().code() == ErrorCode::internal) fail("a refused append reported an internal error");
    if (!(plane_.state() == before)) fail("a refused append of position %d changed the plane state", position);
  }

  // Appends the next position; returns its slot, or -1 past max context (checked refused).
  int append_next() {
    const int position = plane_.state().next_position;
    if (position >= s_.cfg.max_context) {
      refused_append(position);
      return -1;
    }
    Result<int> slot = plane_.append(position);
    if (!slot) fail("in-order append of position %d refused: %s", position, slot.status().to_string().c_str());
    const PlaneState& st = plane_.state();
    const int visible = visible_rows(position, s_.cfg.window);
    if (st.len != visible || st.origin_logical != position + 1 - visible || st.next_position != position + 1 ||
        st.capacity < st.len || *slot != st.physical(position))
      fail("state after appending %d: len %d origin_logical %d next %d capacity %d slot %d", position, st.len,
           st.origin_logical, st.next_position, st.capacity, *slot);
    return *slot;
  }

  void fill(int count) {
    for (int i = 0; i < count; ++i) {
      const int position = plane_.state().next_position;
      const int slot = append_next();
      if (slot < 0) return;
      token_rows(position);
      plane_.write_row(slot, k_row(position), v_row(position));
    }
  }

  void attend(Bytes& in) {
    const int position = plane_.state().next_position;
    const int slot = append_next();
    if (slot < 0) return;
    token_rows(position);
    const int how = in.next();
    Switches sw;
    sw.disable_vec = how & 1;
    sw.stage_wrapped_swa = how & 2;
    sw.strict = how & 4;
    Capabilities caps;
    caps.has_vec = !(how & 8);
    const bool forced = (how >> 4) % 4 == 3;
    const Route route = forced ? static_cast<Route>((how >> 6) % kRouteCount)
                               : choose_route(s_.cls, plane_.state(), caps, sw).route;

    std::vector<float> q(static_cast<std::size_t>(s_.shape.n_heads) * s_.shape.head_dim);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = value(position, static_cast<int>(i), Stream::q);
    std::vector<float> out(q.size());
    for (float& o : out) std::memcpy(&o, &kPoisonBits, sizeof o);
    const std::vector<float> poisoned = out;
    const PlaneState before = plane_.state();
    const Status st = attend_layer(Device::cpu, route, plane_, position, slot, s_.shape, {q.data(), k_row(position), v_row(position), out.data()});
    if (!st.ok()) {
      const bool shape_refused = s_.shape.head_dim % 4 != 0;
      if (!forced && !shape_refused)
        fail("the ladder's route %s refused at position %d: %s", route_name(route), position, st.to_string().c_str());
      if (st.code() == ErrorCode::internal) fail("a refused route reported an internal error: %s", st.to_string().c_str());
      if (std::memcmp(out.data(), poisoned.data(), out.size() * sizeof(float)) != 0) fail("a refused route wrote its output");
      if (!(plane_.state() == before)) fail("a refused route changed the plane state");
      plane_.write_row(slot, k_row(position), v_row(position));
      return;
    }
    work_ += static_cast<std::int64_t>(plane_.state().len) * static_cast<std::int64_t>(q.size());
    check_output(route, position, q, out);
    // The other held rows are checked once, at the end of the input (run()).
    check_row(position, slot);
  }

  void check_output(Route route, int position, const std::vector<float>& q, const std::vector<float>& out) {
    const int visible = visible_rows(position, s_.cfg.window);
    const int first = logical_start(position, s_.cfg.window);
    std::vector<double> kr(static_cast<std::size_t>(visible) * row_), vr(kr.size());
    for (int t = 0; t < visible; ++t) {
      // The interleaved route reads the current token in f32, every other row is f16 plane data.
      const bool raw = route == Route::interleaved && first + t == position;
      for (std::size_t e = 0; e < row_; ++e) {
        const float kf = k_row(first + t)[e];
        const float vf = v_row(first + t)[e];
        kr[t * row_ + e] = raw ? kf : f16_rounded(kf);
        vr[t * row_ + e] = raw ? vf : f16_rounded(vf);
      }
    }
    const std::vector<double> qd(q.begin(), q.end());
    std::vector<double> ref(q.size());
    reference_attention(s_.shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
    expect_matches(out.data(), ref.data(), out.size(), route_name(route));
  }

  void check_row(int logical, int phys) const {
    const PlaneStrides str = plane_.strides();
    for (int h = 0; h < s_.shape.n_kv_heads; ++h) {
      for (int d = 0; d < s_.shape.head_dim; ++d) {
        const int e = h * s_.shape.head_dim + d;
        const std::int64_t at = str.offset(phys, h) + d;
        if (!half_equal(plane_.k()[at], f32_to_f16(k_row(logical)[e])))
          fail("K of position %d (slot %d, head %d, dim %d) does not read back", logical, phys, h, d);
        if (!half_equal(plane_.v()[at], f32_to_f16(v_row(logical)[e])))
          fail("V of position %d (slot %d, head %d, dim %d) does not read back", logical, phys, h, d);
      }
    }
  }

  void check_held_rows() const {
    const PlaneState& s = plane_.state();
    std::vector<bool> used(static_cast<std::size_t>(s.capacity));
    for (int logical = s.origin_logical; logical < s.origin_logical + s.len; ++logical) {
      const int phys = s.physical(logical);
      if (phys < 0 || phys >= s.capacity || used[static_cast<std::size_t>(phys)]) fail("held rows collide at slot %d", phys);
      used[static_cast<std::size_t>(phys)] = true;
      check_row(logical, phys);
    }
  }

  const Setup s_;
  HostPlane plane_;
  std::size_t row_ = 0;
  std::vector<float> hk_, hv_;  // [position][n_kv_heads][head_dim]: every token written so far
  std::int64_t work_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  const Setup setup = read_setup(in);
  Result<HostPlane> made = HostPlane::create(setup.cfg);
  if (!made) {
    if (made.status().code() == ErrorCode::internal) fail("plane creation: %s", made.status().to_string().c_str());
    return 0;
  }
  PlaneFuzz f(setup, std::move(made.value()));
  f.run(in);
  return 0;
}
