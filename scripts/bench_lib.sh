# Shell helpers of the timing scripts (bench_ab.sh, bench_variants.sh); sourced, not run.

# unpack_bin PATH: a path to an executable, unpacking NAME.xz first (carried binaries are xz'd to
# fit the device tool's 64 MiB carry limit) to /tmp/unpacked/<the .xz file's absolute path with
# / as _>/NAME: one place per carried file, so two binaries of one name (.carry/main/ladder.xz
# and .carry/c79/ladder.xz) never overwrite each other. 2026-12-07: both went to /tmp/ladder and
# an A/B timed the second against itself.
unpack_bin() {
  if [[ $1 == *.xz ]]; then
    local dir dst
    dir=/tmp/unpacked/$(realpath "$1" | tr / _)
    dst=$dir/$(basename "${1%.xz}")
    mkdir -p "$dir" && xz -dc "$1" >"$dst" && chmod +x "$dst" && echo "$dst"
  else
    echo "$1"
  fi
}
