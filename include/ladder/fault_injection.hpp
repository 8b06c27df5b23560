// Fault injection at the library's allocation points, for tests of the all-or-nothing rule
// (issue 8: a refused or failed token leaves every sequence's planes exactly as they were and the
// next call works). Each place where a call allocates (a plane's rows, a growing plane's larger
// rows, a step's prepared appends, the trace, a call's scratch, a device's staging and graphs)
// asks injected_allocation_failure() first and, when it answers true, fails as that allocation
// would: with out_of_memory, before anything is stored. Disarmed (the default) it is one relaxed
// atomic load per point, and no point is on a per-row or per-kernel path.
#pragma once

namespace ladder::testing {

// Arms the points: the n-th point passed from now fails (n = 0: the next one), once; every
// point after it succeeds again. n < 0 disarms. Each call starts the count again.
void fail_allocation_point(long long n);

// Points passed since the last fail_allocation_point call while armed: the failed one included,
// the ones after it not counted (a call that ended before its n-th point passed fewer than n + 1).
long long allocation_points_passed();

}  // namespace ladder::testing

namespace ladder::detail {

// Called by each allocation point before it allocates: true when this point is the armed one.
bool injected_allocation_failure();

}  // namespace ladder::detail
