// Diagnostic builds only (cmake -DLADDER_DIAG_TIMELINE=ON; src/cuda/timeline.cuh): the kernels'
// timeline records, taken by the benches (`ladder bench` with LADDER_TIMELINE_DIR set) and read
// by scripts/timeline_summary.py. In other builds timeline_enable says the build has no timeline
// and the rest does nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "ladder/errors.hpp"

namespace ladder::cuda {

// The engine call's first kernels (the call state's fetch, N1's input count) record too.
enum class TimelineKernel : std::uint16_t { producer = 1, reducer = 2, link = 3, fetch = 4, count = 5 };
enum class TimelineEvent : std::uint16_t {
  entry = 0,       // the CTA's first instruction
  waited = 1,      // past griddepcontrol.wait (every earlier kernel of the stream has completed)
  slot_begin = 2,  // a producer CTA starts folding warp slot `aux`
  slot_folded = 3, // ... has folded it (its partial not yet written)
  exit = 4,        // the CTA's last instruction
  slot_issued = 5, // ... has issued the next slot's first copies (after slot_folded)
  slot_written = 6,// ... has written the folded slot's partial (the slot end's last step)
  slot_first_block = 7,  // ... has its first block of slot `aux` landed (after slot_begin)
};
// Records one CTA may hold (the rest of its marks are dropped): entry, wait, exit, and five per
// walked slot (a batched launch walks at most 16 at the Muse Glimmer shapes).
inline constexpr unsigned kTimelinePerCta = 96;

// One mark: the global timer (ns), the launch's tag (the producer's q, the reducer's out, the
// link's layer output: which layer or sequence), the CTA (linear index), its SM, what and where.
struct TimelineRecord {
  std::uint64_t ns = 0;
  std::uint64_t tag = 0;
  std::uint32_t cta = 0;
  std::uint32_t sm = 0;
  std::uint16_t kernel = 0;
  std::uint16_t event = 0;
  std::int32_t aux = 0;
};
static_assert(sizeof(TimelineRecord) == 32, "the summary script reads 32-byte records");

// Whether this build records (LADDER_DIAG_TIMELINE).
bool timeline_compiled();
// Allocates room for `capacity` records (split evenly over the SMs) and points every recording
// unit at it; unsupported in a build without the timeline.
Status timeline_enable(std::uint32_t capacity);
// Enqueues on `stream` (a cudaStream_t) the reset of the records and their counts: what follows
// is recorded.
Status timeline_reset(void* stream);
// The records since the last reset, in no particular order (synchronizes the device); empty when
// not enabled.
Result<std::vector<TimelineRecord>> timeline_take();

}  // namespace ladder::cuda
