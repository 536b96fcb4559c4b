// gpuvm-preempt-bench: what preempting a compute grid costs on the software GPU
// (docs/SOFTWARE-GPU.md "Preemption"). For grids of small, medium and large thread blocks (with
// shared and local memory) it runs a kernel that loops long enough never to finish, lets it run two
// slices, and measures medians over repeats of:
//   switch: SaveContext (the whole state of every block in flight) — time and bytes saved —, and
//           Resume of that image (parse, validate, rebuild) — time;
//   drain:  Drain, then slices until no block is in flight — the time that takes (the blocks must
//           finish: it grows with the kernel's length) — and the bytes then saved.
//   yield:  RequestYield 300 us into a 1 ms slice (as PFIFO's PREEMPT of the running channel
//           does) — the time until that slice has parked its blocks and returned.
// A device-level switch is yield + save: it no longer waits out the slice in flight.
//
//   gpuvm-preempt-bench [--workers N] [--repeats R]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu/isa/assembler.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::sim::compute {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Each thread loops `iterations` times through shared memory, a barrier and local memory; drain
// waits for the blocks in flight to run it to the end.
std::string Kernel(uint32_t shared) {
  return ".params 20\n.shared " + std::to_string(shared) + R"(
    .local 64
    s2r.u32 r0, %tid.x
    ld.const.c0.u32 r6, [rz+16]
    shl.u32 r11, r0, 2
    mov.u32 r10, 0
  loop:
    st.shared.u32 [r11], r10
    bar 0
    ld.shared.u32 r12, [r11]
    st.local.u32 [rz+4], r12
    add.u32 r10, r10, 1
    setp.lt.u32 p0, r10, r6
    @p0 bra loop
    exit
  )";
}

struct Config {
  const char* name;
  uint32_t block;
  uint32_t shared;
};

int Main(int argc, char** argv) {
  int workers = 2;
  int repeats = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--workers") {
      workers = std::atoi(argv[i + 1]);
    } else if (flag == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: gpuvm-preempt-bench [--workers N] [--repeats R]\n");
      return 2;
    }
  }
  if (workers < 1 || workers > 64 || repeats < 1 || repeats > 1000) {
    std::fprintf(stderr, "gpuvm-preempt-bench: --workers 1..64, --repeats 1..1000\n");
    return 2;
  }
  const Config configs[] = {
      {"32 threads, 1 KiB shared", 32, 1024},
      {"256 threads, 16 KiB shared", 256, 16 * 1024},
      {"1024 threads, 48 KiB shared", 1024, 48 * 1024},
  };
  auto engine = SimtEngine::Create({.workers = workers});
  std::printf("gpuvm-preempt-bench: %d workers, 1 ms slices, %d repeats, medians; %s interpreter\n",
              workers, repeats, engine->interpreter_name());
  std::printf("%-30s %10s %10s %10s %11s %12s %12s\n", "blocks", "yield us", "save us", "bytes",
              "restore us", "drain ms", "drained B");
  for (const Config& c : configs) {
    Result<std::vector<uint8_t>> code = isa::Assemble(Kernel(c.shared));
    if (!code.ok()) {
      std::fprintf(stderr, "assemble: %s\n", code.status().ToString().c_str());
      return 1;
    }
    FakeChannelMemory mem;
    mem.Map(kTestCodeAddress, code->size());
    mem.Write(kTestCodeAddress, code->data(), code->size());
    ParamBuffer params;
    params.Add(uint64_t{0}).Add(uint64_t{0});
    ComputeLaunch launch;
    launch.grid_x = 64;
    launch.block_x = c.block;
    launch.shared_size = c.shared;
    launch.code_address = kTestCodeAddress;
    launch.shared_base = kTestSharedBase;
    launch.local_base = kTestLocalBase;
    std::vector<double> yield, save, restore, drain;
    size_t bytes = 0, drained_bytes = 0;
    for (int r = 0; r < repeats; ++r) {
      // Long enough that two slices never finish a block (switch), short enough to drain.
      ParamBuffer p = params;
      p.Add(uint32_t{20000});
      mem.Map(kTestParamAddress, p.bytes().size());
      mem.Write(kTestParamAddress, p.bytes().data(), p.bytes().size());
      launch.const_buffers[0] = {true, kTestParamAddress, uint32_t(p.bytes().size())};
      auto job = engine->Start(launch, &mem);
      job->RunSlice();
      {
        std::atomic<bool> running{false};
        Clock::time_point ended;
        std::thread slice([&] {
          running = true;
          job->RunSlice();
          ended = Clock::now();
        });
        while (!running) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        const Clock::time_point asked = Clock::now();
        engine->RequestYield();
        slice.join();
        engine->ClearYield();
        if (ended > asked) yield.push_back(Us(ended - asked));  // else the slice ended first
      }
      std::vector<uint8_t> image;
      const Clock::time_point t0 = Clock::now();
      if (!job->SaveContext(&image)) return 1;
      const Clock::time_point t1 = Clock::now();
      auto resumed = engine->Resume(image, &mem);
      const Clock::time_point t2 = Clock::now();
      save.push_back(Us(t1 - t0));
      restore.push_back(Us(t2 - t1));
      bytes = image.size();
      resumed->Drain();
      const Clock::time_point d0 = Clock::now();
      SliceOutcome o = SliceOutcome::kMore;
      while (o == SliceOutcome::kMore && !resumed->drained()) o = resumed->RunSlice();
      drain.push_back(Us(Clock::now() - d0) / 1000);
      std::vector<uint8_t> rest;
      if (o != SliceOutcome::kMore || !resumed->SaveContext(&rest)) return 1;
      drained_bytes = rest.size();
    }
    std::printf("%-30s %10.1f %10.1f %10zu %11.1f %12.1f %12zu\n", c.name, Median(yield),
                Median(save), bytes, Median(restore), Median(drain), drained_bytes);
  }
  return 0;
}

}  // namespace
}  // namespace gpuvm::sim::compute

int main(int argc, char** argv) { return gpuvm::sim::compute::Main(argc, argv); }
