#include "aggregator/control/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm::control {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(ControlMetricsTest, EveryFamilyIsDeclaredAndEveryVmLabelled) {
  sched::DispatcherStats stats;
  stats.started = 7;
  stats.completed = 6;
  stats.scheduler.policy = sched::PolicyKind::kCredit;
  sched::VmStats v;
  v.vm = 2;
  v.share_percent = 25;
  v.gpu_time = std::chrono::milliseconds(1500);
  v.completed = 40;
  v.queue_depth = 3;
  v.usage_100ms = 0.5;
  v.paused = true;
  stats.scheduler.vms = {v};
  stats.killed_by_vm[2] = 5;
  VmDescription a;  // scheduled
  a.id = 2;
  a.name = "web";
  a.mode = "fv-optimized";
  a.vram_bytes = 128ull << 20;
  a.vram_used_bytes = 2ull << 20;
  a.channels = 16;
  a.traps = 12345;
  a.refused = {{"mmio", 4}, {"registers", 0}};
  VmDescription b;  // pass-through: the scheduler does not know it
  b.id = 3;
  b.name = "odd \"name\\";
  b.mode = "pt";
  const std::string text = PrometheusText(stats, {a, b});
  EXPECT_TRUE(Has(text, "# TYPE gpuvm_vm_gpu_seconds_total counter")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_scheduler_policy{policy=\"credit\"} 1")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_dispatcher_started_total 7")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vms 2")) << text;
  const std::string labels = "{id=\"2\",vm=\"web\",mode=\"fv-optimized\"";
  EXPECT_TRUE(Has(text, "gpuvm_vm_gpu_seconds_total" + labels + "} 1.5")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_share_ratio" + labels + "} 0.25")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_traps_total" + labels + "} 12345")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_vram_used_bytes" + labels + "} 2097152")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_queued_submissions" + labels + "} 3")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_gpu_usage_ratio" + labels + ",window=\"100ms\"} 0.5")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_refused_total" + labels + ",kind=\"mmio\"} 4")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_paused" + labels + "} 1")) << text;
  EXPECT_TRUE(Has(text, "gpuvm_vm_killed_submissions_total" + labels + "} 5")) << text;
  // The pt VM: memory and traps, no scheduling samples; its name escaped.
  const std::string odd = "{id=\"3\",vm=\"odd \\\"name\\\\\",mode=\"pt\"}";
  EXPECT_TRUE(Has(text, "gpuvm_vm_traps_total" + odd + " 0")) << text;
  EXPECT_EQ(text.find("gpuvm_vm_gpu_seconds_total" + odd), std::string::npos) << text;
  // Each family is declared once.
  size_t at = 0, types = 0;
  while ((at = text.find("# TYPE gpuvm_vm_traps_total ", at)) != std::string::npos) ++types, ++at;
  EXPECT_EQ(types, 1u);
}

TEST(ControlMetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(PrometheusLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(PrometheusLabelValue("plain@opt,256"), "plain@opt,256");
}

}  // namespace
}  // namespace gpuvm::control
