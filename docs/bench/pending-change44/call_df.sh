# One call for both pending GPU probes: variant D's GPU suite (pending-change43/call_d.sh's first
# half), then call_f.sh (F's suite and sanitizers, then A, D and F interleaved). Carry
# [".carry/c43"]; ~8 min. `call_df.sh g`: G (D + F) in F's place.
set -u
bash docs/bench/pending-change44/suite.sh d
bash docs/bench/pending-change44/call_f.sh "${1:-f}"
