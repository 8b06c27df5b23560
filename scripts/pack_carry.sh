#!/usr/bin/env bash
# Packs binaries of a build directory for the device tool (xz, to fit its 64 MiB carry limit),
# after building them (ninja) and checking that every object of the directory has its header
# dependencies recorded. An object without them is never rebuilt when a header changes
# (2026-12-03: a splitk.cu.o with "#deps 0" kept the old tensor-core fold in a carried binary
# while every other family had the new one; docs/perf.md, change 29).
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
targets=()
for spec in "$@"; do targets+=("${spec%%=*}"); done
# Brings the binaries up to date (a no-op beyond CMake's glob check when they are).
ninja -C "$build" "${targets[@]}" >&2
lost=$(ninja -C "$build" -t deps | grep -E '^[^ ].*: #deps 0,' | cut -d: -f1 || true)
if [[ -n $lost ]]; then
  echo "pack_carry.sh: objects without recorded dependencies (delete them and rebuild):" >&2
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
