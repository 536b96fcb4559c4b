#include "pv/call_page.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpu/hw/vm.h"

namespace gpuvm::pv {
namespace {

namespace vm = gf100::vm;

constexpr size_t kArea = kMaxAreaPages * kPageBytes;

std::vector<uint8_t> Bytes(BatchBuilder& b) {
  std::span<const uint8_t> s = b.Finish();
  return {s.begin(), s.end()};
}

template <typename T>
void Poke(std::vector<uint8_t>& bytes, size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// One of each op, as the guest driver writes them.
std::vector<uint8_t> EveryOp() {
  BatchBuilder b(kArea);
  b.Attach(0x100000, (1ull << 40) - 1, SpaceKind::kChannel);
  const uint64_t entries[] = {vm::pte::Make(0x200000), vm::pte::Make(0x201000)};
  b.Write(0x100000, 0x120000, 5, entries);
  b.WriteLinear(0x100000, 0x160000, 0, 32, vm::pte::Make(0x400000), 1 << vm::pte::kAddrShift);
  b.Clear(0x100000, 0x120000, 5, 2);
  b.Flush(0x100000);
  b.Detach(0x100000);
  const uint8_t data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  b.BarWrite(3, 0x2004, data);
  b.BarFill(1, 0x10000, 4096, 0xabababab);
  return Bytes(b);
}

DecodedBatch Decode(const std::vector<uint8_t>& bytes) { return DecodeBatch(bytes); }

TEST(PvCallPage, EveryOpRoundTrips) {
  const std::vector<uint8_t> bytes = EveryOp();
  const DecodedBatch d = Decode(bytes);
  ASSERT_EQ(d.status, CallResult::kOk) << d.error;
  ASSERT_EQ(d.calls.size(), 8u);
  EXPECT_EQ(d.calls[0].op, Op::kAttach);
  EXPECT_EQ(d.calls[0].space, 0x100000u);
  EXPECT_EQ(d.calls[0].limit, (1ull << 40) - 1);
  EXPECT_EQ(d.calls[0].kind, SpaceKind::kChannel);
  EXPECT_EQ(d.calls[0].offset, kHeaderBytes);
  EXPECT_EQ(d.calls[1].op, Op::kWrite);
  EXPECT_EQ(d.calls[1].table, 0x120000u);
  EXPECT_EQ(d.calls[1].first, 5u);
  EXPECT_EQ(d.calls[1].count, 2u);
  EXPECT_EQ(EntryOf(d.calls[1], bytes, 0), vm::pte::Make(0x200000));
  EXPECT_EQ(EntryOf(d.calls[1], bytes, 1), vm::pte::Make(0x201000));
  EXPECT_EQ(d.calls[2].op, Op::kWriteLinear);
  EXPECT_EQ(EntryOf(d.calls[2], bytes, 3), vm::pte::Make(0x403000));
  EXPECT_EQ(d.calls[3].op, Op::kClear);
  EXPECT_EQ(EntryOf(d.calls[3], bytes, 1), 0u);
  EXPECT_EQ(d.calls[4].op, Op::kFlush);
  EXPECT_EQ(d.calls[5].op, Op::kDetach);
  EXPECT_EQ(d.calls[6].op, Op::kBarWrite);
  EXPECT_EQ(d.calls[6].bar, 3u);
  EXPECT_EQ(d.calls[6].first, 0x2004u);
  EXPECT_EQ(d.calls[6].count, 12u);
  EXPECT_EQ(bytes[d.calls[6].entries_offset + 11], 12);
  EXPECT_EQ(d.calls[6].offset + kBarWriteFixedBytes + 16, d.calls[7].offset) << "padded to 8";
  EXPECT_EQ(d.calls[7].op, Op::kBarFill);
  EXPECT_EQ(d.calls[7].bar, 1u);
  EXPECT_EQ(d.calls[7].count, 4096u);
  EXPECT_EQ(d.calls[7].value, 0xababababu);
  EXPECT_EQ(d.calls[7].offset + kBarFillBytes, bytes.size());
  // Re-encoding the decoded calls gives the same bytes: one encoding per batch.
  BatchBuilder again(kArea);
  for (const Call& c : d.calls) {
    switch (c.op) {
      case Op::kAttach:
        again.Attach(c.space, c.limit, c.kind);
        break;
      case Op::kDetach:
        again.Detach(c.space);
        break;
      case Op::kWrite: {
        std::vector<uint64_t> e(c.count);
        for (uint32_t i = 0; i < c.count; ++i) e[i] = EntryOf(c, bytes, i);
        again.Write(c.space, c.table, c.first, e);
        break;
      }
      case Op::kWriteLinear:
        again.WriteLinear(c.space, c.table, c.first, c.count, c.value, c.step);
        break;
      case Op::kClear:
        again.Clear(c.space, c.table, c.first, c.count);
        break;
      case Op::kFlush:
        again.Flush(c.space);
        break;
      case Op::kBarWrite:
        again.BarWrite(c.bar, c.first, std::span(bytes.data() + c.entries_offset, c.count));
        break;
      case Op::kBarFill:
        again.BarFill(c.bar, c.first, c.count, uint32_t(c.value));
        break;
    }
  }
  EXPECT_EQ(Bytes(again), bytes);
}

TEST(PvCallPage, ResultsAreReadBackWhereTheHostWroteThem) {
  std::vector<uint8_t> bytes = EveryOp();
  Poke<uint32_t>(bytes, kHeaderBytes + kOpResult, uint32_t(CallResult::kConflict));
  Poke<uint32_t>(bytes, kHeaderStatus, uint32_t(CallResult::kConflict));
  EXPECT_EQ(ResultAt(bytes, kHeaderBytes), CallResult::kConflict);
  EXPECT_EQ(BatchStatus(bytes), CallResult::kConflict);
  EXPECT_EQ(BatchDone(bytes), 0u);
  EXPECT_EQ(ResultAt(bytes, uint32_t(bytes.size())), CallResult::kNotRun);  // past the batch
  EXPECT_EQ(CallResultName(CallResult::kForeignSysram), "FOREIGN_SYSRAM");
  EXPECT_EQ(CallResultName(CallResult(99)), "UNKNOWN");
}

TEST(PvCallPage, BatchLengthsOutsideTheAreaAreRefused) {
  EXPECT_EQ(CheckBatchLength(64, kArea), CallResult::kOk);
  EXPECT_EQ(CheckBatchLength(kArea, kArea), CallResult::kOk);
  EXPECT_EQ(CheckBatchLength(kArea + 8, kArea), CallResult::kBadBatch);
  EXPECT_EQ(CheckBatchLength(24, kArea), CallResult::kBadBatch);  // shorter than a header
  EXPECT_EQ(CheckBatchLength(68, kArea), CallResult::kBadBatch);  // not whole words
  EXPECT_EQ(CheckBatchLength(0, kArea), CallResult::kBadBatch);
}

// Each header rule: the batch is refused whole (no calls), status BAD_BATCH.
TEST(PvCallPage, EveryHeaderRuleRefusesTheBatch) {
  struct Case {
    const char* what;
    size_t at;
    uint64_t value;
    size_t width;
  };
  const Case cases[] = {
      {"magic", kHeaderMagic, 0x12345678, 4},
      {"version", kHeaderVersion, 2, 2},
      {"flags", kHeaderFlags, 1, 2},
      {"op count 0", kHeaderOpCount, 0, 4},
      {"op count past the limit", kHeaderOpCount, kMaxOps + 1, 4},
      {"op count past the ops", kHeaderOpCount, 7, 4},
      {"op count short of the ops", kHeaderOpCount, 5, 4},
      {"length not the batch's", kHeaderLength, 8, 4},
      {"status set by the guest", kHeaderStatus, 1, 4},
      {"done set by the guest", kHeaderDone, 1, 4},
      {"reserved", kHeaderReserved, 1, 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<uint8_t> bytes = EveryOp();
    std::memcpy(bytes.data() + c.at, &c.value, c.width);
    const DecodedBatch d = Decode(bytes);
    EXPECT_EQ(d.status, CallResult::kBadBatch) << d.error;
    EXPECT_EQ(d.bad_offset, -1);
    EXPECT_FALSE(d.error.empty());
  }
  // Too short, ragged, empty.
  std::vector<uint8_t> bytes = EveryOp();
  EXPECT_EQ(DecodeBatch(std::span(bytes).first(20)).status, CallResult::kBadBatch);
  EXPECT_EQ(DecodeBatch(std::span(bytes).first(bytes.size() - 4)).status, CallResult::kBadBatch);
  EXPECT_EQ(DecodeBatch({}).status, CallResult::kBadBatch);
  // Bytes after the last op (the header's length covering them).
  bytes.resize(bytes.size() + 8, 0);
  Poke<uint32_t>(bytes, kHeaderLength, uint32_t(bytes.size()));
  EXPECT_EQ(Decode(bytes).status, CallResult::kBadBatch);
}

// Each op rule: BAD_OP naming that op; the well-formed ops before it are listed (their results
// become NOT_RUN), nothing after it.
TEST(PvCallPage, EveryOpRuleRefusesTheBatchAtThatOp) {
  const std::vector<uint8_t> good = EveryOp();
  const DecodedBatch ok = Decode(good);
  ASSERT_EQ(ok.status, CallResult::kOk);
  const uint32_t attach = ok.calls[0].offset, write = ok.calls[1].offset;
  const uint32_t linear = ok.calls[2].offset, clear = ok.calls[3].offset;
  const uint32_t bw = ok.calls[6].offset, bf = ok.calls[7].offset;
  struct Case {
    const char* what;
    size_t at;
    uint64_t value;
    size_t width;
    uint32_t bad;  // offset of the op refused
  };
  const Case cases[] = {
      {"unknown opcode 0", attach + kOpCode, 0, 2, attach},
      {"unknown opcode 9", write + kOpCode, 9, 2, write},
      {"op flags", write + kOpFlags, 1, 2, write},
      {"op result set by the guest", clear + kOpResult, 1, 4, clear},
      {"op reserved", clear + kOpReserved, 1, 4, clear},
      {"attach: unknown kind", attach + 32, 2, 4, attach},
      {"attach: reserved", attach + 36, 1, 4, attach},
      {"attach: limit past 40 bits", attach + 24, 1ull << 40, 8, attach},
      {"attach: directory not page aligned", attach + 16, 0x100008, 8, attach},
      {"write: count 0", write + 40, 0, 4, write},
      {"write: count past its length (past the page)", write + 40, 3, 4, write},
      {"write: count short of its length", write + 40, 1, 4, write},
      {"write: reserved", write + 44, 1, 4, write},
      {"write: table not 8-byte aligned", write + 24, 0x120004, 8, write},
      {"linear: length", linear + kOpLength, kWriteLinearBytes + 8, 4, linear},
      {"linear: length short of its fields", linear + kOpLength, 24, 4, linear},
      {"clear: count 0", clear + 40, 0, 4, clear},
      {"clear: length not whole words", clear + kOpLength, kClearBytes + 4, 4, clear},
      {"bar write: BAR 2", bw + 24, 2, 4, bw},
      {"bar fill: BAR 0", bf + 24, 0, 4, bf},
      {"bar write: offset not 4-byte aligned", bw + 16, 0x2006, 8, bw},
      {"bar write: bytes not whole words", bw + 28, 10, 4, bw},
      {"bar write: bytes past its length (past the page)", bw + 28, 4096, 4, bw},
      {"bar write: bytes short of its length", bw + 28, 4, 4, bw},
      {"bar write: padding set", bw + kBarWriteFixedBytes + 13, 1, 1, bw},
      {"bar fill: bytes 0", bf + 28, 0, 4, bf},
      {"bar fill: past the limit", bf + 28, kMaxBarStoreBytes + 4, 4, bf},
      {"bar fill: reserved", bf + 36, 1, 4, bf},
      {"bar fill: length", bf + kOpLength, kBarFillBytes + 8, 4, bf},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<uint8_t> bytes = good;
    std::memcpy(bytes.data() + c.at, &c.value, c.width);
    const DecodedBatch d = Decode(bytes);
    EXPECT_EQ(d.status, CallResult::kBadOp) << d.error;
    EXPECT_EQ(d.bad_offset, int64_t(c.bad)) << d.error;
    for (const Call& call : d.calls) EXPECT_LT(call.offset, c.bad);
  }
  // BAR0 stores: registers and PRAMIN, never into the PV window (a doorbell inside a batch).
  const uint32_t word = 1;
  const std::span<const uint8_t> four(reinterpret_cast<const uint8_t*>(&word), 4);
  for (uint64_t at : {uint64_t(kWindow - 4), uint64_t(kRegDoorbell), uint64_t(kWindow + 0xffc)}) {
    BatchBuilder b(kArea);
    b.BarWrite(0, at, at == kWindow - 4 ? std::span<const uint8_t>(EveryOp()).subspan(0, 8) : four);
    EXPECT_EQ(Decode(Bytes(b)).status, CallResult::kBadOp) << at;
  }
  BatchBuilder regs(kArea);
  regs.BarWrite(0, 0x1700, four);
  regs.BarWrite(0, kWindow + kWindowSize, four);
  EXPECT_EQ(Decode(Bytes(regs)).status, CallResult::kOk);
  // An op whose length runs past the batch.
  std::vector<uint8_t> bytes = good;
  Poke<uint32_t>(bytes, ok.calls[5].offset + kOpLength, 4096);
  EXPECT_EQ(Decode(bytes).status, CallResult::kBadOp);
}

TEST(PvCallPage, BatchesPastTheOpOrEntryLimitsAreRefusedWhole) {
  BatchBuilder b(1 << 20);
  for (uint32_t i = 0; i <= kMaxOps; ++i) b.Flush(0x100000);
  EXPECT_EQ(Decode(Bytes(b)).status, CallResult::kBadBatch);
  BatchBuilder e(kArea);
  e.Clear(0x100000, 0x120000, 0, uint32_t(kMaxBatchEntries));
  EXPECT_EQ(Decode(Bytes(e)).status, CallResult::kOk);
  e.Clear(0x100000, 0x120000, 0, 1);
  EXPECT_EQ(Decode(Bytes(e)).status, CallResult::kBadBatch);
}

TEST(PvCallPage, TheBuilderKnowsWhatFits) {
  BatchBuilder b(kHeaderBytes + kFlushBytes + kDetachBytes);
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.Fits(kFlushBytes, 0));
  b.Flush(0x1000);
  EXPECT_TRUE(b.Fits(kDetachBytes, 0));
  EXPECT_FALSE(b.Fits(kAttachBytes, 0));
  EXPECT_FALSE(b.Fits(kDetachBytes, kMaxBatchEntries + 1));
  b.Reset();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.bytes(), kHeaderBytes);
  BatchBuilder area(kArea);
  EXPECT_EQ(area.MaxWriteEntries(), (kArea - kHeaderBytes - kWriteFixedBytes) / 8);
  EXPECT_EQ(BatchBuilder(16).MaxWriteEntries(), 0u);
}

TEST(PvCallPage, PtesAreCheckedAgainstTheVmsVramAndRam) {
  const VmExtent vmx{64ull << 20, 32ull << 20};
  const uint64_t large = 1ull << vm::kLargePageShift128K;
  using vm::Target;
  EXPECT_EQ(CheckPte(0, 4096, vmx), CallResult::kOk);
  EXPECT_EQ(CheckPte(0xfffffffffffffffeull, 4096, vmx), CallResult::kOk);  // not present
  EXPECT_EQ(CheckPte(vm::pte::Make(0), 4096, vmx), CallResult::kOk);
  EXPECT_EQ(CheckPte(vm::pte::Make((64ull << 20) - 4096), 4096, vmx), CallResult::kOk);
  EXPECT_EQ(CheckPte(vm::pte::Make(64ull << 20), 4096, vmx), CallResult::kForeignVram);
  EXPECT_EQ(CheckPte(vm::pte::Make(1ull << 39), 4096, vmx), CallResult::kForeignVram);
  EXPECT_EQ(CheckPte(vm::pte::Make((64ull << 20) - large), large, vmx), CallResult::kOk);
  // A large page's low address bits are ignored (as the GPU does): the page is the aligned one.
  EXPECT_EQ(CheckPte(vm::pte::Make((64ull << 20) - 4096), large, vmx), CallResult::kOk);
  const vm::pte::Flags sys{.target = Target::kSysramSnooped};
  const vm::pte::Flags nosnoop{.target = Target::kSysramNoSnoop};
  EXPECT_EQ(CheckPte(vm::pte::Make((32ull << 20) - 4096, sys), 4096, vmx), CallResult::kOk);
  EXPECT_EQ(CheckPte(vm::pte::Make(32ull << 20, sys), 4096, vmx), CallResult::kForeignSysram);
  EXPECT_EQ(CheckPte(vm::pte::Make(40ull << 20, nosnoop), 4096, vmx), CallResult::kForeignSysram);
  EXPECT_EQ(CheckPte(vm::pte::Make(0, {.target = Target::kInvalid}), 4096, vmx),
            CallResult::kBadEntry);
  EXPECT_EQ(CheckPte(vm::pte::Make(0, {.storage_type = 0xfe}), 4096, vmx), CallResult::kBadEntry);
  EXPECT_EQ(CheckPte(vm::pte::Make(0) | (1ull << 50), 4096, vmx), CallResult::kBadEntry);
}

TEST(PvCallPage, PdesNameTablesInsideTheVmsVram) {
  const VmExtent vmx{64ull << 20, 32ull << 20};
  using vm::PdeTarget;
  PdeTables t;
  EXPECT_EQ(CheckPde(0, vmx, &t), CallResult::kOk);
  EXPECT_EQ(t.small_bytes + t.large_bytes, 0u);
  ASSERT_EQ(CheckPde(vm::pde::Make(PdeTarget::kVram, 0x10000, PdeTarget::kVram, 0x200000), vmx, &t),
            CallResult::kOk);
  EXPECT_EQ(t.large, 0x10000u);
  EXPECT_EQ(t.large_bytes, 1024u * 8);
  EXPECT_EQ(t.small, 0x200000u);
  EXPECT_EQ(t.small_bytes, 32768u * 8);
  // PT_SIZE shrinks both tables.
  ASSERT_EQ(
      CheckPde(vm::pde::Make(PdeTarget::kVram, 0x10000, PdeTarget::kVram, 0x200000, 3), vmx, &t),
      CallResult::kOk);
  EXPECT_EQ(t.large_bytes, 128u * 8);
  EXPECT_EQ(t.small_bytes, 4096u * 8);
  // A small table whose end runs past the VRAM; one past it; one in system memory.
  EXPECT_EQ(
      CheckPde(vm::pde::Make(PdeTarget::kNone, 0, PdeTarget::kVram, (64ull << 20) - 4096), vmx, &t),
      CallResult::kNotInVram);
  EXPECT_EQ(CheckPde(vm::pde::Make(PdeTarget::kVram, 1ull << 30, PdeTarget::kNone, 0), vmx, &t),
            CallResult::kNotInVram);
  EXPECT_EQ(
      CheckPde(vm::pde::Make(PdeTarget::kSysramSnooped, 0x1000, PdeTarget::kNone, 0), vmx, &t),
      CallResult::kNotInVram);
  EXPECT_EQ(
      CheckPde(vm::pde::Make(PdeTarget::kNone, 0, PdeTarget::kSysramNoSnoop, 0x1000), vmx, &t),
      CallResult::kNotInVram);
}

}  // namespace
}  // namespace gpuvm::pv
