// Every kernel-corpus case (bench/kernels) through the translator and the compute engine, checked
// against its CPU reference (bit-exact for integers; the float tolerances kernel_corpus.cc
// documents).
#include <gtest/gtest.h>

#include "bench/compute/corpus_runner.h"
#include "bench/kernels/kernel_corpus.h"
#include "gpu/sim/compute/simt_engine.h"

namespace gpuvm::ptx {
namespace {

class CorpusRun : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusRun, MatchesTheCpuReference) {
  Result<kernels::Case> c = kernels::MakeCase(GetParam(), kernels::Size::kTest, /*seed=*/7);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  static auto engine = sim::compute::SimtEngine::Create({.workers = 2});
  Result<compute_bench::CaseResult> r = compute_bench::RunCase(*c, *engine);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->thread_instructions, 0u);
}

// The baseline interpreter on one worker gives the same results (a subset keeps the test fast).
TEST(JitCorpusGeneric, SameResultsOnTheBaselineInterpreter) {
  auto engine = sim::compute::SimtEngine::Create(
      {.workers = 1, .interpreter = sim::compute::InterpreterVariant::kGeneric});
  for (const char* name : {"vector_add", "fmmul_tiled", "histogram_shared", "reduce_sum",
                           "calls_recursive", "warp_reduce", "cvt", "bitops"}) {
    Result<kernels::Case> c = kernels::MakeCase(name, kernels::Size::kTest, 3);
    if (!c.ok()) continue;  // a case the corpus does not have
    Result<compute_bench::CaseResult> r = compute_bench::RunCase(*c, *engine);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(JitCorpus, CorpusRun, ::testing::ValuesIn(kernels::CaseNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuvm::ptx
