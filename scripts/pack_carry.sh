#!/usr/bin/env bash
# Packs binaries of a build directory for the device tool (xz, to fit its 64 MiB carry limit),
# after building them (ninja). An object for which ninja recorded no header dependencies is never
# rebuilt when a header changes (2026-12-03: a splitk.cu.o with "#deps 0" kept the old
# tensor-core fold in a carried binary while every other family had the new one; docs/perf.md,
# change 29), so such objects are deleted before the build, and the build must leave none.
#
#   scripts/pack_carry.sh BUILD_DIR DEST_DIR BINARY[=NAME]...
#   e.g. scripts/pack_carry.sh build-cuda .carry/c30 ladder=ladder_b ladder_gpu_tests=gpu_tests_b
#
# Writes DEST_DIR/NAME.xz for each BINARY (NAME defaults to BINARY).
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,11p' "$0" >&2; exit 2; }
build=$1 dest=$2
shift 2
[[ -f $build/build.ninja ]] || { echo "pack_carry.sh: $build is not a ninja build directory" >&2; exit 2; }
# Objects for which ninja recorded no header dependencies: never rebuilt when a header changes.
lost_deps() { ninja -C "$build" -t deps | grep -E '^[^ ].*: #deps 0,' | cut -d: -f1 || true; }
# Deleted first, so that the build below compiles them again and records their dependencies.
for obj in $(lost_deps); do
  echo "pack_carry.sh: $obj had no recorded dependencies; rebuilding it" >&2
  rm -f "$build/$obj"
done
targets=()
for spec in "$@"; do targets+=("${spec%%=*}"); done
ninja -C "$build" "${targets[@]}" >&2
lost=$(lost_deps)
if [[ -n $lost ]]; then
  echo "pack_carry.sh: objects still without recorded dependencies after the build:" >&2
  echo "$lost" | sed 's/^/  /' >&2
  exit 1
fi
mkdir -p "$dest"
for spec in "$@"; do
  bin=${spec%%=*}
  name=${spec#*=}
  [[ -x $build/$bin ]] || { echo "pack_carry.sh: no executable $build/$bin" >&2; exit 1; }
  xz -T0 -c "$build/$bin" >"$dest/$name.xz"
  echo "$dest/$name.xz ($(du -h "$dest/$name.xz" | cut -f1))"
done
