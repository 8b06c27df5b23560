#!/usr/bin/env bash
# The SASS of chosen kernels, on the build machine (no GPU needed): cuobjdump and nvdisasm come
# from PyPI (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm; the CUDA toolkit here ships neither),
# installed once under $LADDER_SASS_TOOLS (default ~/.cache/ladder-sass).
#
#   scripts/sass.sh BINARY_OR_OBJECT PATTERN [ARCH]
#   e.g. scripts/sass.sh build-cuda/ladder \
#          'producer_tc_kernel_indirect.*FusedRows.*KernelFamilyE4.*KvDtypeE0'
#
# For every function whose mangled name matches PATTERN (an extended regex) in the ARCH cubin
# (default sm_90a) it prints the name, the instruction count, the opcodes by count, and writes
# the function's SASS to $OUT/<n>.sass (default ./sass-out).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
bin=$1 pattern=$2 arch=${3:-sm_90a}
[[ -f $bin ]] || { echo "sass.sh: no file $bin" >&2; exit 2; }
tools=${LADDER_SASS_TOOLS:-$HOME/.cache/ladder-sass}
find_tool() { find "$tools" -name "$1" -type f -perm -u+x 2>/dev/null | head -1; }
if [[ -z $(find_tool cuobjdump) || -z $(find_tool nvdisasm) ]]; then
  echo "sass.sh: installing cuobjdump and nvdisasm from PyPI into $tools" >&2
  python3 -m pip install -q --target "$tools" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2
fi
cuobjdump=$(find_tool cuobjdump)
nvdisasm=$(find_tool nvdisasm)
if [[ -z $cuobjdump || -z $nvdisasm ]]; then
  echo "sass.sh: cuobjdump or nvdisasm missing under $tools" >&2
  exit 1
fi
: "${OUT:=$PWD/sass-out}"
mkdir -p "$OUT"
dump=$(mktemp)
trap 'rm -f "$dump"' EXIT
PATH="$(dirname "$nvdisasm"):$PATH" "$cuobjdump" -sass -arch "$arch" "$bin" >"$dump"
python3 - "$dump" "$pattern" "$OUT" <<'PY'
import collections, re, sys
dump, pattern, out = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
name, body, found = None, [], 0
def flush():
    global found
    if name is None or not pattern.search(name):
        return
    found += 1
    text = "".join(body)
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", text)
    path = f"{out}/{found}.sass"
    open(path, "w").write(name + "\n" + text)
    print(f"{name}\n  {len(ops)} instructions -> {path}")
    print("  " + ", ".join(f"{k} {v}" for k, v in collections.Counter(ops).most_common(24)))
for line in open(dump, errors="replace"):
    m = re.search(r"Function : (\S+)", line)
    if m:
        flush()
        name, body = m.group(1), []
    elif name is not None:
        body.append(line)
flush()
if not found:
    sys.exit(f"sass.sh: no function matches {pattern.pattern}")
PY
