#include "gpu/sim/compute/simt_engine.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <type_traits>

#include "base/hex.h"
#include "gpu/isa/disassembler.h"
#include "gpu/isa/encoding.h"

namespace gpuvm::sim::compute {

void AlignedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

bool AlignedBuffer::Reserve(size_t bytes) {
  if (bytes <= size && data) return true;
  size_t rounded = (bytes + 63) & ~size_t{63};
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return false;
  memset(p, 0, rounded);
  data.reset(static_cast<uint8_t*>(p));
  size = rounded;
  return true;
}

uint8_t* GlobalMiss(WorkerState& ws, uint64_t va, bool write) {
  const uint64_t page = va >> 12;
  MemoryFault fault;
  uint8_t* base = ws.memory->Translate(page << 12, static_cast<uint32_t>(ChannelMemory::kPageSize),
                                       write, &fault);
  if (!base) {
    fault.va = va;
    fault.write = write;
    ws.fault.kind = ComputeFault::Kind::kMmu;
    ws.fault.mmu = fault;
    ws.fault.what = "MMU fault";
    return nullptr;
  }
  ++ws.page_misses;
  const size_t slot = page & (PageCache::kEntries - 1);
  if (write) {
    ws.pages.write[slot] = {page, base};
    ws.pages.read[slot] = {page, base};
  } else {
    ws.pages.read[slot] = {page, base};
  }
  return base + (va & (ChannelMemory::kPageSize - 1));
}

namespace {

using Clock = std::chrono::steady_clock;

// Instructions a warp runs between clock checks.
constexpr int64_t kChunk = 4096;
constexpr uint32_t kMaxConstBankBytes = 64 * 1024;

const char* FaultReasonName(gf100::FaultReason r) {
  const gf100::FaultReasonText* text = gf100::FaultReasonTextOf(static_cast<uint32_t>(r));
  return text != nullptr ? text->phrase : "unknown reason";
}

// Copies [va, va + len) out of the channel's address space (page by page).
bool ReadMemory(ChannelMemory* memory, uint64_t va, size_t len, uint8_t* out, MemoryFault* fault) {
  while (len > 0) {
    const uint64_t in_page = ChannelMemory::kPageSize - (va & (ChannelMemory::kPageSize - 1));
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(in_page, len));
    const uint8_t* p = memory->Translate(va, n, false, fault);
    if (!p) {
      fault->va = va;
      return false;
    }
    memcpy(out, p, n);
    out += n;
    va += n;
    len -= n;
  }
  return true;
}

// The context image's byte order is the host's (an image never leaves the device that wrote it).
constexpr uint32_t kImageMagic = 0x58435647;  // "GVCX"
constexpr uint32_t kImageVersion = 1;

class ImageWriter {
 public:
  explicit ImageWriter(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Bytes(&v, sizeof v);
  }
  void Bytes(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
  }

 private:
  std::vector<uint8_t>* out_;
};

// Reads an image it does not trust: every Get fails (and keeps failing) past the end.
class ImageReader {
 public:
  explicit ImageReader(const std::vector<uint8_t>& in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return Bytes(v, sizeof *v);
  }
  bool Bytes(void* p, size_t n) {
    if (in_.size() - at_ < n) return false;
    if (n > 0) memcpy(p, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool Bool(bool* v) {
    uint8_t b = 0;
    if (!Get(&b) || b > 1) return false;
    *v = b != 0;
    return true;
  }
  size_t left() const { return in_.size() - at_; }

 private:
  const std::vector<uint8_t>& in_;
  size_t at_ = 0;
};

}  // namespace

class SimtJob final : public ComputeJob {
 public:
  SimtJob(SimtEngine* engine, const ComputeLaunch& launch, ChannelMemory* memory, uint32_t grid_id)
      : engine_(engine), launch_(launch), memory_(memory) {
    constants_.grid_id = grid_id;
  }

  // Resumes from a context image (SimtEngine::Resume, which calls RestoreNow).
  SimtJob(SimtEngine* engine, std::vector<uint8_t> image, ChannelMemory* memory)
      : engine_(engine), memory_(memory), resume_image_(std::move(image)) {}

  SliceOutcome RunSlice() override;
  const ComputeFault& fault() const override { return fault_; }
  uint64_t thread_instructions() const override { return thread_instructions_; }
  void Drain() override { draining_ = true; }
  // Parses and validates resume_image_ now (SimtEngine::Resume), so the restore's cost is not
  // folded into a slice of work; a bad image leaves the job faulted for its first slice.
  void RestoreNow() {
    prepared_ = true;
    if (!Restore()) {
      finished_ = true;
      return;
    }
    MakeWorkers();
  }
  bool drained() const override;
  bool SaveContext(std::vector<uint8_t>* image) override;

 private:
  enum class BlockOutcome { kDone, kParked, kFault };

  bool Fault(ComputeFault::Kind kind, std::string message) {
    fault_.kind = kind;
    fault_.message = "channel " + std::to_string(launch_.channel) + ": " + std::move(message);
    return false;
  }
  bool Prepare();
  bool ValidateLaunch();
  bool FetchProgram();
  bool SetUpConstants();
  bool SnapshotBanks();
  // RestoreNow's work: parses and validates resume_image_ (every field is checked
  // against the launch and the decoded program before the interpreter sees it).
  bool Restore();
  bool RestoreBlock(ImageReader& in, BlockState* b);
  void MakeWorkers();
  void SaveBlock(ImageWriter& out, const BlockState& b) const;
  void Work(int worker, Clock::time_point deadline);
  BlockState* Acquire();
  bool InitBlock(BlockState* b, uint64_t linear);
  BlockOutcome RunBlock(ExecContext& ctx, BlockState& b, Clock::time_point deadline);
  void RecordFault(const WorkerState& ws, const BlockState& b);

  SimtEngine* const engine_;
  ComputeLaunch launch_;  // const after the first slice
  ChannelMemory* const memory_;
  std::vector<uint8_t> resume_image_;  // consumed by RestoreNow
  std::vector<uint8_t> code_image_;    // the exact kernel image decoded (saved with a context)
  bool draining_ = false;
  bool prepared_ = false;
  bool finished_ = false;
  ComputeFault fault_;
  uint64_t thread_instructions_ = 0;

  std::shared_ptr<const Program> program_;
  LaunchConstants constants_;
  std::vector<uint8_t> banks_[ComputeLaunch::kConstBuffers];
  uint64_t total_blocks_ = 0;
  std::vector<std::unique_ptr<WorkerState>> workers_;

  mutable std::mutex mu_;
  uint64_t next_block_ = 0;                          // guarded by mu_
  uint64_t done_blocks_ = 0;                         // guarded by mu_
  std::deque<BlockState*> parked_;                   // guarded by mu_
  std::vector<BlockState*> free_;                    // guarded by mu_
  std::vector<std::unique_ptr<BlockState>> blocks_;  // guarded by mu_ (owns every BlockState)
  bool faulted_ = false;                             // guarded by mu_
  std::atomic<bool> abort_{false};
};

bool SimtJob::ValidateLaunch() {
  const ComputeLaunch& l = launch_;
  auto bad = [&](std::string what) {
    return Fault(ComputeFault::Kind::kInvalidLaunch, std::move(what));
  };
  if (l.grid_x == 0 || l.grid_y == 0 || l.grid_z == 0 || l.grid_x > 0x7fffffffu ||
      l.grid_y > 65535 || l.grid_z > 65535) {
    return bad("grid " + std::to_string(l.grid_x) + "x" + std::to_string(l.grid_y) + "x" +
               std::to_string(l.grid_z) + " out of range (x 1..2^31-1, y/z 1..65535)");
  }
  if (l.block_x == 0 || l.block_y == 0 || l.block_z == 0 || l.block_x > 1024 || l.block_y > 1024 ||
      l.block_z > 64 || uint64_t{l.block_x} * l.block_y * l.block_z > 1024) {
    return bad("block " + std::to_string(l.block_x) + "x" + std::to_string(l.block_y) + "x" +
               std::to_string(l.block_z) + " out of range (at most 1024 threads, z at most 64)");
  }
  return true;
}

bool SimtJob::FetchProgram() {
  const uint64_t entry = launch_.code_address + launch_.entry_offset;
  if (entry < launch_.code_address)
    return Fault(ComputeFault::Kind::kInvalidLaunch, "code address overflows");
  uint8_t header_bytes[isa::kKernelHeaderBytes];
  MemoryFault mf;
  auto mmu = [&](const char* what) {
    fault_.mmu = mf;
    return Fault(ComputeFault::Kind::kMmu,
                 std::string(what) + " at " + Hex(mf.va) + ": " + FaultReasonName(mf.reason));
  };
  if (!ReadMemory(memory_, entry, sizeof header_bytes, header_bytes, &mf))
    return mmu("fetching the kernel header");
  Result<isa::KernelHeader> header = isa::DecodeKernelHeader(header_bytes);
  if (!header.ok()) {
    return Fault(ComputeFault::Kind::kInvalidCode,
                 "kernel at " + Hex(entry) + ": " + header.status().message());
  }
  std::vector<uint8_t> image(isa::kKernelHeaderBytes + size_t{header->code_words} * 8);
  if (!ReadMemory(memory_, entry, image.size(), image.data(), &mf))
    return mmu("fetching the kernel code");
  code_image_ = image;
  Result<std::shared_ptr<const Program>> program =
      engine_->LookUpOrDecode(memory_->AddressSpaceId(), entry, std::move(image));
  if (!program.ok()) {
    return Fault(ComputeFault::Kind::kInvalidCode,
                 "kernel at " + Hex(entry) + ": " + program.status().message());
  }
  program_ = *program;
  return true;
}

bool SimtJob::SnapshotBanks() {
  const Program& p = *program_;
  for (int bank = 0; bank < ComputeLaunch::kConstBuffers; ++bank) {
    if (!(p.const_banks_used & (1u << bank))) continue;
    const ComputeLaunch::ConstBuffer& cb = launch_.const_buffers[bank];
    if (!cb.valid) continue;  // accesses fault with kOutOfRange (size 0)
    const uint32_t size = std::min(cb.size, kMaxConstBankBytes);
    banks_[bank].resize(size);
    MemoryFault mf;
    if (!ReadMemory(memory_, cb.address, size, banks_[bank].data(), &mf)) {
      fault_.mmu = mf;
      return Fault(ComputeFault::Kind::kMmu, "reading constant bank " + std::to_string(bank) +
                                                 " at " + Hex(mf.va) + ": " +
                                                 FaultReasonName(mf.reason));
    }
    constants_.bank_data[bank] = banks_[bank].data();
    constants_.bank_size[bank] = size;
  }
  // Checked against the bound buffer, not the snapshot: a kernel that declares parameters but never
  // reads bank 0 (an unused PTX parameter) has no snapshot, and is a valid launch.
  const ComputeLaunch::ConstBuffer& params = launch_.const_buffers[isa::kParamBank];
  const uint32_t param_bank = params.valid ? std::min(params.size, kMaxConstBankBytes) : 0;
  if (p.header.param_bytes > param_bank) {
    return Fault(ComputeFault::Kind::kInvalidLaunch,
                 "the kernel reads " + std::to_string(p.header.param_bytes) +
                     " bytes of parameters but constant bank 0 holds " +
                     std::to_string(param_bank));
  }
  return true;
}

bool SimtJob::Prepare() {
  if (!ValidateLaunch() || !FetchProgram() || !SetUpConstants() || !SnapshotBanks()) return false;
  total_blocks_ = uint64_t{launch_.grid_x} * launch_.grid_y * launch_.grid_z;
  return true;
}

bool SimtJob::SetUpConstants() {
  const Program& p = *program_;
  const ComputeLaunch& l = launch_;
  LaunchConstants& c = constants_;
  c.grid[0] = l.grid_x;
  c.grid[1] = l.grid_y;
  c.grid[2] = l.grid_z;
  c.block[0] = l.block_x;
  c.block[1] = l.block_y;
  c.block[2] = l.block_z;
  c.block_threads = l.block_x * l.block_y * l.block_z;
  c.warps_per_block = (c.block_threads + kLanes - 1) / kLanes;
  c.workers = static_cast<uint32_t>(engine_->workers());
  if (p.header.max_threads != 0 && c.block_threads > p.header.max_threads) {
    return Fault(ComputeFault::Kind::kInvalidLaunch, "block of " + std::to_string(c.block_threads) +
                                                         " threads exceeds the kernel's maximum " +
                                                         std::to_string(p.header.max_threads));
  }
  if (l.shared_size < p.header.shared_bytes || l.shared_size > isa::kMaxSharedBytes) {
    return Fault(ComputeFault::Kind::kInvalidLaunch,
                 "shared size " + std::to_string(l.shared_size) + " (kernel needs " +
                     std::to_string(p.header.shared_bytes) + ", at most " +
                     std::to_string(isa::kMaxSharedBytes) + ")");
  }
  c.shared_size = l.shared_size;
  c.shared_window = l.shared_base;
  c.local_window = l.local_base;
  auto window_ok = [](uint64_t base) { return base != 0 && base % isa::kWindowBytes == 0; };
  if ((p.reads_shared_window && !window_ok(c.shared_window)) ||
      (p.reads_local_window && !window_ok(c.local_window)) ||
      (c.shared_window != 0 && c.shared_window == c.local_window)) {
    return Fault(ComputeFault::Kind::kInvalidLaunch,
                 "the kernel uses generic addressing but SHARED_BASE " + Hex(c.shared_window) +
                     " / LOCAL_BASE " + Hex(c.local_window) +
                     " are not distinct non-zero 16 MiB-aligned windows");
  }
  return true;
}

bool SimtJob::InitBlock(BlockState* b, uint64_t linear) {
  const Program& p = *program_;
  const LaunchConstants& c = constants_;
  const size_t file = p.RegisterFileBytes();
  const uint32_t local = p.header.local_bytes;
  if (!b->regs.Reserve(file * c.warps_per_block) || !b->shared.Reserve(c.shared_size) ||
      !b->local.Reserve(size_t{local} * kLanes * c.warps_per_block)) {
    return false;
  }
  b->linear = linear;
  b->ctaid[0] = static_cast<uint32_t>(linear % c.grid[0]);
  b->ctaid[1] = static_cast<uint32_t>((linear / c.grid[0]) % c.grid[1]);
  b->ctaid[2] = static_cast<uint32_t>(linear / (uint64_t{c.grid[0]} * c.grid[1]));
  b->live_threads = c.block_threads;
  memset(b->bar_arrived, 0, sizeof b->bar_arrived);
  b->next_warp = 0;
  b->local_bytes = local;
  b->warps.resize(c.warps_per_block);
  const size_t init_offset = size_t{p.zero_row} * kRowBytes;
  for (uint32_t i = 0; i < c.warps_per_block; ++i) {
    Warp& w = b->warps[i];
    const uint32_t first = i * kLanes;
    const uint32_t lanes = std::min<uint32_t>(kLanes, c.block_threads - first);
    const uint32_t mask = lanes == kLanes ? kFullMask : ((1u << lanes) - 1);
    w.index = i;
    w.pc = 0;
    w.active = mask;
    w.exited = ~mask;
    w.next_join = kNoPc;
    w.pending_count = 0;
    w.waiting = false;
    w.done = false;
    w.regs = b->regs.data.get() + file * i;
    memset(w.preds, 0, sizeof w.preds);
    w.preds[isa::kPredTrue] = kFullMask;
    memcpy(w.regs + init_offset, p.init_rows.data(), p.init_rows.size());
  }
  return true;
}

BlockState* SimtJob::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (faulted_) return nullptr;
  if (!parked_.empty()) {
    BlockState* b = parked_.front();
    parked_.pop_front();
    return b;
  }
  if (next_block_ >= total_blocks_ || draining_) return nullptr;
  BlockState* b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {
    blocks_.push_back(std::make_unique<BlockState>());
    b = blocks_.back().get();
  }
  if (!InitBlock(b, next_block_)) {
    faulted_ = true;
    abort_ = true;
    Fault(ComputeFault::Kind::kInvalidLaunch, "out of host memory for a thread block");
    return nullptr;
  }
  ++next_block_;
  return b;
}

SimtJob::BlockOutcome SimtJob::RunBlock(ExecContext& ctx, BlockState& b,
                                        Clock::time_point deadline) {
  const RunWarpFn run = engine_->run_warp_;
  const uint32_t nw = static_cast<uint32_t>(b.warps.size());
  int64_t budget = kChunk;
  for (;;) {
    bool ran = false;
    bool all_done = true;
    for (uint32_t k = 0; k < nw; ++k) {
      const uint32_t i = (b.next_warp + k) % nw;
      Warp& w = b.warps[i];
      if (w.done) continue;
      all_done = false;
      while (!w.waiting && !w.done) {
        ran = true;
        WarpStop stop = run(ctx, w, &budget);
        if (stop == WarpStop::kFault) return BlockOutcome::kFault;
        if (budget <= 0) {
          budget = kChunk;
          if (abort_.load(std::memory_order_relaxed) ||
              engine_->yield_.load(std::memory_order_relaxed) || Clock::now() >= deadline) {
            b.next_warp = i;
            return BlockOutcome::kParked;
          }
        }
        if (stop != WarpStop::kBudget) break;
      }
    }
    if (all_done) return BlockOutcome::kDone;
    if (!ran) {
      // Every live warp waits at a barrier that can never complete (threads wait at different
      // barrier ids).
      ctx.worker->fault.kind = ComputeFault::Kind::kBarrierDeadlock;
      ctx.worker->fault.what =
          "deadlock: every live thread waits at a barrier that cannot complete";
      ctx.worker->fault.pc = b.warps[0].pc;
      ctx.worker->fault.warp = 0;
      ctx.worker->fault.lane = 0;
      ctx.worker->fault.address = 0;
      return BlockOutcome::kFault;
    }
  }
}

void SimtJob::RecordFault(const WorkerState& ws, const BlockState& b) {
  std::lock_guard<std::mutex> lock(mu_);
  if (faulted_) return;  // the first fault wins
  faulted_ = true;
  abort_ = true;
  const FaultRecord& f = ws.fault;
  const uint32_t thread = f.warp * kLanes + f.lane;
  const uint32_t bx = constants_.block[0], by = constants_.block[1];
  std::string where = "block (" + std::to_string(b.ctaid[0]) + "," + std::to_string(b.ctaid[1]) +
                      "," + std::to_string(b.ctaid[2]) + ") thread (" +
                      std::to_string(thread % bx) + "," + std::to_string((thread / bx) % by) + "," +
                      std::to_string(thread / (bx * by)) + ") pc " + std::to_string(f.pc);
  if (f.pc < program_->source.size())
    where += " `" + isa::Disassemble(program_->source[f.pc]) + "`";
  std::string message = where + ": " + f.what;
  if (f.kind == ComputeFault::Kind::kMmu) {
    message += std::string(" (") + FaultReasonName(f.mmu.reason) +
               (f.mmu.write ? ", write" : ", read") + ") at " + Hex(f.mmu.va);
    fault_.mmu = f.mmu;
  } else if (f.kind != ComputeFault::Kind::kTrap && f.kind != ComputeFault::Kind::kAssert &&
             f.kind != ComputeFault::Kind::kBarrierDeadlock) {
    message += " at " + Hex(f.address);
  }
  Fault(f.kind, message);
}

void SimtJob::Work(int index, Clock::time_point deadline) {
  WorkerState& ws = *workers_[index];
  ExecContext ctx;
  ctx.program = program_.get();
  ctx.launch = &constants_;
  ctx.worker = &ws;
  while (!abort_.load(std::memory_order_relaxed)) {
    BlockState* b = Acquire();
    if (!b) break;
    ctx.block = b;
    ws.fault = FaultRecord{};
    BlockOutcome outcome = RunBlock(ctx, *b, deadline);
    if (outcome == BlockOutcome::kFault) {
      RecordFault(ws, *b);
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(b);
      break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome == BlockOutcome::kParked) {
      parked_.push_back(b);
      break;
    }
    ++done_blocks_;
    free_.push_back(b);
    if (engine_->yield_.load(std::memory_order_relaxed) || Clock::now() >= deadline) break;
  }
}

void SimtJob::MakeWorkers() {
  workers_.resize(engine_->workers());
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i] = std::make_unique<WorkerState>();
    workers_[i]->memory = memory_;
    workers_[i]->index = static_cast<uint32_t>(i);
  }
}

SliceOutcome SimtJob::RunSlice() {
  if (finished_)
    return fault_.kind == ComputeFault::Kind::kNone ? SliceOutcome::kDone : SliceOutcome::kFaulted;
  if (!prepared_) {
    prepared_ = true;
    if (!Prepare()) {
      finished_ = true;
      return SliceOutcome::kFaulted;
    }
    MakeWorkers();
  }
  const Clock::time_point deadline = Clock::now() + engine_->options_.slice;
  uint64_t runnable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runnable = parked_.size() + (draining_ ? 0 : total_blocks_ - next_block_);
  }
  const int n = static_cast<int>(std::min<uint64_t>(runnable, workers_.size()));
  if (n > 0) engine_->pool_.Run(n, [this, deadline](int i) { Work(i, deadline); });
  uint64_t lanes = 0;
  for (auto& ws : workers_) {
    lanes += ws->lane_instructions;
    ws->lane_instructions = 0;
  }
  thread_instructions_ += lanes;
  std::lock_guard<std::mutex> lock(mu_);
  if (faulted_) {
    finished_ = true;
    return SliceOutcome::kFaulted;
  }
  if (done_blocks_ == total_blocks_) {
    finished_ = true;
    return SliceOutcome::kDone;
  }
  return SliceOutcome::kMore;
}

bool SimtJob::drained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return draining_ && prepared_ && !finished_ && parked_.empty();
}

void SimtJob::SaveBlock(ImageWriter& out, const BlockState& b) const {
  out.Put(b.linear);
  out.Put(b.live_threads);
  out.Bytes(b.bar_arrived, sizeof b.bar_arrived);
  out.Put(b.next_warp);
  for (const Warp& w : b.warps) {
    out.Put(w.pc);
    out.Put(w.active);
    out.Put(w.exited);
    out.Put(w.pending_count);
    out.Put(uint8_t{w.waiting});
    out.Put(uint8_t{w.done});
    out.Bytes(w.preds, sizeof w.preds);
    out.Bytes(w.pending, sizeof(Group) * w.pending_count);
  }
  out.Bytes(b.regs.data.get(), program_->RegisterFileBytes() * constants_.warps_per_block);
  out.Bytes(b.shared.data.get(), constants_.shared_size);
  out.Bytes(b.local.data.get(),
            size_t{program_->header.local_bytes} * kLanes * constants_.warps_per_block);
}

bool SimtJob::SaveContext(std::vector<uint8_t>* image) {
  // Between slices no worker runs, so the job's state is exactly what the structures hold: every
  // store of a finished slice is in memory (the engine buffers none), and a membar has nothing
  // left to order. A job that has not prepared yet, or has ended, has no context to save.
  if (!prepared_ || finished_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  ImageWriter out(image);
  out.Put(kImageMagic);
  out.Put(kImageVersion);
  const ComputeLaunch& l = launch_;
  for (uint32_t v :
       {l.channel, l.grid_x, l.grid_y, l.grid_z, l.block_x, l.block_y, l.block_z, l.shared_size})
    out.Put(v);
  out.Put(l.code_address);
  out.Put(l.entry_offset);
  for (const ComputeLaunch::ConstBuffer& cb : l.const_buffers) {
    out.Put(uint8_t{cb.valid});
    out.Put(cb.address);
    out.Put(cb.size);
  }
  out.Put(l.temp_address);
  out.Put(l.temp_size);
  out.Put(l.local_base);
  out.Put(l.shared_base);
  out.Put(constants_.grid_id);
  out.Put(static_cast<uint32_t>(code_image_.size()));
  out.Bytes(code_image_.data(), code_image_.size());
  for (int bank = 0; bank < ComputeLaunch::kConstBuffers; ++bank) {
    out.Put(constants_.bank_size[bank]);
    out.Bytes(constants_.bank_data[bank], constants_.bank_size[bank]);
  }
  out.Put(next_block_);
  out.Put(done_blocks_);
  out.Put(thread_instructions_);
  out.Put(static_cast<uint32_t>(parked_.size()));
  for (const BlockState* b : parked_) SaveBlock(out, *b);
  // The job is switched out: its blocks go, and it never runs again.
  parked_.clear();
  free_.clear();
  blocks_.clear();
  workers_.clear();
  finished_ = true;
  fault_.kind = ComputeFault::Kind::kNone;
  return true;
}

bool SimtJob::RestoreBlock(ImageReader& in, BlockState* b) {
  const Program& p = *program_;
  const LaunchConstants& c = constants_;
  uint64_t linear = 0;
  if (!in.Get(&linear) || linear >= next_block_) return false;
  if (!InitBlock(b, linear)) return false;
  if (!in.Get(&b->live_threads) || b->live_threads == 0 || b->live_threads > c.block_threads ||
      !in.Bytes(b->bar_arrived, sizeof b->bar_arrived) || !in.Get(&b->next_warp) ||
      b->next_warp >= c.warps_per_block) {
    return false;
  }
  for (uint32_t arrived : b->bar_arrived) {
    if (arrived > c.block_threads) return false;
  }
  const uint32_t ops = static_cast<uint32_t>(p.ops.size());
  for (Warp& w : b->warps) {
    const uint32_t outside = w.exited;  // InitBlock marks the lanes past the block exited
    if (!in.Get(&w.pc) || !in.Get(&w.active) || !in.Get(&w.exited) || !in.Get(&w.pending_count) ||
        !in.Bool(&w.waiting) || !in.Bool(&w.done) || !in.Bytes(w.preds, sizeof w.preds) ||
        w.pending_count > kLanes || !in.Bytes(w.pending, sizeof(Group) * w.pending_count)) {
      return false;
    }
    // The interpreter indexes ops by pc and bar_arrived by barrier - 1, and trusts the lane
    // sets to be disjoint: check all of it.
    if ((w.active != 0 && w.pc >= ops) || (w.exited & outside) != outside ||
        (w.active & w.exited) != 0 || w.preds[isa::kPredTrue] != kFullMask) {
      return false;
    }
    uint32_t seen = w.active | w.exited;
    w.next_join = kNoPc;
    for (uint32_t i = 0; i < w.pending_count; ++i) {
      const Group& g = w.pending[i];
      if (g.pc >= ops || g.mask == 0 || (g.mask & seen) != 0 || g.barrier > isa::kMaxBarriers)
        return false;
      seen |= g.mask;
      if (g.barrier == 0 && g.pc < w.next_join) w.next_join = g.pc;
    }
    if (w.done != (w.exited == kFullMask)) return false;
  }
  return in.Bytes(b->regs.data.get(), p.RegisterFileBytes() * c.warps_per_block) &&
         in.Bytes(b->shared.data.get(), c.shared_size) &&
         in.Bytes(b->local.data.get(), size_t{p.header.local_bytes} * kLanes * c.warps_per_block);
}

bool SimtJob::Restore() {
  const std::vector<uint8_t> image = std::move(resume_image_);
  resume_image_.clear();
  auto corrupt = [&](const std::string& what) {
    return Fault(ComputeFault::Kind::kInvalidLaunch, "context image rejected: " + what);
  };
  ImageReader in(image);
  uint32_t magic = 0, version = 0;
  if (!in.Get(&magic) || !in.Get(&version) || magic != kImageMagic || version != kImageVersion)
    return corrupt("not a version " + std::to_string(kImageVersion) + " context image");
  ComputeLaunch& l = launch_;
  bool ok = true;
  for (uint32_t* v : {&l.channel, &l.grid_x, &l.grid_y, &l.grid_z, &l.block_x, &l.block_y,
                      &l.block_z, &l.shared_size})
    ok = ok && in.Get(v);
  ok = ok && in.Get(&l.code_address) && in.Get(&l.entry_offset);
  for (ComputeLaunch::ConstBuffer& cb : l.const_buffers)
    ok = ok && in.Bool(&cb.valid) && in.Get(&cb.address) && in.Get(&cb.size);
  ok = ok && in.Get(&l.temp_address) && in.Get(&l.temp_size) && in.Get(&l.local_base) &&
       in.Get(&l.shared_base) && in.Get(&constants_.grid_id);
  uint32_t code_bytes = 0;
  ok = ok && in.Get(&code_bytes) && code_bytes <= in.left();
  if (!ok) return corrupt("truncated launch");
  if (!ValidateLaunch()) return false;
  const uint64_t entry = l.code_address + l.entry_offset;
  if (entry < l.code_address) return corrupt("code address overflows");
  code_image_.resize(code_bytes);
  if (!in.Bytes(code_image_.data(), code_bytes)) return corrupt("truncated code");
  // The code the grid started with, decoded (and validated) again, not re-read from memory: the
  // resumed grid runs what it started with.
  Result<std::shared_ptr<const Program>> program =
      engine_->LookUpOrDecode(memory_->AddressSpaceId(), entry, code_image_);
  if (!program.ok()) return corrupt("code: " + program.status().message());
  program_ = *program;
  if (!SetUpConstants()) return false;
  for (int bank = 0; bank < ComputeLaunch::kConstBuffers; ++bank) {
    uint32_t size = 0;
    if (!in.Get(&size) || size > kMaxConstBankBytes || size > in.left())
      return corrupt("constant bank " + std::to_string(bank));
    banks_[bank].resize(size);
    if (!in.Bytes(banks_[bank].data(), size)) return corrupt("truncated constant bank");
    constants_.bank_data[bank] = size > 0 ? banks_[bank].data() : nullptr;
    constants_.bank_size[bank] = size;
  }
  total_blocks_ = uint64_t{l.grid_x} * l.grid_y * l.grid_z;
  uint32_t in_flight = 0;
  // A drained grid resumes starting blocks again: draining ends with the switch.
  if (!in.Get(&next_block_) || !in.Get(&done_blocks_) || !in.Get(&thread_instructions_) ||
      !in.Get(&in_flight) || next_block_ > total_blocks_ || done_blocks_ > next_block_ ||
      in_flight != next_block_ - done_blocks_) {
    return corrupt("block counters");
  }
  for (uint32_t i = 0; i < in_flight; ++i) {
    blocks_.push_back(std::make_unique<BlockState>());
    if (!RestoreBlock(in, blocks_.back().get()))
      return corrupt("thread block " + std::to_string(i) + " of " + std::to_string(in_flight));
    parked_.push_back(blocks_.back().get());
  }
  if (in.left() != 0) return corrupt(std::to_string(in.left()) + " trailing bytes");
  return true;
}

SimtEngine::SimtEngine(const EngineOptions& options)
    : options_(options),
      pool_(options.workers > 0 ? options.workers
                                : std::max(1u, std::thread::hardware_concurrency())) {
  run_warp_ = SelectRunWarp(options.interpreter, &interpreter_name_);
}

SimtEngine::~SimtEngine() = default;

std::unique_ptr<SimtEngine> SimtEngine::Create(const EngineOptions& options) {
  return std::unique_ptr<SimtEngine>(new SimtEngine(options));
}

std::unique_ptr<ComputeJob> SimtEngine::Start(const ComputeLaunch& launch, ChannelMemory* memory) {
  return std::make_unique<SimtJob>(this, launch, memory, next_grid_id_++);
}

std::unique_ptr<ComputeJob> SimtEngine::Resume(const std::vector<uint8_t>& image,
                                               ChannelMemory* memory) {
  auto job = std::make_unique<SimtJob>(this, image, memory);
  job->RestoreNow();
  return job;
}

void SimtEngine::FlushCodeCache() {
  std::lock_guard<std::mutex> lock(cache_mu_);
  cache_.clear();
}

SimtEngine::CacheStats SimtEngine::cache_stats() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  CacheStats s = stats_;
  s.entries = cache_.size();
  return s;
}

Result<std::shared_ptr<const Program>> SimtEngine::LookUpOrDecode(uint64_t space_id,
                                                                  uint64_t address,
                                                                  std::vector<uint8_t> bytes) {
  std::lock_guard<std::mutex> lock(cache_mu_);
  ++cache_clock_;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->space_id != space_id || it->address != address) continue;
    if (it->bytes == bytes) {  // the VM runs exactly what it wrote: same bytes, same decode
      ++stats_.hits;
      it->last_use = cache_clock_;
      return it->program;
    }
    ++stats_.stale;
    cache_.erase(it);
    break;
  }
  ++stats_.misses;
  Result<isa::Kernel> kernel = isa::DecodeKernel(bytes);
  if (!kernel.ok()) return kernel.status();
  GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, LowerKernel(*kernel));
  if (cache_.size() >= options_.code_cache_entries && !cache_.empty()) {
    auto oldest = std::min_element(
        cache_.begin(), cache_.end(),
        [](const CacheEntry& a, const CacheEntry& b) { return a.last_use < b.last_use; });
    cache_.erase(oldest);
  }
  if (options_.code_cache_entries > 0) {
    cache_.push_back(CacheEntry{space_id, address, std::move(bytes), program, cache_clock_});
  }
  return program;
}

}  // namespace gpuvm::sim::compute
