// libFuzzer target fuzz_engine: a CPU Engine over a small geometry of several layers (SWA rings
// and NoPE growing planes mixed), decoded through many positions, up to four sequences at once
// (sequences added and removed, batched calls, a batch refused for one bad position), with the ladder's
// switches set from options and from the environment (LADDER_DISABLE_VEC,
// LADDER_STRICT_ATTENTION). Every layer's output is compared with an f64 reference computed
// here from the token history alone (no route, no plane state: the K and V values are f16-exact,
// so every route reads the same numbers).
//
// Input: an 18-byte header (layout below and in fuzz/make_corpus.py), then operations. Checked:
//  * a geometry is the library's to judge: Engine::create succeeds or returns an error;
//  * a refused call (repeated, skipped, negative, past-max-context position; a null buffer)
//    returns an error that is not `internal`, leaves every layer's plane state, the trace and
//    the output buffer as they were, and later outputs still match the reference (so no row moved);
//  * encode_token at the next position below max context succeeds; every layer's plane state is
//    what K3 says, one trace entry per layer with the right position, layer and visible rows and a
//    route that exists for the layer's class; every layer's output matches the f64 reference
//    (NaN pattern, then relative error < 2e-3);
//  * the same for every sequence of a batched encode (each sequence's tokens come from the same
//    generator shifted by its own offset, so sequences differ); a batch with one bad position is
//    refused and leaves every sequence's planes, the trace and every output as they were; a
//    removed sequence is refused; an added one starts empty.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "ladder/engine.hpp"

namespace {

using namespace ladder;
using namespace ladder::fuzz;

// Max context up to 5000: past 4096 visible rows (window 0 or NoPE) the schedule runs 4 warps
// per workgroup.
constexpr int kMaxContext = 5000;
// Without the deep flag (amplitude byte, bit 4) max context stays under 300, and a bulk fill is
// at most 224 tokens unless its byte asks for more: most executions stay cheap, the seeds and
// the flag reach the deep states.
constexpr int kShallowContext = 300;
constexpr int kShortFill = 224;
constexpr int kMaxLayers = 6;
// max_context x n_layers x n_heads x head_dim is capped so one token through every layer (and
// the f64 references) stays within a few milliseconds under ASan.
constexpr std::int64_t kWorkBudget = std::int64_t{1} << 21;
// Attention work (visible rows x n_heads x head_dim, summed over layers and tokens) one input
// may ask for before its remaining operations are ignored: bounds the time of one execution.
constexpr std::int64_t kInputWork = std::int64_t{1} << 22;
constexpr int kGqaRatios[] = {1, 2, 4, 8};
constexpr float kQAmplitude[] = {0.25f, 0.5f, 1.0f, 2.0f};  // |q| <= 2: the bound of kRelTol
constexpr float kVAmplitude[] = {1.0f, 0.5f, 16.0f, 1024.0f};
constexpr std::uint32_t kPoisonBits = 0x7fc0dead;  // a NaN no kernel computes
constexpr int kOpCount = 8;
// Operation bytes at or above this act on sequences (the bytes below keep their meaning of
// before sequences existed, so older seeds replay as they did): add a sequence, remove the
// newest, a batched encode of every sequence, the same with the newest sequence's position skipped.
constexpr int kSequenceOps = 240;
constexpr int kSequenceOpCount = 4;
constexpr int kMaxTracks = 4;
// Sequence i's token p is the generator's token p + i * kTrackSalt.
constexpr int kTrackSalt = 7919;
constexpr int kExplicitClasses = 200;  // NoPE byte at or above this: per-layer classes from a mask

struct Setup {
  Geometry g;
  EngineOptions opt;
  bool env_disable_vec = false;
  bool env_strict = false;
  float q_amp = 1.0f;
  float v_amp = 1.0f;
  Poke poke;
};

// Header: [0] n_layers-1 (mod 6) [1] n_kv_heads-1 (mod 3) [2] GQA index [3] head_dim/4-1
// (mod 32) [4] flags: bit0 unbounded window, bit1 disable_vec, bit2 strict, bit3 stage wrapped
// SWA, bit4 no vec capability, bit5 LADDER_DISABLE_VEC=1, bit6 LADDER_STRICT_ATTENTION=1, bit7
// head_dim + 2 [5-6] max_context-1 [7-8] window-1 [9] ring slack [10] NoPE pattern: period
// b % 5, phase (b / 5) % period, or >= 200: classes from [11], bit i = layer i NoPE
// [12] initial growing capacity (0: the default) [13] amplitudes: bits 0-1 q, 2-3 v; bit 4 deep
// (max context up to 5000, else 300) [14-17] poke [18] poke layer.
Setup read_setup(Bytes& in) {
  Setup s;
  Geometry& g = s.g;
  g.n_layers = in.range(1, kMaxLayers);
  g.n_kv_heads = in.range(1, 3);
  g.n_heads = g.n_kv_heads * kGqaRatios[in.next() % std::size(kGqaRatios)];
  g.head_dim = 4 * in.range(1, 32);
  const int flags = in.next();
  if (flags & 128) g.head_dim += 2;
  s.opt.switches.disable_vec = flags & 2;
  s.opt.switches.strict = flags & 4;
  s.opt.switches.stage_wrapped_swa = flags & 8;
  s.opt.caps.has_vec = !(flags & 16);
  s.env_disable_vec = flags & 32;
  s.env_strict = flags & 64;
  s.opt.record_trace = true;
  const int max_context_bits = in.u16();
  const int window_bits = in.u16();
  g.ring_slack = in.next() % 48;
  const int nope = in.next();
  const int mask = in.next();
  s.opt.initial_growing_capacity = in.next();
  const int amps = in.next();
  s.q_amp = kQAmplitude[amps & 3];
  s.v_amp = kVAmplitude[(amps >> 2) & 3];
  g.max_context = 1 + max_context_bits % (amps & 16 ? kMaxContext : kShallowContext);
  const std::int64_t per_token = static_cast<std::int64_t>(g.n_layers) * g.n_heads * g.head_dim;
  if (g.max_context * per_token > kWorkBudget)
    g.max_context = static_cast<int>(std::max<std::int64_t>(1, kWorkBudget / per_token));
  // The window may exceed max context (by up to 64): whether that is valid is the library's call.
  g.window = flags & 1 ? 0 : 1 + window_bits % (g.max_context + 64);
  if (nope >= kExplicitClasses) {
    for (int i = 0; i < g.n_layers; ++i) g.layer_classes.push_back(mask >> i & 1 ? LayerClass::nope : LayerClass::swa);
  } else {
    g.nope_period = nope % 5;
    g.nope_phase = g.nope_period > 0 ? (nope / 5) % g.nope_period : 0;
  }
  s.poke = read_poke(in);
  s.poke.layer = in.next() % g.n_layers;
  if (s.poke.position >= 0) s.poke.position %= g.max_context;
  s.poke.e %= (s.poke.stream == Stream::q ? g.n_heads : g.n_kv_heads) * g.head_dim;
  return s;
}

void set_env(const char* name, bool on) {
  if (on) {
    setenv(name, "1", 1);
  } else {
    unsetenv(name);
  }
}

// One sequence of the engine as the harness sees it: its id, its next position, its buffers
// and every K/V row it was given (the reference reads them).
struct Track {
  SequenceId id = 0;
  int salt = 0;
  int next = 0;
  std::vector<float> q, k, v, out;
  std::vector<float> hk, hv;  // [position][layer][n_kv_heads][head_dim]
};

class EngineFuzz {
 public:
  EngineFuzz(const Setup& s, std::unique_ptr<Engine> engine) : s_(s), engine_(std::move(engine)) {
    const Geometry& g = s_.g;
    q_layer_ = static_cast<std::size_t>(g.n_heads) * g.head_dim;
    kv_layer_ = static_cast<std::size_t>(g.n_kv_heads) * g.head_dim;
    tracks_.push_back(new_track(0, 0));
  }

  void run(Bytes& in) {
    while (!in.empty() && work_ < kInputWork) {
      const int b = in.next();
      if (b >= kSequenceOps) {
        switch ((b - kSequenceOps) % kSequenceOpCount) {
          case 0: add_track(); break;
          case 1: remove_track(); break;
          case 2: encode_batch(false); break;
          default: encode_batch(true); break;
        }
        continue;
      }
      switch (b % kOpCount) {
        case 0: refused(next() - 1, false); break;
        case 1: refused(next() + in.range(1, 3), false); break;
        case 2: {
          const int kind = in.next() % 3;
          refused(kind == 0 ? s_.g.max_context + in.next() : kind == 1 ? -1 - in.next() : INT32_MAX, false);
          break;
        }
        case 3: refused(next(), true); break;
        case 4: {
          const int c = in.next();
          const int count = c < kShortFill ? 1 + c : 1 + in.u16() % (kMaxContext + 1);
          for (int i = 0; i < count && fill(); ++i) {
          }
          break;
        }
        case 5: fill(); break;
        default: encode_batch_of({0}); break;
      }
    }
  }

 private:
  Track new_track(SequenceId id, int index) const {
    Track t;
    t.id = id;
    t.salt = index * kTrackSalt;
    t.q.resize(q_layer_ * s_.g.n_layers);
    t.out.resize(t.q.size());
    t.k.resize(kv_layer_ * s_.g.n_layers);
    t.v.resize(t.k.size());
    return t;
  }

  // Sequence 0's next position: the single-sequence operations act on it.
  int next() const { return tracks_[0].next; }

  float value(int position, int layer, int e, Stream stream) const {
    const float amp = stream == Stream::q ? s_.q_amp : stream == Stream::v ? s_.v_amp : 1.0f;
    const float x = poked_value(s_.poke, position, e, stream, layer, amp);
    // K and V are given f16-exact so that every route, whichever way it reads the current
    // token, sees the numbers the reference sees.
    return stream == Stream::q ? x : static_cast<float>(f16_rounded(x));
  }

  // Track t's q, k, v for every layer at `position`, its K and V also kept in its history.
  void token(Track& t, int position) {
    const std::size_t per_token = kv_layer_ * s_.g.n_layers;
    const std::size_t at = static_cast<std::size_t>(position) * per_token;
    if (t.hk.size() < at + per_token) {
      t.hk.resize(at + per_token);
      t.hv.resize(at + per_token);
    }
    const int p = position + t.salt;
    for (int layer = 0; layer < s_.g.n_layers; ++layer) {
      for (std::size_t e = 0; e < kv_layer_; ++e) {
        t.k[layer * kv_layer_ + e] = value(p, layer, static_cast<int>(e), Stream::k);
        t.v[layer * kv_layer_ + e] = value(p, layer, static_cast<int>(e), Stream::v);
      }
      for (std::size_t e = 0; e < q_layer_; ++e) t.q[layer * q_layer_ + e] = value(p, layer, static_cast<int>(e), Stream::q);
    }
    std::copy(t.k.begin(), t.k.end(), t.hk.begin() + static_cast<std::ptrdiff_t>(at));
    std::copy(t.v.begin(), t.v.end(), t.hv.begin() + static_cast<std::ptrdiff_t>(at));
  }

  std::vector<PlaneState> states(const Track& t) const {
    std::vector<PlaneState> s;
    for (int layer = 0; layer < s_.g.n_layers; ++layer) s.push_back(engine_->plane_state(t.id, layer));
    return s;
  }
  std::vector<std::vector<PlaneState>> all_states() const {
    std::vector<std::vector<PlaneState>> s;
    for (const Track& t : tracks_) s.push_back(states(t));
    return s;
  }

  static void poison(Track& t) {
    for (float& o : t.out) std::memcpy(&o, &kPoisonBits, sizeof o);
  }

  static bool poisoned(const Track& t) {
    for (const float& o : t.out) {
      std::uint32_t bits;
      std::memcpy(&bits, &o, sizeof bits);
      if (bits != kPoisonBits) return false;
    }
    return true;
  }

  // A call that must be refused: position out of order or range, or (null_q) the next position
  // with a null q buffer.
  void refused(int position, bool null_q) {
    Track& t = tracks_[0];
    const auto before = all_states();
    const std::size_t trace_before = engine_->trace().size();
    if (position >= 0 && position < s_.g.max_context) token(t, position);
    poison(t);
    const Status st = engine_->encode_token(position, {null_q ? nullptr : t.q.data(), t.k.data(), t.v.data(), t.out.data()});
    const bool must_refuse = null_q || position != t.next || position >= s_.g.max_context;
    if (!must_refuse) fail("refused() called for an acceptable position %d", position);
    if (st.ok()) fail("encode_token(%d) accepted (next position %d, max context %d, null q %d)", position, t.next,
                      s_.g.max_context, null_q);
    if (st.code() == ErrorCode::internal) fail("a refused encode_token reported an internal error: %s", st.to_string().c_str());
    if (all_states() != before) fail("a refused encode_token(%d) changed a plane state", position);
    if (engine_->trace().size() != trace_before) fail("a refused encode_token(%d) recorded a trace", position);
    if (!poisoned(t)) fail("a refused encode_token(%d) wrote the output", position);
  }

  bool fill() {
    Track& t = tracks_[0];
    if (t.next >= s_.g.max_context) {
      const auto before = all_states();
      if (engine_->fill_token(t.next, {nullptr, t.k.data(), t.v.data(), nullptr}).ok()) fail("fill past max context accepted");
      if (all_states() != before) fail("a refused fill_token changed a plane state");
      return false;
    }
    token(t, t.next);
    const Status st = engine_->fill_token(t.next, {nullptr, t.k.data(), t.v.data(), nullptr});
    if (!st.ok()) fail("fill_token(%d) refused: %s", t.next, st.to_string().c_str());
    ++t.next;
    return true;
  }

  void add_track() {
    if (tracks_.size() >= static_cast<std::size_t>(kMaxTracks)) return;
    Result<SequenceId> id = engine_->add_sequence();
    if (!id) fail("add_sequence refused: %s", id.status().to_string().c_str());
    tracks_.push_back(new_track(*id, static_cast<int>(tracks_.size())));
    for (const PlaneState& ps : states(tracks_.back()))
      if (ps.len != 0 || ps.next_position != 0) fail("a new sequence's plane is not empty");
  }

  void remove_track() {
    if (tracks_.size() < 2) return;
    const SequenceId id = tracks_.back().id;
    if (!engine_->remove_sequence(id).ok()) fail("remove_sequence(%lld) refused", static_cast<long long>(id));
    tracks_.pop_back();
    Track probe = new_track(id, 0);
    token(probe, 0);
    const SequenceToken gone{id, 0, {probe.q.data(), probe.k.data(), probe.v.data(), probe.out.data()}};
    const Status st = engine_->encode(std::span<const SequenceToken>(&gone, 1));
    if (st.code() != ErrorCode::invalid_argument) fail("encode of a removed sequence: %s", st.to_string().c_str());
  }

  // Every sequence below max context in one call; with `skip`, the newest sequence's position is
  // one too far, and the whole call must be refused with nothing changed.
  void encode_batch(bool skip) {
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < tracks_.size(); ++i)
      if (tracks_[i].next < s_.g.max_context) which.push_back(i);
    if (which.empty()) return;
    if (!skip) {
      encode_batch_of(which);
      return;
    }
    const auto before = all_states();
    const std::size_t trace_before = engine_->trace().size();
    std::vector<SequenceToken> call;
    for (std::size_t i : which) {
      Track& t = tracks_[i];
      const int position = i == which.back() ? t.next + 1 : t.next;
      if (position < s_.g.max_context) token(t, position);
      poison(t);
      call.push_back({t.id, position, {t.q.data(), t.k.data(), t.v.data(), t.out.data()}});
    }
    const Status st = engine_->encode(call);
    if (st.ok()) fail("a batch with a skipped position was accepted");
    if (st.code() == ErrorCode::internal) fail("a refused batch reported an internal error: %s", st.to_string().c_str());
    if (all_states() != before) fail("a refused batch changed a plane state");
    if (engine_->trace().size() != trace_before) fail("a refused batch recorded a trace");
    for (std::size_t i : which)
      if (!poisoned(tracks_[i])) fail("a refused batch wrote an output");
  }

  // One call decoding the next position of every listed track (sequence 0 alone goes through
  // encode_token), then every layer of every track checked.
  void encode_batch_of(const std::vector<std::size_t>& which) {
    if (which.size() == 1 && which[0] == 0 && tracks_[0].next >= s_.g.max_context) {
      refused(tracks_[0].next, false);
      return;
    }
    std::vector<SequenceToken> call;
    for (std::size_t i : which) {
      Track& t = tracks_[i];
      token(t, t.next);
      poison(t);
      call.push_back({t.id, t.next, {t.q.data(), t.k.data(), t.v.data(), t.out.data()}});
    }
    const std::size_t trace_before = engine_->trace().size();
    const Status st = which.size() == 1 && which[0] == 0 ? engine_->encode_token(call[0].position, call[0].io)
                                                          : engine_->encode(call);
    if (!st.ok()) fail("encode of %zu sequences refused: %s", which.size(), st.to_string().c_str());
    const std::vector<TraceEntry>& trace = engine_->trace();
    const std::size_t n_layers = static_cast<std::size_t>(s_.g.n_layers);
    if (trace.size() != trace_before + which.size() * n_layers) fail("trace did not grow by one entry per layer");
    for (std::size_t c = 0; c < which.size(); ++c) {
      Track& t = tracks_[which[c]];
      const int position = t.next++;
      for (int layer = 0; layer < s_.g.n_layers; ++layer) {
        const LayerClass cls = s_.g.layer_class(layer);
        const int window = cls == LayerClass::swa ? s_.g.window : 0;
        const int visible = visible_rows(position, window);
        const PlaneState ps = engine_->plane_state(t.id, layer);
        if (ps.len != visible || ps.origin_logical != position + 1 - visible || ps.next_position != position + 1)
          fail("layer %d after position %d: len %d origin_logical %d next %d (visible %d)", layer, position, ps.len,
               ps.origin_logical, ps.next_position, visible);
        const TraceEntry& e = trace[trace_before + c * n_layers + static_cast<std::size_t>(layer)];
        const bool route_fits =
            cls == LayerClass::swa ? e.decision.route != Route::interleaved : e.decision.route != Route::staged;
        if (e.sequence != t.id || e.position != position || e.layer != layer || e.visible != visible || !route_fits)
          fail("trace entry of layer %d at %d: sequence %lld position %d layer %d visible %d route %s", layer, position,
               static_cast<long long>(e.sequence), e.position, e.layer, e.visible, route_name(e.decision.route));
        check_layer(t, layer, position, visible);
        work_ += static_cast<std::int64_t>(visible) * static_cast<std::int64_t>(q_layer_);
      }
    }
  }

  void check_layer(const Track& t, int layer, int position, int visible) const {
    const int first = position + 1 - visible;
    std::vector<double> kr(static_cast<std::size_t>(visible) * kv_layer_), vr(kr.size());
    for (int r = 0; r < visible; ++r) {
      for (std::size_t e = 0; e < kv_layer_; ++e) {
        const std::size_t at = (static_cast<std::size_t>(first + r) * s_.g.n_layers + layer) * kv_layer_ + e;
        kr[r * kv_layer_ + e] = t.hk[at];
        vr[r * kv_layer_ + e] = t.hv[at];
      }
    }
    HeadShape shape;
    shape.n_heads = s_.g.n_heads;
    shape.n_kv_heads = s_.g.n_kv_heads;
    shape.head_dim = s_.g.head_dim;
    shape.scale = s_.g.scale();
    const std::vector<double> qd(t.q.begin() + layer * q_layer_, t.q.begin() + (layer + 1) * q_layer_);
    std::vector<double> ref(q_layer_);
    reference_attention(shape, qd.data(), kr.data(), vr.data(), visible, ref.data());
    expect_matches(t.out.data() + layer * q_layer_, ref.data(), q_layer_, "engine layer output");
  }

  const Setup s_;
  std::unique_ptr<Engine> engine_;
  std::size_t q_layer_ = 0, kv_layer_ = 0;
  std::vector<Track> tracks_;
  std::int64_t work_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  const Setup setup = read_setup(in);
  set_env("LADDER_DISABLE_VEC", setup.env_disable_vec);
  set_env("LADDER_STRICT_ATTENTION", setup.env_strict);
  Result<std::unique_ptr<Engine>> made = Engine::create(setup.g, setup.opt);
  if (!made) {
    if (made.status().code() == ErrorCode::internal) fail("Engine::create: %s", made.status().to_string().c_str());
    return 0;
  }
  EngineFuzz f(setup, std::move(made.value()));
  f.run(in);
  return 0;
}
