#!/usr/bin/env bash
# Builds the fuzz targets and runs each for a bounded time (fuzz/README.md).
#   scripts/fuzz.sh [seconds per target] [target ...]   (default 60; targets: fuzz_plane
#   fuzz_engine fuzz_python; default all three)
# The C++ targets: clang, the library compiled with -fsanitize=fuzzer-no-link,address,undefined
# (CMake option LADDER_FUZZ), the targets linked with -fsanitize=fuzzer, in build-fuzz/. Each
# starts from its committed seeds (fuzz/corpus/<target>/, read only) and keeps what it finds in
# build-fuzz/corpus/<target>/. fuzz_python: atheris over the Python module, in a virtual
# environment under build-fuzz/ where the module is built with clang and libFuzzer's coverage
# instrumentation (fuzzer-no-link) and run with atheris's libFuzzer preloaded, so the fuzzer sees
# the library's branches too; pip needs the network the first time.
# Environment: LADDER_FUZZ_ARGS adds libFuzzer flags (e.g. -runs=1000000 for a long run);
# LADDER_FUZZ_PYTHON_VENV names an environment that already has the module installed (scripts/
# test.sh passes its own): only atheris is added to it, and the module is used uninstrumented
# (atheris then sees the Python code's branches only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_plane fuzz_engine fuzz_python)
build="$root/build-fuzz"
jobs=${LADDER_FUZZ_JOBS:-2}

cxx_targets=()
for t in "${targets[@]}"; do [ "$t" = fuzz_python ] || cxx_targets+=("$t"); done
if [ ${#cxx_targets[@]} -gt 0 ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DLADDER_CUDA=OFF -DLADDER_BUILD_TESTS=OFF \
    -DLADDER_FUZZ=ON -DLADDER_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build" -j "$jobs" "${cxx_targets[@]}" >/dev/null
fi

for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "$t: running for ${seconds}s"
  if [ "$t" = fuzz_python ]; then
    preload=()
    if [ -n "${LADDER_FUZZ_PYTHON_VENV:-}" ]; then
      venv=$LADDER_FUZZ_PYTHON_VENV
      "$venv/bin/python" -c 'import atheris' >/dev/null 2>&1 || "$venv/bin/python" -m pip install -q atheris
    else
      venv="$build/python-venv"
      [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
      if ! "$venv/bin/python" -c 'import atheris, ladder' >/dev/null 2>&1; then
        "$venv/bin/python" -m pip install -q --upgrade pip
        "$venv/bin/python" -m pip install -q atheris
        CC=clang CXX=clang++ "$venv/bin/python" -m pip install -q "$root/python" -Ccmake.define.LADDER_CUDA=OFF \
          -Ccmake.define.LADDER_FUZZ=ON -Cbuild-dir="$build/python-build"
      fi
      # The module's coverage hooks are resolved by the libFuzzer that atheris ships.
      preload=(env LD_PRELOAD="$("$venv/bin/python" -c 'import atheris; print(atheris.path())')/ubsan_with_fuzzer.so")
    fi
    log="$build/$t.log"
    # Run from build-fuzz/: from the repository root the source package would shadow the installed one.
    (cd "$build" && "${preload[@]}" "$venv/bin/python" "$root/fuzz/fuzz_python.py" -max_total_time="$seconds" \
      -print_final_stats=1 ${LADDER_FUZZ_ARGS:-} "corpus/$t" "$root/fuzz/corpus/$t") >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
  else
    log="$build/$t.log"
    "$build/$t" -max_total_time="$seconds" -max_len=1024 -print_final_stats=1 -artifact_prefix="$build/" \
      ${LADDER_FUZZ_ARGS:-} \
      "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$log" 2>&1 || { tail -n 40 "$log"; exit 1; }
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|cov: ' "$log" | tail -n 4
done
