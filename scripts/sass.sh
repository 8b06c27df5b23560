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
#
#   scripts/sass.sh --compare OLD NEW [DROP]
#   e.g. scripts/sass.sh --compare /tmp/ladder_main build-cuda/ladder ', ladder::cuda_detail::TcPaddedTile'
#
# Compares two builds kernel by kernel (sm_90a): each function's instructions, registers and
# addresses included, with demangled names, anonymous-namespace hashes ignored and the text DROP
# (a template argument a change added, say) removed from NEW's names. Prints the functions whose
# code differs or that only one build has, then the counts; exits 1 if any function of OLD is
# missing from NEW or differs.
set -euo pipefail
mode=show
if [[ ${1:-} == --compare ]]; then
  mode=compare
  shift
  [[ $# -ge 2 ]] || { sed -n '14,16p' "$0" >&2; exit 2; }
  old=$1 bin=$2 drop=${3:-} arch=sm_90a
  [[ -f $old ]] || { echo "sass.sh: no file $old" >&2; exit 2; }
else
  [[ $# -ge 2 ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
  bin=$1 pattern=$2 arch=${3:-sm_90a}
fi
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
dump=$(mktemp)
old_dump=$(mktemp)
trap 'rm -f "$dump" "$old_dump"' EXIT
if [[ $mode == compare ]]; then
  PATH="$(dirname "$nvdisasm"):$PATH" "$cuobjdump" -sass -arch "$arch" "$old" >"$old_dump"
  PATH="$(dirname "$nvdisasm"):$PATH" "$cuobjdump" -sass -arch "$arch" "$bin" >"$dump"
  exec python3 - "$old_dump" "$dump" "$drop" <<'PY'
import re, subprocess, sys
def functions(path):
    out, name, body = {}, None, []
    for line in open(path, errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name is not None:
                out[name] = body
            name, body = m.group(1), []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m and name is not None:
            body.append(re.sub(r"\s+", " ", m.group(1)))
    if name is not None:
        out[name] = body
    return out
def by_name(funcs, drop):
    names = list(funcs)
    plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    out = {}
    for mangled, readable in zip(names, plain):
        readable = re.sub(r"_GLOBAL__N__\w+", "(anonymous)", readable).replace("> >", ">>")
        if drop:
            readable = readable.replace(drop, "")
        out[readable] = funcs[mangled]
    return out
old = by_name(functions(sys.argv[1]), "")
new = by_name(functions(sys.argv[2]), sys.argv[3])
same = differ = missing = 0
for name in sorted(set(old) | set(new)):
    if name not in new:
        missing += 1
        print("only in OLD:", name)
    elif name not in old:
        print(f"only in NEW ({len(new[name])} instructions):", name)
    elif old[name] == new[name]:
        same += 1
    else:
        differ += 1
        print(f"differs ({len(old[name])} -> {len(new[name])} instructions):", name)
print(f"{same} identical, {differ} differ, {missing} only in OLD, {len(set(new) - set(old))} only in NEW")
sys.exit(1 if differ or missing else 0)
PY
fi
: "${OUT:=$PWD/sass-out}"
mkdir -p "$OUT"
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
