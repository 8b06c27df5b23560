#!/usr/bin/env bash
# Build and run every test: the GoogleTest suites through CTest (GPU tests skip without a GPU),
# the same suites again under AddressSanitizer + UndefinedBehaviorSanitizer, the CPU suites
# under ThreadSanitizer (scripts/tsan.sh), and, when python/tests exists, the Python wheel (built,
# installed on its own and checked) and the Python tests.
# Installs missing build dependencies with apt-get.
# Environment: LADDER_BUILD_DIR (default build/; the sanitizer build goes to <it>-asan),
# LADDER_CUDA (AUTO, ON or OFF; default AUTO).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=deps.sh
source "$root/scripts/deps.sh"
ladder_ensure_deps
jobs=$(ladder_jobs)
build=${LADDER_BUILD_DIR:-$root/build}

echo "== build and test ($build)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA="${LADDER_CUDA:-AUTO}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

# Sanitizers instrument host code only; the CUDA device is left out of this build (its tests
# cannot run without a GPU, and the normal build above already compiles it).
echo "== build and test under AddressSanitizer + UndefinedBehaviorSanitizer ($build-asan)"
cmake -S "$root" -B "$build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLADDER_CUDA=OFF \
  -DLADDER_SANITIZE=address,undefined >/dev/null
cmake --build "$build-asan" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$build-asan" --output-on-failure -j "$jobs"

if [ -d "$root/python/tests" ]; then
  echo "== Python wheel and tests (pip wheel ./python; python/tests, bench/tests)"
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    ladder_apt_install python3-venv python3-pip
  fi
  venv="$build/python-venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  # The module is built as a user builds it, `pip wheel ./python`, CPU only, into a build folder
  # kept between runs ($build/python-build: an unchanged tree rebuilds in seconds). The build
  # tools come from this venv (--no-build-isolation), so that folder's CMake cache stays valid.
  # numpy too: the wheel's own check below imports it (the wheel's dependency, which the
  # --no-deps install of that check does not bring).
  "$venv/bin/python" -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" numpy
  wheels="$build/python-wheel"
  rm -rf "$wheels"
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$wheels" "$root/python" \
    -Ccmake.define.LADDER_CUDA=OFF -Cbuild-dir="$build/python-build"
  wheel=$(echo "$wheels"/ladder-*.whl)
  # The wheel alone (pip install --target), imported by a fresh process started outside the
  # source tree: version and one attend against numpy f64 (tests/package/check_wheel.py).
  version=$(sed -n 's/^project(ladder VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
  scratch=$(mktemp -d)
  "$venv/bin/python" -m pip install -q --no-deps --no-index --target "$scratch/site" "$wheel"
  (cd "$scratch" && "$venv/bin/python" "$root/tests/package/check_wheel.py" "$scratch/site" "$version")
  rm -rf "$scratch"
  # The same wheel into the test venv. [transformers] brings torch and transformers 5.x from
  # PyPI for the tensor, cache and transformers tests, [bench] matplotlib for bench/plot.py:
  # downloaded into this venv on the first run only (torch with its CUDA libraries, about 5.6 GB;
  # 93 s on the development machine), found installed on later runs. The second install puts
  # this build's wheel in place of an earlier one of the same version.
  "$venv/bin/python" -m pip install -q "$wheel[test,transformers,bench]"
  "$venv/bin/python" -m pip install -q --no-deps --force-reinstall "$wheel"
  # Run from the build folder: from python/ the source package would shadow the installed one.
  # A suite that collects no tests exits 5 and fails here too: a silently empty suite is a defect.
  (cd "$build" && "$venv/bin/python" -m pytest -q "$root/python/tests")
  # bench/plot.py on the committed benchmark outputs (docs/bench/) and on bad input.
  (cd "$build" && "$venv/bin/python" -m pytest -q "$root/bench/tests")
fi

# The CPU suites again under ThreadSanitizer: the worker pool, set_threads while decoding and
# every producer's task split must be free of data races.
echo "== build and test under ThreadSanitizer ($build-tsan)"
LADDER_BUILD_DIR="$build" bash "$root/scripts/tsan.sh"

# The fuzz targets (fuzz/README.md), each for a bounded time from its committed seeds:
# fuzz_plane and fuzz_engine (libFuzzer; the library instrumented, under ASan + UBSan) need clang
# and its runtime, installed when missing; fuzz_python (atheris) runs in the Python tests'
# environment above, where the module is already installed.
seconds=${LADDER_FUZZ_SECONDS:-25}
echo "== fuzz (${seconds} s per target)"
if ! command -v clang++ >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  ladder_apt_install clang libclang-rt-dev
fi
fuzz_targets=(fuzz_plane fuzz_engine)
if [ -x "$build/python-venv/bin/python" ]; then
  fuzz_targets+=(fuzz_python)
fi
LADDER_FUZZ_PYTHON_VENV="$build/python-venv" bash "$root/scripts/fuzz.sh" "$seconds" "${fuzz_targets[@]}"
echo "== all tests passed"
