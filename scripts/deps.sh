# Sourced by demo.sh and test.sh: installs what a fresh Debian 12 machine lacks to build ladder,
# and points CMake at nvcc when the CUDA toolkit is installed but not on PATH.

# Debian packages the build needs: compiler, build tools, and the header-only libraries the
# library, CLI and tests use (GoogleTest, CLI11, fmt, nlohmann json).
LADDER_APT_PACKAGES=(cmake ninja-build g++ libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev)

ladder_need_install() {
  local tool header
  for tool in cmake ninja g++; do
    command -v "$tool" >/dev/null 2>&1 || return 0
  done
  for header in gtest/gtest.h CLI/CLI.hpp fmt/format.h nlohmann/json.hpp; do
    [ -e "/usr/include/$header" ] || return 0
  done
  return 1
}

ladder_apt_install() {
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "error: need root or sudo to install: $*" >&2; return 1; }
    sudo=(sudo)
  fi
  echo "installing with apt-get: $*" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ladder_ensure_deps() {
  if ladder_need_install; then
    ladder_apt_install "${LADDER_APT_PACKAGES[@]}"
  fi
  if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
}

ladder_jobs() { nproc 2>/dev/null || echo 2; }
