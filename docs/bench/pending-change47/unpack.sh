# Unpacks change 47's build (.carry/c47: ladder.xz, gpu_tests.xz) into /tmp/c47 with the two
# stream wrappers the bench compares, /tmp/ladder_slot (LADDER_GPU_STREAM=slot: main's kernels,
# SASS checked on the build machine) and /tmp/ladder_walk (across_slots), and change 48's CLI
# (.carry/v2/ladder.xz, main + the L2 evict-first hint) as /tmp/ladder_l2, and the partial-traffic
# probe (.carry/p49/ladder.xz: probe49.patch, one partial per workgroup, wrong values, timing
# only) as /tmp/ladder_p49.
set -u
mkdir -p /tmp/c47
xz -dc .carry/c47/ladder.xz >/tmp/c47/ladder
xz -dc .carry/c47/gpu_tests.xz >/tmp/c47/ladder_gpu_tests
xz -dc .carry/v2/ladder.xz >/tmp/ladder_l2
xz -dc .carry/p49/ladder.xz >/tmp/ladder_p49
chmod +x /tmp/c47/* /tmp/ladder_l2 /tmp/ladder_p49
for v in slot walk; do
  printf '#!/bin/sh\nLADDER_GPU_STREAM=%s exec /tmp/c47/ladder "$@"\n' "$v" >/tmp/ladder_$v
  chmod +x /tmp/ladder_$v
done
