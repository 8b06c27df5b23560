# Unpacks change 45's build (.carry/c45: ladder.xz, gpu_tests.xz) into /tmp/c45 and writes the two
# layout wrappers the bench compares: /tmp/ladder_p (LADDER_GPU_TILES=padded, main's kernels:
# their SASS is main's, checked on the build machine) and /tmp/ladder_s (swizzled).
set -u
mkdir -p /tmp/c45
xz -dc .carry/c45/ladder.xz >/tmp/c45/ladder
xz -dc .carry/c45/gpu_tests.xz >/tmp/c45/ladder_gpu_tests
chmod +x /tmp/c45/*
for v in p:padded s:swizzled; do
  printf '#!/bin/sh\nLADDER_GPU_TILES=%s exec /tmp/c45/ladder "$@"\n' "${v#*:}" >/tmp/ladder_${v%%:*}
  chmod +x /tmp/ladder_${v%%:*}
done
