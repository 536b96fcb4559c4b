// Device printf in the compute engine: DevicePrintf on a scripted memory (the record it writes, the
// limits, hostile formats, pointers and FIFO headers), and the vprintf instruction in running
// kernels (one record per thread, lane order, the FIFO filling up, faults), on both interpreter
// variants with one and two workers.
#include "gpu/sim/compute/device_printf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/isa/assembler.h"
#include "gpu/isa/device_printf.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::sim::compute {
namespace {

// A flat memory of 4 KiB pages: unmapped addresses fault (Read/GlobalWord fail and count it).
class ScriptedMemory final : public PrintfMemory {
 public:
  void Map(uint64_t va, uint64_t size) {
    for (uint64_t p = va / 4096; p * 4096 < va + size; ++p) pages_[p].resize(4096, 0);
  }
  void Write(uint64_t va, const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i)
      pages_.at((va + i) / 4096)[(va + i) % 4096] = static_cast<const uint8_t*>(data)[i];
  }
  template <typename T>
  void Put(uint64_t va, T v) {
    Write(va, &v, sizeof v);
  }
  void PutString(uint64_t va, const std::string& s) { Write(va, s.c_str(), s.size() + 1); }
  std::vector<uint8_t> Bytes(uint64_t va, size_t n) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = pages_.at((va + i) / 4096)[(va + i) % 4096];
    return out;
  }
  uint64_t Get64(uint64_t va) {
    uint64_t v;
    std::memcpy(&v, Bytes(va, 8).data(), 8);
    return v;
  }

  bool Read(uint64_t addr, uint32_t n, uint64_t* value) override {
    ++reads;
    if (addr % n != 0) return Fault();
    auto it = pages_.find(addr / 4096);
    if (it == pages_.end()) return Fault();
    *value = 0;
    std::memcpy(value, it->second.data() + addr % 4096, n);
    return true;
  }
  uint64_t* GlobalWord(uint64_t addr) override {
    auto it = pages_.find(addr / 4096);
    if (addr % 8 != 0 || it == pages_.end()) {
      Fault();
      return nullptr;
    }
    return reinterpret_cast<uint64_t*>(it->second.data() + addr % 4096);
  }

  int faults = 0;
  uint64_t reads = 0;

 private:
  bool Fault() {
    ++faults;
    return false;
  }
  std::map<uint64_t, std::vector<uint8_t>> pages_;  // vectors of 4096: 8-aligned storage
};

constexpr uint64_t kFormat = 0x10000;
constexpr uint64_t kArgs = 0x20000;
constexpr uint64_t kString = 0x30000;
constexpr uint64_t kFifo = 0x40000;

class DevicePrintfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint64_t va : {kFormat, kArgs, kString}) mem_.Map(va, 0x10000);
    SetFifo(0x10000);
  }
  void SetFifo(uint64_t bytes) {
    mem_.Map(kFifo, bytes);
    mem_.Put<uint32_t>(kFifo, isa::kPrintfFifoMagic);
    mem_.Put<uint32_t>(kFifo + 4, isa::kPrintfFifoVersion);
    mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoCapacityOffset, bytes - isa::kPrintfFifoHeaderBytes);
    mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoUsedOffset, 0);
    mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoDroppedOffset, 0);
  }
  // Runs one call; *ret its result (-100 when it faulted).
  bool Call(uint64_t format, uint64_t args, int32_t* ret, uint64_t fifo = kFifo) {
    *ret = -100;
    return DevicePrintf(mem_, format, args, fifo, &scratch_, ret);
  }
  uint64_t Used() { return mem_.Get64(kFifo + isa::kPrintfFifoUsedOffset); }
  uint64_t Dropped() { return mem_.Get64(kFifo + isa::kPrintfFifoDroppedOffset); }
  std::vector<uint8_t> Record(uint64_t offset, size_t n) {
    return mem_.Bytes(kFifo + isa::kPrintfFifoHeaderBytes + offset, n);
  }

  ScriptedMemory mem_;
  std::vector<uint8_t> scratch_;
};

template <typename T>
T At(const std::vector<uint8_t>& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

TEST_F(DevicePrintfTest, WritesOneSelfDescribingRecord) {
  // nvcc's packing of (int 7, double 2.5, const char* "hi", long long -1, char 'A').
  mem_.PutString(kFormat, "i=%d f=%f s=%s ll=%lld c=%c %%\n");
  mem_.Put<int32_t>(kArgs + 0, 7);
  mem_.Put<double>(kArgs + 8, 2.5);
  mem_.Put<uint64_t>(kArgs + 16, kString);
  mem_.Put<int64_t>(kArgs + 24, -1);
  mem_.Put<int32_t>(kArgs + 32, 'A');
  mem_.PutString(kString, "hi");
  int32_t ret;
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, 5);
  const std::string format = "i=%d f=%f s=%s ll=%lld c=%c %%\n";
  const size_t format_padded = (format.size() + 7) / 8 * 8;
  // header, format, int, double, string (8 + 8), long long, char
  const size_t bytes = 16 + format_padded + 8 + 8 + 16 + 8 + 8;
  EXPECT_EQ(Used(), bytes);
  std::vector<uint8_t> r = Record(0, bytes);
  EXPECT_EQ(At<uint32_t>(r, 0), bytes);
  EXPECT_EQ(At<uint32_t>(r, 4), format.size());
  EXPECT_EQ(At<uint32_t>(r, 8), 5u);
  EXPECT_EQ(At<uint32_t>(r, 12), 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.data() + 16), format.size()), format);
  size_t at = 16 + format_padded;
  EXPECT_EQ(At<int32_t>(r, at), 7);
  EXPECT_EQ(At<double>(r, at + 8), 2.5);
  EXPECT_EQ(At<uint32_t>(r, at + 16), 2u);  // %s: length, then the bytes
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.data() + at + 24), 2), "hi");
  EXPECT_EQ(At<int64_t>(r, at + 32), -1);
  EXPECT_EQ(At<int32_t>(r, at + 40), 'A');
  // A second call goes after the first.
  mem_.PutString(kFormat, "plain\n");
  ASSERT_TRUE(Call(kFormat, 0, &ret));
  EXPECT_EQ(ret, 0);
  EXPECT_EQ(Used(), bytes + 16 + 8);
  EXPECT_EQ(At<uint32_t>(Record(bytes, 4), 0), 24u);
}

TEST_F(DevicePrintfTest, CudaReturnValues) {
  int32_t ret;
  ASSERT_TRUE(Call(0, kArgs, &ret));
  EXPECT_EQ(ret, isa::kPrintfNullFormat);
  mem_.PutString(kFormat, "x\n");
  ASSERT_TRUE(Call(kFormat, 0, &ret, /*fifo=*/0));  // no FIFO set up by the driver
  EXPECT_EQ(ret, isa::kPrintfInternalError);
  ASSERT_TRUE(Call(kFormat, 0, &ret, kFifo + 4));  // misaligned FIFO
  EXPECT_EQ(ret, isa::kPrintfInternalError);
  EXPECT_EQ(Used(), 0u);
  EXPECT_EQ(mem_.faults, 0);
}

TEST_F(DevicePrintfTest, FormatAndArgumentLimits) {
  int32_t ret;
  // No NUL within the limit: nothing is printed, and the walk stops at the limit.
  std::string long_format(isa::kPrintfMaxFormatBytes + 100, 'a');
  mem_.PutString(kFormat, long_format);
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, isa::kPrintfInternalError);
  EXPECT_LE(mem_.reads, isa::kPrintfMaxFormatBytes);
  // The longest accepted format.
  mem_.PutString(kFormat, std::string(isa::kPrintfMaxFormatBytes - 1, 'b'));
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, 0);
  EXPECT_EQ(Used(), 16u + isa::kPrintfMaxFormatBytes);
  // Too many arguments.
  std::string many;
  for (uint32_t i = 0; i <= isa::kPrintfMaxArgs; ++i) many += "%d";
  mem_.PutString(kFormat, many);
  const uint64_t used = Used();
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, isa::kPrintfInternalError);
  EXPECT_EQ(Used(), used);
  // '*' widths and precisions are arguments too.
  mem_.PutString(kFormat, "%*.*f|");
  mem_.Put<int32_t>(kArgs, 8);
  mem_.Put<int32_t>(kArgs + 4, 2);
  mem_.Put<double>(kArgs + 8, 1.0);
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, 3);
}

TEST_F(DevicePrintfTest, HostileFormatsAndPointers) {
  int32_t ret;
  // %n and unknown conversions take no argument (they are printed as written).
  mem_.PutString(kFormat, "%n %y %ls %hf %");
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, 0);
  // A format asking for arguments with none passed reads zeros (no fault).
  mem_.PutString(kFormat, "%d %s");
  ASSERT_TRUE(Call(kFormat, 0, &ret));
  EXPECT_EQ(ret, 2);
  // %s of NULL.
  mem_.PutString(kFormat, "%s");
  mem_.Put<uint64_t>(kArgs, 0);
  const uint64_t before = Used();
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(At<uint32_t>(Record(before + 24, 4), 0), isa::kPrintfNullString);
  // A string longer than the limit is cut.
  mem_.PutString(kString, std::string(isa::kPrintfMaxStringBytes + 50, 'z'));
  mem_.Put<uint64_t>(kArgs, kString);
  const uint64_t at = Used();
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(ret, 1);
  EXPECT_EQ(At<uint32_t>(Record(at + 24, 4), 0), isa::kPrintfMaxStringBytes);
  EXPECT_EQ(Used() - at, 16u + 8 + 8 + isa::kPrintfMaxStringBytes);
  EXPECT_EQ(mem_.faults, 0);

  // Bad addresses fault the thread and write nothing.
  const uint64_t used = Used();
  EXPECT_FALSE(Call(0x999000, kArgs, &ret));  // unmapped format
  mem_.PutString(kFormat, "%s");
  mem_.Put<uint64_t>(kArgs, 0x999000);  // unmapped string
  EXPECT_FALSE(Call(kFormat, kArgs, &ret));
  mem_.PutString(kFormat, "%d");
  EXPECT_FALSE(Call(kFormat, 0x999000, &ret));         // unmapped argument buffer
  EXPECT_FALSE(Call(kFormat, kArgs + 2, &ret));        // misaligned argument
  EXPECT_FALSE(Call(kFormat, kArgs, &ret, 0x999000));  // unmapped FIFO
  EXPECT_EQ(mem_.faults, 5);
  EXPECT_EQ(Used(), used);
}

TEST_F(DevicePrintfTest, FullFifoDropsThisAndLaterRecords) {
  SetFifo(isa::kPrintfFifoHeaderBytes + 80);
  mem_.PutString(kFormat, "0123456789abcdefghijk%d");  // 16 + 24 + 8 = 48 bytes
  int32_t ret;
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(Used(), 48u);
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));  // does not fit
  EXPECT_EQ(ret, 1);                        // still "printed" as far as the kernel knows
  EXPECT_EQ(Used(), 48u);
  EXPECT_EQ(Dropped(), 1u);
  mem_.PutString(kFormat, "x");  // would fit (24 of 32 bytes left), but follows a dropped one
  ASSERT_TRUE(Call(kFormat, kArgs, &ret));
  EXPECT_EQ(Used(), 48u);
  EXPECT_EQ(Dropped(), 2u);
}

TEST_F(DevicePrintfTest, ScribbledFifoHeaderOnlyDropsOutput) {
  int32_t ret;
  mem_.PutString(kFormat, "x");
  mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoUsedOffset, ~uint64_t{0} - 8);  // used > capacity
  ASSERT_TRUE(Call(kFormat, 0, &ret));
  EXPECT_EQ(Dropped(), 1u);
  // A capacity far beyond the mapping: the reservation succeeds, the write faults cleanly.
  SetFifo(0x10000);
  mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoCapacityOffset, ~uint64_t{0});
  mem_.Put<uint64_t>(kFifo + isa::kPrintfFifoUsedOffset, 0x100000);
  EXPECT_FALSE(Call(kFormat, 0, &ret));
}

// ---- the instruction in running kernels ----

class VprintfEngineTest : public ::testing::TestWithParam<std::tuple<InterpreterVariant, int>> {
 protected:
  void SetUp() override {
    engine_ = SimtEngine::Create(
        {.workers = std::get<1>(GetParam()), .interpreter = std::get<0>(GetParam())});
    mem_.Map(kTestDataAddress, 0x100000);
  }
  static constexpr uint64_t kFormatVa = kTestDataAddress;
  static constexpr uint64_t kOutVa = kTestDataAddress + 0x1000;
  static constexpr uint64_t kFifoVa = kTestDataAddress + 0x10000;

  void SetFifo(uint64_t capacity) {
    std::vector<uint8_t> h(isa::kPrintfFifoHeaderBytes, 0);
    std::memcpy(h.data() + isa::kPrintfFifoCapacityOffset, &capacity, 8);
    mem_.Write(kFifoVa, h.data(), h.size());
  }
  // Each thread: local[0] = tid, local[1] = tid * 3; out[tid] = vprintf(format, &local, fifo).
  TestLaunchResult Run(uint32_t threads, uint64_t format = kFormatVa) {
    const std::string text = R"(
      .params 24
      .local 8
      s2r.u32 r0, %tid.x
      s2r.u32 r1, %ctaid.x
      s2r.u32 r2, %ntid.x
      mad.u32 r0, r1, r2, r0
      st.local.u32 [rz+0], r0
      mul.u32 r1, r0, 3
      st.local.u32 [rz+4], r1
      ld.const.c0.u64 r2, [rz+0]
      ld.const.c0.u64 r4, [rz+8]
      s2r.u64 r6, %local_window
      vprintf r8, r2, r6, r4
      ld.const.c0.u64 r10, [rz+16]
      mulwide.u32 r12, r0, 4
      add.u64 r10, r10, r12
      st.global.a64.u32 [r10], r8
      exit
    )";
    Result<std::vector<uint8_t>> code = isa::Assemble(text);
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    ParamBuffer params;
    params.Add(format).Add(kFifoVa).Add(kOutVa);
    const uint32_t block = threads < 64 ? threads : 64;
    return RunTestKernel(*engine_, mem_, *code, params, {threads / block, 1, 1}, {block, 1, 1});
  }
  uint64_t Get64(uint64_t va) { return mem_.ReadArray<uint64_t>(va, 1)[0]; }

  std::unique_ptr<SimtEngine> engine_;
  FakeChannelMemory mem_;
};

TEST_P(VprintfEngineTest, OneRecordPerThread) {
  const std::string format = "t%d=%d\n";
  mem_.Write(kFormatVa, format.c_str(), format.size() + 1);
  SetFifo(0x8000);
  TestLaunchResult r = Run(256);
  ASSERT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
  for (uint32_t v : mem_.ReadArray<uint32_t>(kOutVa, 256)) EXPECT_EQ(v, 2u);
  // 256 records of 16 + 8 + 16 bytes; every thread's exactly once, each warp's in lane order.
  const uint64_t used = Get64(kFifoVa + isa::kPrintfFifoUsedOffset);
  ASSERT_EQ(used, 256u * 40);
  std::vector<uint8_t> area(used);
  mem_.Read(kFifoVa + isa::kPrintfFifoHeaderBytes, area.data(), used);
  std::vector<int> seen(256, 0);
  int32_t last_in_warp[8];
  std::fill(std::begin(last_in_warp), std::end(last_in_warp), -1);
  for (uint64_t at = 0; at < used; at += 40) {
    EXPECT_EQ(At<uint32_t>(area, at), 40u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(area.data() + at + 16), format.size()),
              format);
    const int32_t tid = At<int32_t>(area, at + 24);
    ASSERT_GE(tid, 0);
    ASSERT_LT(tid, 256);
    EXPECT_EQ(At<int32_t>(area, at + 32), tid * 3);
    ++seen[tid];
    EXPECT_GT(tid, last_in_warp[tid / 32]);
    last_in_warp[tid / 32] = tid;
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_EQ(Get64(kFifoVa + isa::kPrintfFifoDroppedOffset), 0u);
}

TEST_P(VprintfEngineTest, FullFifoDropsWithoutFault) {
  const std::string format = "t%d=%d\n";
  mem_.Write(kFormatVa, format.c_str(), format.size() + 1);
  SetFifo(40 * 10);  // room for 10 records
  TestLaunchResult r = Run(128);
  ASSERT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
  EXPECT_EQ(Get64(kFifoVa + isa::kPrintfFifoUsedOffset), 400u);
  EXPECT_EQ(Get64(kFifoVa + isa::kPrintfFifoDroppedOffset), 118u);
}

TEST_P(VprintfEngineTest, BadFormatPointerFaultsTheJob) {
  SetFifo(0x8000);
  TestLaunchResult r = Run(32, /*format=*/0x7000000000ull);
  ASSERT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kMmu);
  EXPECT_NE(r.fault.message.find("vprintf"), std::string::npos) << r.fault.message;
}

INSTANTIATE_TEST_SUITE_P(
    Compute, VprintfEngineTest,
    ::testing::Combine(::testing::Values(InterpreterVariant::kGeneric, InterpreterVariant::kBest),
                       ::testing::Values(1, 2)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == InterpreterVariant::kGeneric ? "Generic"
                                                                                 : "Best") +
             std::to_string(std::get<1>(info.param)) + "Workers";
    });

}  // namespace
}  // namespace gpuvm::sim::compute
