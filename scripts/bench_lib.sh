# Shell helpers of the timing scripts (bench_ab.sh, bench_variants.sh); sourced, not run.

# unpack_bin PATH: a path to an executable, unpacking NAME.xz to /tmp/NAME first (carried
# binaries are xz'd to fit the device tool's 64 MiB carry limit).
unpack_bin() {
  if [[ $1 == *.xz ]]; then
    local dst
    dst=/tmp/$(basename "${1%.xz}")
    xz -dc "$1" >"$dst" && chmod +x "$dst" && echo "$dst"
  else
    echo "$1"
  fi
}
