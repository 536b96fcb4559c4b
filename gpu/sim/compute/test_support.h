// Test support for the compute engine: a ChannelMemory backed by host pages (mapped, unmapped,
// read-only on request) and a helper that writes a kernel and its parameters into it, launches, and
// runs slices to the end. Used by the engine's tests, the translator's tests, the fuzz target and
// the compute benchmark; not linked into production code.
//
// Threading: Map/Unmap/Write/Read are for the test's thread while no job runs; Translate is
// thread-safe (lookups only) as the ChannelMemory contract requires.
#ifndef GPUVM_GPU_SIM_COMPUTE_TEST_SUPPORT_H_
#define GPUVM_GPU_SIM_COMPUTE_TEST_SUPPORT_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "gpu/isa/isa.h"
#include "gpu/sim/compute_engine.h"

namespace gpuvm::sim::compute {

class FakeChannelMemory final : public ChannelMemory {
 public:
  explicit FakeChannelMemory(uint64_t space_id = 1) : space_id_(space_id) {}

  // Maps the pages covering [va, va + size) to zeroed host memory (keeps pages already mapped).
  void Map(uint64_t va, uint64_t size, bool writable = true) {
    for (uint64_t page = va / kPageSize; page * kPageSize < va + size; ++page) {
      Page& p = pages_[page];
      if (!p.data) p.data = std::make_unique<uint8_t[]>(kPageSize);
      p.writable = writable;
    }
  }
  void Unmap(uint64_t va, uint64_t size) {
    for (uint64_t page = va / kPageSize; page * kPageSize < va + size; ++page) pages_.erase(page);
  }
  void SetWritable(uint64_t va, uint64_t size, bool writable) {
    for (uint64_t page = va / kPageSize; page * kPageSize < va + size; ++page)
      pages_.at(page).writable = writable;
  }
  // Host-side access (ignores protection; the pages must be mapped).
  void Write(uint64_t va, const void* data, size_t len) {
    const uint8_t* src = static_cast<const uint8_t*>(data);
    while (len > 0) {
      const size_t n = std::min<size_t>(len, kPageSize - va % kPageSize);
      memcpy(pages_.at(va / kPageSize).data.get() + va % kPageSize, src, n);
      va += n;
      src += n;
      len -= n;
    }
  }
  void Read(uint64_t va, void* out, size_t len) const {
    uint8_t* dst = static_cast<uint8_t*>(out);
    while (len > 0) {
      const size_t n = std::min<size_t>(len, kPageSize - va % kPageSize);
      memcpy(dst, pages_.at(va / kPageSize).data.get() + va % kPageSize, n);
      va += n;
      dst += n;
      len -= n;
    }
  }
  template <typename T>
  void WriteArray(uint64_t va, const std::vector<T>& values) {
    Write(va, values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> ReadArray(uint64_t va, size_t count) const {
    std::vector<T> out(count);
    Read(va, out.data(), count * sizeof(T));
    return out;
  }

  uint8_t* Translate(uint64_t va, uint32_t len, bool write, MemoryFault* fault) override {
    translations_.fetch_add(1, std::memory_order_relaxed);
    fault->va = va;
    fault->write = write;
    if (len == 0 || len > kPageSize || va % kPageSize + len > kPageSize) {
      fault->reason = gf100::FaultReason::kVspaceLimit;
      return nullptr;
    }
    auto it = pages_.find(va / kPageSize);
    if (it == pages_.end()) {
      fault->reason = gf100::FaultReason::kPageNotPresent;
      return nullptr;
    }
    if (write && !it->second.writable) {
      fault->reason = gf100::FaultReason::kPageReadOnly;
      return nullptr;
    }
    return it->second.data.get() + va % kPageSize;
  }
  uint64_t AddressSpaceId() const override { return space_id_; }
  uint64_t translations() const { return translations_.load(std::memory_order_relaxed); }

 private:
  struct Page {
    std::unique_ptr<uint8_t[]> data;
    bool writable = true;
  };
  const uint64_t space_id_;
  std::map<uint64_t, Page> pages_;
  std::atomic<uint64_t> translations_{0};
};

// Where TestLaunch puts things in the fake address space (our choice for tests).
inline constexpr uint64_t kTestCodeAddress = 0x00100000;
inline constexpr uint64_t kTestParamAddress = 0x00200000;
inline constexpr uint64_t kTestDataAddress = 0x01000000;
inline constexpr uint32_t kTestSharedBase = 0xfe000000;
inline constexpr uint32_t kTestLocalBase = 0xff000000;

// Kernel parameters laid out as PTX does (each at its natural alignment, in order).
class ParamBuffer {
 public:
  template <typename T>
  ParamBuffer& Add(T value) {
    size_t align = sizeof(T);
    bytes_.resize((bytes_.size() + align - 1) / align * align);
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    memcpy(bytes_.data() + at, &value, sizeof(T));
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

struct TestLaunchResult {
  SliceOutcome outcome = SliceOutcome::kMore;
  ComputeFault fault;
  uint64_t thread_instructions = 0;
  int slices = 0;
};

// Writes `image` at kTestCodeAddress and `params` into constant bank 0 at kTestParamAddress,
// launches grid x block with `shared` bytes of shared memory and runs slices until the job ends.
inline TestLaunchResult RunTestKernel(ComputeEngine& engine, FakeChannelMemory& memory,
                                      std::span<const uint8_t> image, const ParamBuffer& params,
                                      std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
                                      uint32_t shared = 0, ComputeLaunch* overrides = nullptr) {
  memory.Map(kTestCodeAddress, image.size());
  memory.Write(kTestCodeAddress, image.data(), image.size());
  ComputeLaunch launch;
  if (overrides) launch = *overrides;
  launch.grid_x = grid[0];
  launch.grid_y = grid[1];
  launch.grid_z = grid[2];
  launch.block_x = block[0];
  launch.block_y = block[1];
  launch.block_z = block[2];
  launch.shared_size = shared;
  if (!overrides) {
    launch.code_address = kTestCodeAddress;
    launch.entry_offset = 0;
    launch.shared_base = kTestSharedBase;
    launch.local_base = kTestLocalBase;
  }
  if (!params.bytes().empty() && !launch.const_buffers[0].valid) {
    memory.Map(kTestParamAddress, params.bytes().size());
    memory.Write(kTestParamAddress, params.bytes().data(), params.bytes().size());
    launch.const_buffers[0] = {true, kTestParamAddress,
                               static_cast<uint32_t>(params.bytes().size())};
  }
  std::unique_ptr<ComputeJob> job = engine.Start(launch, &memory);
  TestLaunchResult result;
  do {
    result.outcome = job->RunSlice();
    ++result.slices;
  } while (result.outcome == SliceOutcome::kMore);
  result.fault = job->fault();
  result.thread_instructions = job->thread_instructions();
  return result;
}

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_TEST_SUPPORT_H_
