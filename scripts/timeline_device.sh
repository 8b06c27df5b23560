#!/usr/bin/env bash
# On the GPU machine: `ladder bench` from a diagnostic build (cmake -DLADDER_DIAG_TIMELINE=ON,
# docs/gpu.md) with LADDER_TIMELINE_DIR set, then scripts/timeline_summary.py over the marks it
# wrote. The marks come back as one archive (the device tool returns at most eight files).
#
#   OUT=DIR scripts/timeline_device.sh LADDER_BIN [ladder bench flags...]
#
# LADDER_BIN may be an .xz (unpacked first). Writes DIR/timeline-bench.txt (the bench's table),
# DIR/timeline-summary.txt and DIR/timeline.tar.xz (the .bin and .tags files).
set -uo pipefail
[[ $# -ge 1 && -n ${OUT:-} ]] || { sed -n '2,10p' "$0" >&2; exit 2; }
bin=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $bin == *.xz ]]; then
  xz -dc "$bin" >/tmp/ladder_timeline && chmod +x /tmp/ladder_timeline && bin=/tmp/ladder_timeline
fi
marks=$(mktemp -d)
mkdir -p "$OUT"
LADDER_TIMELINE_DIR=$marks "$bin" bench --device cuda --quiet "$@" >"$OUT/timeline-bench.txt" 2>&1
rc=$?
python3 "$root/scripts/timeline_summary.py" "$marks" >"$OUT/timeline-summary.txt" 2>&1
tar -C "$marks" -cJf "$OUT/timeline.tar.xz" .
cat "$OUT/timeline-summary.txt"
exit $rc
