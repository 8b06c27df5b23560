// The bench's batch rows (tools/bench_common.cpp, add_batch_rows): a batch this machine cannot
// hold becomes a "not measured" note under the table, not a lost report (2026-12-07: batch 64 at
// 131,072 did not fit an 80 GB H100 and the whole report was lost). The failure is a real one of
// the engine's: fault injection at its next allocation point, inside the row's timed calls.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "batch_sweep.hpp"
#include "bench.hpp"
#include "ladder/fault_injection.hpp"

namespace ladder {
namespace {

bench::Options batch_options_for(std::vector<int> batches) {
  bench::Options o;
  o.step_depths = {96};
  o.batches = std::move(batches);
  o.reps = 2;
  return o;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const std::string& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

// Engines of the rows, counted; the engine of row `fail_row` (0-based, in the order the rows are
// made: per batch, same depth then mixed lengths) fails at its next allocation, which its first
// sequence's planes reach.
bench::MakeEngine failing_at(int fail_row, int& made) {
  return [fail_row, &made](const Geometry& g, const EngineOptions& eo) -> Result<std::unique_ptr<Engine>> {
    Result<std::unique_ptr<Engine>> e = Engine::create(g, eo);
    if (e && made == fail_row) testing::fail_allocation_point(0);
    ++made;
    return e;
  };
}

TEST(BenchBatchRows, ABatchThatDoesNotFitIsANoteAndTheOtherRowsStay) {
  const Geometry g = test::batch_geometry();
  const bench::Options o = batch_options_for({1, 3});
  std::vector<bench::Row> rows;
  std::vector<std::string> notes;
  int made = 0;
  // Rows: batch 1 same depth (0), batch 1 mixed (1), batch 3 same depth (2), batch 3 mixed (3).
  const Status s = bench::add_batch_rows(g, Device::cpu, o, rows, notes, {}, failing_at(2, made));
  testing::fail_allocation_point(-1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(made, 4) << "every row's engine was made";
  ASSERT_EQ(rows.size(), 3u) << "the failed row is missing, the others measured";
  EXPECT_EQ(rows[0].name, "encode, batch 1");
  EXPECT_EQ(rows[1].name, "encode, batch 1 mixed");
  EXPECT_EQ(rows[2].name, "encode, batch 3 mixed") << "the row after the failed one still measured";
  for (const bench::Row& r : rows) EXPECT_GT(r.median_us, 0.0) << r.name;
  EXPECT_TRUE(any_contains(notes, "engine encode, batch 3 (same depth, host memory) at depth 96: not measured:"))
      << ::testing::PrintToString(notes);
}

TEST(BenchBatchRows, OtherFailuresStillFailTheReport) {
  const Geometry g = test::batch_geometry();
  const bench::Options o = batch_options_for({2});
  std::vector<bench::Row> rows;
  std::vector<std::string> notes;
  const bench::MakeEngine refuse = [](const Geometry&, const EngineOptions&) -> Result<std::unique_ptr<Engine>> {
    return make_error(ErrorCode::invalid_argument, "a refused geometry");
  };
  const Status s = bench::add_batch_rows(g, Device::cpu, o, rows, notes, {}, refuse);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(rows.empty());
}

}  // namespace
}  // namespace ladder
