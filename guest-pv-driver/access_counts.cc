// gpuvm-driver-access-counts: prints how many Bus operations (BAR0/BAR1/BAR3 single accesses and
// block transfers) each guest-driver operation costs on the software GPU. Under full
// virtualization every single access to a trapped BAR is a VM exit, so this table is the driver's
// side of the GPUvm overhead story (docs/GUEST-DRIVER.md quotes it). The counts are deterministic;
// nothing here is timed.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu/sim/compute_engine.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/native_bus.h"

namespace {

using gpuvm::Status;
using namespace gpuvm::guest;

// A compute engine whose grids finish at once: launches cost what the driver does, nothing more.
class InstantEngine final : public gpuvm::sim::ComputeEngine {
 public:
  class Job final : public gpuvm::sim::ComputeJob {
   public:
    gpuvm::sim::SliceOutcome RunSlice() override { return gpuvm::sim::SliceOutcome::kDone; }
    const gpuvm::sim::ComputeFault& fault() const override { return fault_; }
    uint64_t thread_instructions() const override { return 0; }

   private:
    gpuvm::sim::ComputeFault fault_;
  };
  std::unique_ptr<gpuvm::sim::ComputeJob> Start(const gpuvm::sim::ComputeLaunch&,
                                                gpuvm::sim::ChannelMemory*) override {
    return std::make_unique<Job>();
  }
  void FlushCodeCache() override {}
};

void Row(const std::string& what, const BusCounters& c) {
  std::printf("| %-58s | %5llu | %5llu | %5llu | %5llu | %5llu | %5llu | %5llu | %6llu |\n",
              what.c_str(), (unsigned long long)c.reads[0], (unsigned long long)c.writes[0],
              (unsigned long long)(c.reads[1] + c.writes[1]),
              (unsigned long long)(c.block_reads[1] + c.block_writes[1]),
              (unsigned long long)(c.reads[2] + c.writes[2]),
              (unsigned long long)(c.block_reads[2] + c.block_writes[2]),
              (unsigned long long)c.dma_maps, (unsigned long long)c.total());
}

bool Check(const Status& s, const char* what) {
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return s.ok();
}

}  // namespace

int main() {
  NativeGpuOptions o;
  o.device.vram_size = 512ull << 20;
  o.device.compute_engine = std::make_shared<InstantEngine>();
  auto gpu = NativeGpu::Create(o);
  if (!gpu.ok()) return 1;
  // The counting wrapper lives inside the driver; measure init through a second counter: the
  // driver's own counters start at zero when it is created.
  auto driver = Driver::Create((*gpu)->bus());
  if (!driver.ok()) return 1;
  Driver& d = **driver;

  std::printf(
      "Bus operations per guest-driver operation (software GF100, native Bus, interrupts on)\n\n");
  std::printf("| %-58s | %5s | %5s | %5s | %5s | %5s | %5s | %5s | %6s |\n", "operation", "R0",
              "W0", "BAR1", "blk1", "BAR3", "blk3", "dma", "total");
  std::printf("|%s|\n", std::string(134, '-').c_str());
  Row("Driver::Create (probe, BAR3 bootstrap, BAR1, PFIFO)", d.bus_counters());

  auto measure = [&](const std::string& what, const std::function<bool()>& op) {
    const BusCounters before = d.bus_counters();
    if (!op()) std::exit(1);
    Row(what, d.bus_counters() - before);
  };

  std::unique_ptr<Context> ctx;
  measure("CreateContext (space, report page, default channel)", [&] {
    auto c = d.CreateContext();
    if (!c.ok()) return false;
    ctx = std::move(*c);
    return true;
  });
  Channel* ch = ctx->default_channel();
  Channel* extra = nullptr;
  measure("CreateChannel", [&] {
    auto c = ctx->CreateChannel();
    if (!c.ok()) return false;
    extra = *c;
    return Check(extra->Synchronize(), "sync");
  });
  measure("DestroyChannel", [&] { return Check(ctx->DestroyChannel(extra), "destroy"); });

  Allocation small, big, pinned;
  measure("AllocDevice 4 KiB (page table exists)", [&] {
    auto a = ctx->AllocDevice(4096);
    if (!a.ok()) return false;
    small = *a;
    return true;
  });
  measure("AllocDevice 64 MiB (large pages, new table)", [&] {
    auto a = ctx->AllocDevice(64 << 20);
    if (!a.ok()) return false;
    big = *a;
    return true;
  });
  measure("AllocHost 64 MiB (pinned, SYSRAM PTEs)", [&] {
    auto a = ctx->AllocHost(64 << 20);
    if (!a.ok()) return false;
    pinned = *a;
    return true;
  });
  std::vector<uint8_t> host(64 << 20, 1);
  measure("CopyHostToDevice 4 KiB, first (maps buffer in BAR1)",
          [&] { return Check(ch->CopyHostToDevice(small.va, host.data(), 4096), "h2d"); });
  measure("CopyHostToDevice 4 KiB, again (BAR1)",
          [&] { return Check(ch->CopyHostToDevice(small.va, host.data(), 4096), "h2d"); });
  measure("CopyDeviceToHost 4 KiB (BAR1)",
          [&] { return Check(ch->CopyDeviceToHost(host.data(), small.va, 4096), "d2h"); });
  measure("CopyHostToDevice 64 MiB pageable (staged, 2 MiB chunks)",
          [&] { return Check(ch->CopyHostToDevice(big.va, host.data(), 64 << 20), "h2d"); });
  measure("CopyDeviceToHost 64 MiB pageable (staged)",
          [&] { return Check(ch->CopyDeviceToHost(host.data(), big.va, 64 << 20), "d2h"); });
  measure("CopyHostToDevice 64 MiB from pinned (one DMA)",
          [&] { return Check(ch->CopyHostToDevice(big.va, pinned.host, 64 << 20), "h2d"); });
  measure("CopyAsync 64 MiB device->device + Wait", [&] {
    auto f = ch->CopyAsync(big.va, pinned.va, 64 << 20);
    return f.ok() && Check(ch->Wait(*f), "wait");
  });
  measure("Memset32Async 16 MiB + Wait", [&] {
    auto f = ch->Memset32Async(big.va, 7, 4 << 20);
    return f.ok() && Check(ch->Wait(*f), "wait");
  });
  Allocation code;
  measure("LoadCode 4 KiB (alloc + BAR1 upload)", [&] {
    auto c = ctx->LoadCode(std::vector<uint8_t>(4096, 0));
    if (!c.ok()) return false;
    code = *c;
    return true;
  });
  uint8_t params[64] = {};
  LaunchParams lp;
  lp.code_address = code.va;
  lp.grid = {128, 1, 1};
  lp.block = {256, 1, 1};
  lp.params = params;
  measure("Launch (64 B params) + Wait", [&] {
    auto f = ch->Launch(lp);
    return f.ok() && Check(ch->Wait(*f), "wait");
  });
  auto ev = ctx->CreateEvent();
  if (!ev.ok()) return 1;
  measure("Record(event) + Event::Wait",
          [&] { return ch->Record(*ev).ok() && Check((*ev)->Wait(), "event"); });
  measure("Free 4 KiB device allocation (with its BAR1 window)",
          [&] { return Check(ctx->Free(small.va), "free"); });
  measure("Free 64 MiB device allocation", [&] { return Check(ctx->Free(big.va), "free"); });
  measure("Context destruction (channel, memory, space)", [&] {
    ctx.reset();
    return true;
  });
  std::printf(
      "\nR0/W0: BAR0 register reads/writes (PRAMIN included); BAR1/BAR3: single accesses;\n"
      "blk1/blk3: block transfers; dma: host-memory registrations (no BAR access).\n"
      "A fence wait that succeeds reads host memory only: 0 accesses with interrupts; without an\n"
      "interrupt line the driver reads PMC_INTR_HOST once per error_poll_interval (1 ms) of "
      "waiting.\n");
  return 0;
}
