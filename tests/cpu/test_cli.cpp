// C6 and the subcommands end to end: the built `ladder` binary run with good and bad arguments,
// checking exit codes (0 ok, 1 runtime failure, 2 bad usage) and that messages name the problem.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>

#include "ladder/engine.hpp"
#include "ladder/version.hpp"

namespace {

struct Outcome {
  int code = -1;
  std::string text;  // stdout and stderr together
};

Outcome run_cli(const std::string& args) {
#ifdef LADDER_CLI_PATH
  const std::string cmd = std::string("'") + LADDER_CLI_PATH + "' " + args + " 2>&1";
  Outcome o;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return o;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) o.text += buf.data();
  const int status = pclose(pipe);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
#else
  (void)args;
  return {};
#endif
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef LADDER_CLI_PATH
    GTEST_SKIP() << "the ladder CLI is not part of this build";
#endif
  }
};

constexpr int kOk = 0, kFailure = 1, kUsage = 2;
// A geometry small enough that every subcommand finishes in well under a second.
const std::string kSmall = " --n-layers 4 --heads 4 --kv-heads 2 --head-dim 32 --window 64 --max-context 1024 ";

#define EXPECT_RUN(args, code_, needle)                                   \
  do {                                                                    \
    const Outcome o_ = run_cli(args);                                     \
    EXPECT_EQ(o_.code, code_) << (args) << "\n" << o_.text;               \
    EXPECT_NE(o_.text.find(needle), std::string::npos) << (args) << "\n" << o_.text; \
  } while (0)

TEST_F(Cli, TopLevel) {
  EXPECT_RUN("", kUsage, "subcommand is required");
  EXPECT_RUN("frobnicate", kUsage, "unknown command 'frobnicate'");
  EXPECT_RUN("--help", kOk, "route ladder");
  EXPECT_RUN("--version", kOk, std::string("ladder ") + ladder::kVersion);
  EXPECT_RUN("--bogus", kUsage, "ladder: error:");
}

TEST_F(Cli, EverySubcommandHasHelp) {
  for (const char* c : {"demo", "routes", "budget", "parity", "bench"}) {
    EXPECT_RUN(std::string(c) + " --help", kOk, "Usage: ladder " + std::string(c));
  }
}

TEST_F(Cli, DemoRunsAndChecksTheReference) {
  EXPECT_RUN("demo --depth 100 --tokens 3" + kSmall, kOk, "PASS");
  EXPECT_RUN("demo --depth 100 --tokens 3" + kSmall, kOk, "route mix (12 layer-steps over 3 tokens)");
  EXPECT_RUN("demo --depth 100 --tokens 2 --disable-vec" + kSmall, kOk, "vec 0 splitk 6 interleaved 2 staged 0");
  EXPECT_RUN("demo --depth 100 --tokens 2 --json" + kSmall, kOk, "\"pass\": true");
  EXPECT_RUN("demo --depth 100 --tokens 2 --device cpu --threads 1" + kSmall, kOk, "1 worker threads");
}

// --kv-dtype: bf16 planes through demo, parity and bench, the dtype named in every output; a
// value other than f16 or bf16 is a usage error naming both.
TEST_F(Cli, KvDtypeFlag) {
  EXPECT_RUN("demo --depth 100 --tokens 2 --kv-dtype bf16" + kSmall, kOk, "PASS");
  EXPECT_RUN("demo --depth 100 --tokens 2 --kv-dtype bf16" + kSmall, kOk, "KV bf16");
  EXPECT_RUN("demo --depth 100 --tokens 1" + kSmall, kOk, "KV f16");  // the default
  EXPECT_RUN("demo --depth 100 --tokens 1 --kv-dtype bf16 --json" + kSmall, kOk, "\"kv_dtype\": \"bf16\"");
  EXPECT_RUN("parity --position 300 --kv-dtype bf16" + kSmall, kOk, "PASS");
  EXPECT_RUN("parity --position 300 --kv-dtype bf16" + kSmall, kOk, "bf16 plane row");
  EXPECT_RUN("parity --position 300 --kv-dtype bf16 --json" + kSmall, kOk, "\"kv_dtype\": \"bf16\"");
  EXPECT_RUN("bench --device cpu --depths 64 --step-depths none --routes vec --reps 2 --kv-dtype bf16" + kSmall, kOk,
             "KV bf16");
  EXPECT_RUN("bench --device cpu --depths 64 --step-depths none --routes vec --reps 2 --kv-dtype bf16 --json" + kSmall,
             kOk, "\"kv_dtype\": \"bf16\"");
  for (const char* c : {"demo", "parity", "bench", "budget"}) {
    EXPECT_RUN(std::string(c) + " --kv-dtype fp8", kUsage, "--kv-dtype: unknown KV dtype 'fp8': use f16 (the default) or bf16");
    EXPECT_RUN(std::string(c) + " --help", kOk, "--kv-dtype");
  }
}

// E3's main job: --batch N decodes N sequences of mixed lengths per call, every layer of every
// sequence (4 layers x 3 sequences x 2 tokens = 24 layer-steps), references checked across them.
TEST_F(Cli, DemoDecodesABatchOfMixedLengths) {
  EXPECT_RUN("demo --depth 100 --tokens 2 --batch 3" + kSmall, kOk, "route mix (24 layer-steps over 2 tokens)");
  EXPECT_RUN("demo --depth 100 --tokens 2 --batch 3" + kSmall, kOk, "depths 100 down to 34");
  EXPECT_RUN("demo --depth 100 --tokens 2 --batch 3 --check-layers 4" + kSmall, kOk, "PASS");
  EXPECT_RUN("demo --depth 100 --tokens 1 --batch 3 --json" + kSmall, kOk, "\"batch\": 3");
  EXPECT_RUN("demo --batch 0", kUsage, "--batch must be in 1..256");
  EXPECT_RUN("demo --batch 257", kUsage, "--batch must be in 1..256");
  EXPECT_RUN("demo --depth 131000 --batch 64 --tokens 1", kUsage, "sequences holds");
}

// E3 rows: each batch size at each step depth, every sequence at the depth and mixed lengths.
TEST_F(Cli, BenchTimesBatchedCalls) {
  EXPECT_RUN("bench --device cpu --depths none --step-depths 96 --no-fallback-step --batch 1,3 --reps 2" + kSmall,
             kOk, "encode, batch 3 mixed");
  EXPECT_RUN("bench --device cpu --depths none --step-depths 96 --no-fallback-step --batch 3 --reps 2 --json" + kSmall,
             kOk, "\"batch\": 3");
  // The rows' engines are sized to the row, and the report says so.
  EXPECT_RUN("bench --device cpu --depths none --step-depths 96 --no-fallback-step --batch 3 --reps 2" + kSmall, kOk,
             "each engine holds max(depth, window) + 1 positions");
}

// --pool-profile: a line per row under the table and a pool_profile object per JSON row; the
// GPU bench refuses it (it profiles the CPU pool).
TEST_F(Cli, BenchProfilesTheWorkerPool) {
  EXPECT_RUN("bench --device cpu --depths 64 --step-depths none --routes vec/growing --reps 2 --pool-profile" + kSmall,
             kOk, "pool layer vec/growing at 64: 2 jobs on");
  EXPECT_RUN("bench --device cpu --depths none --step-depths 96 --no-fallback-step --reps 2 --pool-profile" + kSmall,
             kOk, "pool step step at 96: 2 jobs on");
  EXPECT_RUN("bench --device cpu --depths 64 --step-depths none --routes vec/growing --reps 2 --pool-profile --json" +
                 kSmall,
             kOk, "\"share_before_first_task\"");
  EXPECT_RUN("bench --device cuda --pool-profile", kUsage, "--pool-profile profiles the CPU worker pool");
  EXPECT_RUN("bench --help", kOk, "--pool-profile");
}

TEST_F(Cli, DemoRejectsBadArguments) {
  EXPECT_RUN("demo --tokens 0", kUsage, "--tokens must be in 1..1024");
  EXPECT_RUN("demo --tokens many", kUsage, "--tokens");
  EXPECT_RUN("demo --depth -4", kUsage, "--depth must be >= 0");
  EXPECT_RUN("demo --depth 131072 --tokens 1", kUsage, "past the max context");
  EXPECT_RUN("demo --device gpu", kUsage, "--device");
  EXPECT_RUN("demo --threads -1", kUsage, "--threads");
  EXPECT_RUN("demo --heads 5 --kv-heads 2", kUsage, "multiple of n_kv_heads");
  EXPECT_RUN("demo --check-layers 99", kUsage, "--check-layers");
  // An unsigned seed is not wrapped from a negative one.
  EXPECT_RUN("demo --seed -1", kUsage, "--seed: must be a non-negative integer (got -1)");
  EXPECT_RUN("parity --seed -1", kUsage, "--seed: must be a non-negative integer (got -1)");
  EXPECT_RUN("demo --seed x", kUsage, "--seed");
  if (!ladder::cuda_available()) EXPECT_RUN("demo --device cuda --depth 10" + kSmall, kFailure, "no CUDA");
}

TEST_F(Cli, RoutesPrintsThePredicates) {
  EXPECT_RUN("routes", kOk, "vec_rows");
  // position 31: a 32-row unwrapped ring -> vec; position 32: len 33 -> splitk.
  EXPECT_RUN("routes --positions 31 --layers 0", kOk, "      31     0   swa         vec");
  EXPECT_RUN("routes --positions 32 --layers 0", kOk, "      32     0   swa      splitk");
  // Slack: a partially wrapped ring never takes vec.
  EXPECT_RUN("routes --positions 2100 --layers 0 --ring-slack 5", kOk, "splitk");
  EXPECT_RUN("routes --positions 5000 --layers 0 --stage", kOk, "staged");
  EXPECT_RUN("routes --positions 5000 --layers 3 --disable-vec", kOk, "interleaved");
  EXPECT_RUN("routes --positions 10 --layers 3 --initial-capacity 16 --json", kOk, "\"route\": \"interleaved\"");
  EXPECT_RUN("routes --positions 10 --layers 3 --no-vec-capability --strict", kOk, "vec");
  EXPECT_RUN("routes --positions 1,abc", kUsage, "'abc' is not an integer");
  EXPECT_RUN("routes --positions 131072", kUsage, "outside the allowed range 0..131071");
  EXPECT_RUN("routes --positions 9-3", kUsage, "runs backwards");
  EXPECT_RUN("routes --positions 0-2000000000", kUsage, "--positions");
  EXPECT_RUN("routes --layers 52", kUsage, "--layers: 52 is outside");
  EXPECT_RUN("routes --initial-capacity -3", kUsage, "--initial-capacity");
}

TEST_F(Cli, BudgetReproducesTheChapter) {
  EXPECT_RUN("budget", kOk, "derived from the geometry, not measured");
  EXPECT_RUN("budget", kOk, "1,258,766 tokens (1.26 M)");
  EXPECT_RUN("budget", kOk, "10.90 %");
  EXPECT_RUN("budget --json", kOk, "\"crossover_nope_kv_equals_weights\": 1258766");
  EXPECT_RUN("budget --depths 4096 --nope-period 0", kOk, "never");
  EXPECT_RUN("budget --weight-bytes 0", kOk, "not given");
  EXPECT_RUN("budget --depths 0", kUsage, "--depths");
  EXPECT_RUN("budget --window -1", kUsage, "window must be >= 0");
}

TEST_F(Cli, ParityExplainsEveryDifference) {
  EXPECT_RUN("parity --position 300" + kSmall, kOk, "PASS");
  EXPECT_RUN("parity --position 300" + kSmall, kOk, "identical");
  EXPECT_RUN("parity --position 300" + kSmall, kOk, "current-token bypass");
  // vec reads the full wrapped ring (window 64, position 300: oldest token at slot 45) as two
  // physical spans in logical order, so it gives splitk's bits there (P7).
  EXPECT_RUN("parity --position 300" + kSmall, kOk, "walks logical order, slots 45..63 then 0..44");
  {
    const Outcome o = run_cli("parity --position 300" + kSmall);
    EXPECT_TRUE(std::regex_search(o.text, std::regex("splitk/ring-wrapped/cpu +vs vec/ring-wrapped/cpu +identical")))
        << o.text;
    EXPECT_TRUE(std::regex_search(o.text, std::regex("vec/ring-wrapped/cpu +vs vec/ring-unwrapped/cpu +identical")))
        << o.text;
  }
  EXPECT_RUN("parity --position 300 --ring-slack 3" + kSmall, kOk, "not applicable");
  EXPECT_RUN("parity --position 300 --json" + kSmall, kOk, "\"explained\": true");
  EXPECT_RUN("parity --window 0", kUsage, "finite --window");
  EXPECT_RUN("parity --position -1", kUsage, "--position");
  if (!ladder::cuda_available()) EXPECT_RUN("parity --device cuda --position 100" + kSmall, kFailure, "no usable CUDA");
}

// Every verb answers at once on every argument it accepts or refuses: the hostile values below
// once ran for minutes (budget --n-layers 2000000000), allocated gigabytes (a window far past
// the max context), failed on the command's own defaults (demo --n-layers 2, a bench depth off
// the 32-row grid halfway through the run) or converted a huge double to int. Each must exit
// within kQuick: every one of them answers in under 0.1 s on a 2-core host; the bound leaves room
// for a loaded machine while still catching a run of minutes.
constexpr double kQuickSeconds = 10.0;

#define EXPECT_QUICK(args, code_, needle)                                                         \
  do {                                                                                            \
    const auto t0_ = std::chrono::steady_clock::now();                                            \
    EXPECT_RUN(args, code_, needle);                                                              \
    const double s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); \
    EXPECT_LT(s_, kQuickSeconds) << (args);                                                       \
  } while (0)

TEST_F(Cli, GeometryFlagsHaveUpperBounds) {
  EXPECT_QUICK("budget --n-layers 2000000000", kUsage, "n_layers must be in 1..4096");
  EXPECT_QUICK("budget --n-layers 4097", kUsage, "n_layers must be in 1..4096");
  EXPECT_QUICK("budget --n-layers 4096", kOk, "4096 layers");
  EXPECT_QUICK("budget --heads 8192 --kv-heads 2", kUsage, "n_heads must be in 1..4096");
  EXPECT_QUICK("budget --kv-heads 64", kUsage, "n_kv_heads must be in 1..n_heads");
  EXPECT_QUICK("budget --head-dim 1024", kUsage, "head_dim must be a positive multiple of 4 up to 512");
  EXPECT_QUICK("budget --max-context 2000000000", kUsage, "max_context must be in 1..1073741824");
  EXPECT_QUICK("budget --ring-slack 1073741824", kUsage, "exceeds 1073741824 rows");
  EXPECT_QUICK("budget --n-layers 99999999999", kUsage, "--n-layers");  // past int: a parse error
  EXPECT_QUICK("budget --weight-bytes -5", kUsage, "weight_bytes_per_token must be >= 0");
  EXPECT_QUICK("budget --nope-period -1", kUsage, "NoPE pattern");
}

TEST_F(Cli, WindowPastMaxContextHoldsOnlyMaxContextRows) {
  // The ring holds min(window, max_context) rows: 2048 here, not 131072 (5.4 GB before).
  EXPECT_QUICK("budget --window 131072 --max-context 2048", kOk, "ring capacity 2048");
  EXPECT_QUICK("demo --window 131072 --max-context 2048 --depth 100 --tokens 1 --n-layers 4", kOk, "PASS");
  EXPECT_QUICK("routes --window 131072 --max-context 2048 --positions 2047 --layers 0 --json", kOk,
               "\"capacity\": 2048");
}

TEST_F(Cli, DemoDefaultsFitSmallGeometries) {
  // --check-layers defaults to 4, or every layer when the geometry has fewer.
  EXPECT_QUICK("demo --n-layers 2 --depth 40 --tokens 2 --max-context 1024 --window 64", kOk,
               "reference check: 4 layer outputs");
  EXPECT_QUICK("demo --n-layers 1 --depth 40 --tokens 1 --max-context 1024 --window 64", kOk,
               "reference check: 1 layer outputs");
  EXPECT_QUICK("demo --n-layers 2 --check-layers 3", kUsage, "--check-layers must be in 0..2");
  EXPECT_QUICK("demo --tokens 1025", kUsage, "--tokens must be in 1..1024");
  EXPECT_QUICK("demo --tokens 2147483647 --max-context 1073741824", kUsage, "--tokens must be in 1..1024");
  EXPECT_QUICK("demo --depth 2147483647", kUsage, "past the max context");
  EXPECT_QUICK("demo --max-context 1073741824 --depth 100000000", kUsage, "holds");
}

TEST_F(Cli, BenchRefusesUpFront) {
  EXPECT_QUICK("bench --depths 100 --step-depths none", kUsage, "--depths: 100 is not a multiple of 32");
  EXPECT_QUICK("bench --depths 2048,2049 --step-depths none", kUsage, "2049 is not a multiple of 32");
  EXPECT_QUICK("bench --depths 0", kUsage, "--depths");
  EXPECT_QUICK("bench --depths 262144", kUsage, "outside the allowed range 32..131072");
  EXPECT_QUICK("bench --step-depths 200000", kUsage, "--step-depths: 200000 is outside the allowed range 1..131072");
  EXPECT_QUICK("bench --reps 1001", kUsage, "--reps must be in 1..1000");
  EXPECT_QUICK("bench --reps -1", kUsage, "--reps must be in 1..1000");
  EXPECT_QUICK("bench --rotate 1e300", kUsage, "--rotate must be in 1..64");
  EXPECT_QUICK("bench --rotate nan", kUsage, "--rotate");
  EXPECT_QUICK("bench --rotate 0.5", kUsage, "--rotate must be in 1..64");
  EXPECT_QUICK("bench --engine-max-depth -1", kUsage, "--engine-max-depth must be >= 0");
  EXPECT_QUICK("bench --batch 300", kUsage, "--batch: 300 is outside the allowed range 1..256");
  EXPECT_QUICK("bench --batch 0", kUsage, "--batch");
  EXPECT_QUICK("bench --batch-max-depth -1", kUsage, "--batch-max-depth must be >= 0");
  EXPECT_QUICK("bench --routes warp", kUsage, "unknown route 'warp'");
}

TEST_F(Cli, RoutesAndParityAnswerAtHugePositions) {
  // The plane state comes in closed form: position 2^30 - 1 costs what position 0 costs.
  EXPECT_QUICK("routes --max-context 1073741824 --window 0 --positions 1073741823 --layers 0,3", kOk,
               "1073741823");
  EXPECT_QUICK("routes --positions 0-100000 --layers all", kUsage, "at most 1048576 per run");
  EXPECT_QUICK("routes --initial-capacity 200000", kUsage, "--initial-capacity must be in 0..131072");
  EXPECT_QUICK("parity --max-context 1073741824 --position 1073741823", kUsage, "K values before the run");
  EXPECT_QUICK("parity --position 2147483647", kUsage, "--position must be in 0..131071");
}

}  // namespace
