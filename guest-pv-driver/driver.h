// The guest GPU driver: a user-space GF100 (Fermi) driver in the style of nouveau, offering what
// Gdev's user-mode runtime needs. It reaches the GPU only through a Bus (bus.h) and is the same
// code natively and under every virtualization mode: native, pt, fv and pv (the para-virtual modes
// replace only its page-table writer, page_table_writer.h / pv_calls.h). docs/GUEST-DRIVER.md is
// the guide: layout of VRAM and BARs, register sequences, BAR-access counts per operation, error
// handling.
//
//   Driver    one per GPU: probe (PMC_BOOT_0), engine enable, VRAM size from PFB, VRAM allocator,
//             instance memory through BAR3 (bootstrapped through PRAMIN), BAR1, PFIFO, playlist,
//             error/interrupt decoding.
//   Context   one GPU virtual address space (a CUDA context): device memory (VRAM), pinned host
//             memory (SYSRAM), registered host memory, kernel code, events, and its channels.
//   Channel   one PFIFO channel in that space (a CUDA stream): IB ring + pushbuffer in pinned host
//             memory, copies (PCOPY or M2MF), memsets (M2MF), compute launches (class 0x90c0),
//             fences (semaphore releases the CPU polls in host memory), GPU-side event waits.
//
// Addresses: everything a Context hands out is a GPU virtual address ("va") in that context. Copies
// and launches take vas; a va range must lie inside one allocation of the context.
//
// Errors: gpuvm::Status. Bad arguments -> kInvalidArgument / kOutOfRange / kNotFound. A GPU error
// (MMU fault, channel/pushbuffer error, compute trap) found by the driver's interrupt decoding is
// recorded as a GpuFault on the context that owns the channel; from then on every call on that
// context returns kAborted with the fault's description (as a CUDA context is unusable after a
// fault). Synchronous calls wait without limit by default (ContextOptions::default_timeout); waits
// given a timeout that runs out return kDeadlineExceeded, and the context stays usable.
//
// Threading and lifetime:
//   - Driver, Context, Channel and Event methods are all thread-safe. A Channel serializes its own
//     operations (one internal lock per channel); different channels run concurrently. Waits
//     (Channel::Wait, Event::Wait) hold no lock while they poll, so one thread may wait on a
//     channel while another submits to it.
//   - Lock order (for readers of the code): Channel -> Context -> Driver.
//   - The Driver must outlive its Contexts; a Context owns its Channels and Events (pointers stay
//     valid until DestroyChannel/DestroyEvent or the Context is destroyed). Destroying a Context
//     waits (bounded) for its channels to go idle, removes them from the playlist and frees all of
//     its memory. Do not destroy a Context while another thread still calls into it.
//   - DestroyChannel may run while other threads call Context::Synchronize / Free (which wait for
//     every channel of the context): the channel stays listed, and is waited for, until it has
//     drained; it is deleted only when no such wait still uses it. Calling the destroyed channel
//     itself from another thread is the caller's error (as for a CUDA stream).
#ifndef GPUVM_GUEST_PV_DRIVER_DRIVER_H_
#define GPUVM_GUEST_PV_DRIVER_DRIVER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/device.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/drm_device.h"
#include "guest-pv-driver/page_table_writer.h"

namespace gpuvm::guest {

class Driver;
class Context;
class Channel;
class Event;

// ---- Limits the runtime reports as device attributes and checks launches against ----
inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint32_t kMaxThreadsPerBlock = 1024;
inline constexpr std::array<uint32_t, 3> kMaxBlockDim = {1024, 1024, 64};
// GRIDDIM_YX packs x and y into 16 bits each (gpu/hw/classes.h).
inline constexpr std::array<uint32_t, 3> kMaxGridDim = {65535, 65535, 65535};
inline constexpr uint32_t kMaxSharedBytesPerBlock = 48 << 10;  // Fermi: 48 KiB of the 64 KiB L1
inline constexpr uint32_t kMaxParamBytes = 4096;               // docs/ISA.md: bank 0, <= 4 KiB
inline constexpr uint32_t kMaxLocalBytesPerThread = 16 << 10;  // docs/ISA.md
inline constexpr uint32_t kConstBanks = 16;
inline constexpr std::chrono::nanoseconds kWaitForever = std::chrono::nanoseconds::max();
// The managed window (our choice): the upper half of the 40-bit GPU address space, [512 GiB,
// 1 TiB). Context::AllocManaged places memory there at the same host and GPU address. A Linux
// process has nothing mapped there unless it asks for it (executables, the heap and mmap's
// default placement sit below 4 GiB or far above 1 TiB); device memory stays below the window.
inline constexpr uint64_t kManagedBase = 512ull << 30;
inline constexpr uint64_t kManagedLimit = 1ull << 40;  // gf100::vm::kVaLimit

// A pitched 2D copy between two vas of one context (Channel::Copy2DAsync).
struct Copy2D {
  uint64_t dst_va = 0, dst_pitch = 0;
  uint64_t src_va = 0, src_pitch = 0;
  uint64_t width = 0, height = 0;  // bytes per row, rows
};

enum class CopyEngine : uint8_t {
  kPcopy,  // GF100_DMA_COPY (0x90b5), the copy engine; nouveau's and Gdev's choice for big copies
  kM2mf,   // FERMI_MEMORY_TO_MEMORY_FORMAT_A (0x9039), part of PGRAPH
};

struct DriverOptions {
  // VRAM below this is never allocated (VGA/VBIOS area on a real board). (our choice) 1 MiB.
  uint64_t reserved_vram = 1ull << 20;
  // Use the Bus's interrupt line when it has one: then a wait reads no register unless the line was
  // raised. Without it a wait checks PMC_INTR_HOST once per error_poll_interval.
  bool use_interrupts = true;
  std::chrono::microseconds error_poll_interval{1000};
  // How GPU page-table updates reach the GPU; empty = native (BAR3 stores + MMIO TLB flush), or
  // para-virtual calls when the device offers them (below).
  PageTableWriterFactory page_table_writer;
  // Para-virtual page-table calls (docs/PARAVIRT.md), without a page_table_writer: kAuto looks for
  // the device's PV window (one BAR0 read) when the Bus is remote (a VM) and uses it when it is
  // there; kOn looks on any Bus; kOff never looks (native page tables).
  enum class ParaVirtual : uint8_t { kAuto, kOn, kOff };
  ParaVirtual para_virtual = ParaVirtual::kAuto;
};

struct ContextOptions {
  // Per channel: IB ring entries (power of two, 2..32768) and pushbuffer ring bytes (>= 64 KiB);
  // both live in pinned host memory.
  uint32_t ib_entries = 1024;
  uint64_t pushbuffer_bytes = 1ull << 20;
  // Per channel: bounce buffers for copies from/to pageable host memory (two halves, pipelined), at
  // most this size; a channel's buffer starts at what its first staged copy needs (64 KiB at
  // least) and grows with larger ones.
  uint64_t staging_bytes = 4ull << 20;
  CopyEngine copy_engine = CopyEngine::kPcopy;
  // Synchronous host<->VRAM copies up to this size go through a BAR1 mapping of the device memory
  // instead of DMA (Gdev: 4 KiB). 0 disables the BAR1 path.
  uint64_t bar1_copy_threshold = 4096;
  // Device memory freed by the program stays mapped, up to this many bytes per context (each
  // allocation at most 4 MiB), for the next allocation of the same size: a cudaMalloc/cudaFree per
  // iteration then writes no page table and flushes no TLB (under fv each is a trapped flush and a
  // shadow scan). As with CUDA's own sub-allocation, a kernel that uses a freed pointer may then
  // reach memory instead of faulting. 0 unmaps every free at once.
  uint64_t recycle_bytes = 32ull << 20;
  // Limit of the waits made inside synchronous calls (copies, Synchronize and Wait without a
  // timeout, event waits of the runtime). kWaitForever (the default), as CUDA: a kernel may run
  // for minutes and the call waits until it ends. A wait still ends early with the context's fault
  // (decoded from the device's interrupts while waiting) and with kUnavailable when the GPU is
  // gone (in a VM: PMC_BOOT_0 reads all-ones, probed every second of waiting). Tests lower it to
  // see kDeadlineExceeded. docs/GUEST-DRIVER.md, "Waits".
  std::chrono::nanoseconds default_timeout = kWaitForever;
  // Waits the driver makes for itself and must bound: a new channel's setup (the first work a
  // channel runs; a channel PFIFO never schedules fails cuCtxCreate / cuStreamCreate here instead
  // of hanging them). Long enough to wait out another VM's kernel under a hypervisor (the
  // aggregator's max_run is 5 s). Teardown drains are bounded separately (kChannelDrainWait, 5 s).
  std::chrono::nanoseconds setup_timeout = std::chrono::seconds(60);
};

struct DeviceInfo {
  gpu::PciIdentity pci;
  uint32_t boot0 = 0;    // PMC_BOOT_0 as read
  uint32_t chipset = 0;  // 0xc0
  uint32_t stepping = 0;
  std::string name;  // from the PCI device id, e.g. "Quadro 6000"
  uint64_t vram_bytes = 0;
  uint32_t fb_partitions = 0;  // enabled FB partitions, each contributing its VRAM
  uint64_t large_page_bytes = 0;
  uint32_t channels = 0;  // hardware channels (128)
};

// Counts of Bus operations made by the driver since it was created, per BAR (index 0 = BAR0,
// 1 = BAR1, 2 = BAR3). Under virtualization each single access to a trapped BAR is a VM exit.
// Para-virtual calls (docs/PARAVIRT.md) since the driver was created; zeros without them.
struct ParaVirtualCounters {
  uint32_t mode = 0;  // 0: native page tables; 1 pv-naive; 2 pv-multicall (PV_MODE)
  uint64_t calls = 0;
  uint64_t doorbells = 0;
};

struct BusCounters {
  std::array<uint64_t, 3> reads{};
  std::array<uint64_t, 3> writes{};
  std::array<uint64_t, 3> block_reads{};
  std::array<uint64_t, 3> block_writes{};
  uint64_t block_bytes = 0;
  uint64_t dma_maps = 0;
  uint64_t total() const;  // every access, single and block
  BusCounters operator-(const BusCounters& earlier) const;
};

// A GPU error, decoded from the device's registers (PFIFO/PGRAPH interrupts, VM_FAULT records).
struct GpuFault {
  enum class Kind : uint8_t {
    kMmuFault,      // a translation failed (VM_FAULT): bad pointer, unmapped or read-only page
    kCommandError,  // PFIFO's command fetch rejected the channel's commands (PSUBFIFO interrupt)
    kComputeTrap,  // a compute job failed other than by the MMU (PGRAPH TRAP): bad code, misaligned
                   // or out-of-window access, trap instruction, invalid launch
  };
  Kind kind = Kind::kMmuFault;
  uint32_t channel = 0;  // hardware channel id
  // kMmuFault: the faulting virtual address, direction and gf100::FaultReason (or, under gpuvm's
  // full virtualization, gf100::kFaultReasonGpuvmOutOfVram: no VRAM left); unit is the
  // VM_FAULT index (gf100::FaultUnit).
  uint64_t address = 0;
  bool write = false;
  uint32_t reason = 0;
  uint32_t unit = 0;
  // kCommandError: PSUBFIFO INTR bits and the method/data it stopped at.
  uint32_t subfifo_intr = 0;
  uint32_t method = 0;
  uint32_t subchannel = 0;
  uint32_t data = 0;
  // kComputeTrap: why the job stopped, as the MP's trap registers said: the warp error
  // (gf100::pgraph::MpWarpError, 0x504648) and the global error bits (gf100::pgraph::kMpGlobal*,
  // 0x504650). Both 0 when the device gave no reason.
  uint32_t warp_error = 0;
  uint32_t global_error = 0;
  std::string message;  // one sentence
};

enum class MemoryKind : uint8_t {
  kDevice,          // VRAM (cuMemAlloc)
  kHost,            // pinned host memory the driver allocated (cuMemAllocHost / cuMemHostAlloc)
  kRegisteredHost,  // the caller's host memory made reachable (cuMemHostRegister)
  kCode,            // VRAM holding kernel images (LoadCode)
  kManaged,         // pinned host memory at a host address equal to its va (cuMemAllocManaged)
};

// What an allocation is; returned by value (the Context keeps the real bookkeeping).
struct Allocation {
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t va = 0;       // GPU virtual address of the first byte
  uint64_t size = 0;     // bytes as requested
  void* host = nullptr;  // kHost / kRegisteredHost / kManaged: the CPU address of the first byte
};

// Completion of the work a channel had been given up to a point. Sequence 0 is always complete.
struct Fence {
  uint32_t channel = 0;  // hardware channel id
  uint32_t sequence = 0;
  friend bool operator==(const Fence&, const Fence&) = default;
};

// Commands the caller wrote into memory of the channel's context, run as one IB entry (a DRM
// pushbuffer's push: user space builds the methods, the kernel points the GPU at them).
struct CommandSegment {
  uint64_t va = 0;     // first word; 4-byte aligned
  uint32_t words = 0;  // 1 .. gp::kIbLengthMask (gpu/hw/gpfifo.h)
};

// A constant bank binding beyond bank 0 (docs/ISA.md: bank 1 module constants, bank 2 addresses of
// module globals). The bank's memory is read by the kernel when the launch starts.
struct ConstBankBinding {
  uint32_t index = 1;  // 1..15
  uint64_t va = 0;
  uint32_t size = 0;  // bytes, multiple of 4, <= 64 KiB
};

struct LaunchParams {
  // Kernel image (docs/ISA.md "Kernel image") at code_address + entry_offset, e.g. from LoadCode.
  uint64_t code_address = 0;
  uint32_t entry_offset = 0;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  // Shared memory per block: the image's static shared_bytes plus the launch's dynamic bytes (the
  // engine refuses less than the image declares).
  uint32_t shared_bytes = 0;
  uint32_t local_bytes_per_thread = 0;  // sizes the TEMP backing; 0 = none
  std::span<const uint8_t> params;      // copied into constant bank 0 (<= kMaxParamBytes)
  std::vector<ConstBankBinding> banks;  // further banks to bind
};

class Driver {
 public:
  // Probes and initializes the GPU behind `bus` (which must outlive the driver): checks PMC_BOOT_0
  // says GF100, enables PFIFO/PGRAPH/PCOPY, sizes VRAM from PFB, sets up BAR3 (instance memory)
  // through PRAMIN, BAR1 and the USER area, PFIFO interrupts. kFailedPrecondition for another chip.
  static Result<std::unique_ptr<Driver>> Create(Bus* bus, const DriverOptions& options = {});
  // The driver as DRM user space (drm_device.h): a kernel driver behind `drm` (which must outlive
  // the driver) owns the GPU; each Context is one DRM file, memory comes from the kernel's objects,
  // submissions are GEM_PUSHBUF calls. Everything above (contexts, channels, copies, launches,
  // fences, events) behaves as on a Bus, except: no BAR1 path for small copies (they are staged),
  // and a GPU fault is known only as "the kernel stopped this context" (no fault address).
  static Result<std::unique_ptr<Driver>> CreateOnDrm(DrmDevice* drm,
                                                     const DriverOptions& options = {});
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const DeviceInfo& info() const;
  Result<std::unique_ptr<Context>> CreateContext(const ContextOptions& options = {});

  // Bytes of VRAM not allocated (memory of every context plus driver structures).
  uint64_t vram_free() const;
  BusCounters bus_counters() const;
  // The para-virtual calls and doorbells so far (mode 0 when the device offers none).
  ParaVirtualCounters para_virtual_counters() const;

  // Reads and decodes pending GPU errors now (a wait does this by itself). Faults are recorded on
  // the contexts owning the channels. Returns how many errors were decoded.
  size_t ServiceInterrupts();
  // The cheap form a server polls with: decodes only when the interrupt line is up or (without
  // one) once per DriverOptions::error_poll_interval.
  void PollErrors();

  class Impl;
  Impl* impl() { return impl_.get(); }

 private:
  explicit Driver(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Context {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // OK, or kAborted describing the first GPU fault of this context (sticky).
  Status status() const;
  std::optional<GpuFault> fault() const;

  // ---- memory ----
  // size > 0. The contents are undefined, as with cuMemAlloc (memset if needed). Allocations of
  // 1 MiB and more are aligned to (and mapped with) 128 KiB large pages.
  Result<Allocation> AllocDevice(uint64_t size);
  // Pinned host memory (zero-filled, 4 KiB aligned) mapped into the context as SYSRAM.
  Result<Allocation> AllocHost(uint64_t size);
  // Makes the caller's [host, host + size) reachable, at any address and size: the 4 KiB pages
  // covering it are mapped; Allocation::va is the GPU address of `host` itself. Bytes already
  // registered (or pinned) in this context give kAlreadyExists; neighbouring registrations may
  // share a page (the later one reuses the earlier one's mapping of it).
  // Free(va) with that va unregisters it.
  Result<Allocation> RegisterHost(void* host, uint64_t size);
  // Managed memory: zero-filled pinned host memory (SYSRAM, as AllocHost) whose host address is
  // its GPU virtual address, so one pointer serves the CPU and kernels. The pages are placed in the
  // managed window [kManagedBase, kManagedLimit) of the process's own address space, which the
  // device allocations of every context stay clear of. A range whose host pages the process
  // already uses is skipped (never replaced); kResourceExhausted when the window is full or the
  // ranges tried were all taken. kUnimplemented on a DRM driver (CreateOnDrm), whose kernel picks
  // the GPU addresses of its objects.
  Result<Allocation> AllocManaged(uint64_t size);
  // Frees any allocation by its va (the first byte); kNotFound for anything else. Waits for the
  // context's channels to go idle first (the GPU may still use the memory), as cuMemFree does.
  Status Free(uint64_t va);
  // Free for memory the caller knows the GPU is done with (a stream-ordered free whose stream
  // passed it): no wait for the context's channels.
  Status FreeIdle(uint64_t va);
  // The allocation containing `va` / the host allocation containing `host`.
  Result<Allocation> Find(uint64_t va) const;
  Result<Allocation> FindHost(const void* host) const;

  // Copies a kernel image (or several, back to back) into VRAM and returns its allocation; the code
  // cache is flushed before the next launch on every channel. Free it with Free(va).
  Result<Allocation> LoadCode(std::span<const uint8_t> image);

  // ---- channels and events ----
  // The channel created with the context (CUDA's null stream).
  Channel* default_channel();
  // Returns once the channel's own setup commands have run (bounded wait): a new channel is idle,
  // IsDone(last_fence()) is true, as cuStreamQuery on a fresh CUDA stream.
  Result<Channel*> CreateChannel();
  // Waits (bounded) for the channel to go idle, then removes it. kNotFound for a foreign pointer;
  // the default channel cannot be destroyed.
  Status DestroyChannel(Channel* channel);
  Result<Event*> CreateEvent();
  Status DestroyEvent(Event* event);

  // Waits for every channel of the context.
  Status Synchronize();
  Status Synchronize(std::chrono::nanoseconds timeout);

  uint64_t va_limit() const;  // highest valid GPU virtual address
  const ContextOptions& options() const;

  class Impl;
  Impl* impl() { return impl_.get(); }

 private:
  friend class Driver;
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Channel {
 public:
  uint32_t id() const;  // hardware channel id (0..127)
  Context* context() const;

  // ---- asynchronous work: queued and kicked at once (one IB_PUT write); returns its fence ----
  // dst and src are vas of this context (device, pinned host or registered host memory).
  Result<Fence> CopyAsync(uint64_t dst_va, uint64_t src_va, uint64_t bytes);
  // `height` rows of `width` bytes, rows `src_pitch` / `dst_pitch` bytes apart (pitch >= width
  // when height > 1); each side's span (pitch * (height - 1) + width) inside one allocation. The
  // copy engines' pitched multi-line copies: one submission.
  Result<Fence> Copy2DAsync(const Copy2D& copy);
  Result<Fence> Memset8Async(uint64_t dst_va, uint8_t value, uint64_t count);
  Result<Fence> Memset32Async(uint64_t dst_va, uint32_t value, uint64_t count);  // dst 4-aligned
  // `height` rows of `width` bytes filled with the 32-bit `pattern` (as Memset32Async; a byte
  // value repeated four times for a byte memset), rows `pitch` apart (>= width when height > 1),
  // the span inside one allocation; one submission (M2MF: the first row, then copies of it).
  Result<Fence> Memset2DAsync(uint64_t dst_va, uint64_t pitch, uint32_t pattern, uint64_t width,
                              uint64_t height);
  Result<Fence> Launch(const LaunchParams& params);
  // The event completes when everything submitted to this channel before it has completed.
  Result<Fence> Record(Event* event);
  // Work submitted to this channel after this call waits on the GPU until `event` completes (its
  // latest Record). An event never recorded is complete.
  Status WaitEvent(const Event* event);

  // Runs `segments` (1 .. ContextOptions::ib_entries - 2 of them) in order, then the channel's own
  // fence: one IB entry each, one IB_PUT write for all. Each segment must lie inside one
  // allocation of this context (kInvalidArgument / kNotFound otherwise); the words themselves are
  // not read — the GPU runs them inside this context's address space, so wrong ones can only fault
  // this context.
  Result<Fence> SubmitSegments(std::span<const CommandSegment> segments);

  // ---- synchronous copies between host memory (any) and a va (any kind) ----
  // Ordered after all earlier work of this channel; they return when the bytes have arrived.
  // Host memory inside a pinned/registered allocation of this context is copied by DMA directly;
  // small VRAM transfers go through BAR1; the rest is staged through bounce buffers.
  Status CopyHostToDevice(uint64_t dst_va, const void* src, uint64_t bytes);
  Status CopyDeviceToHost(void* dst, uint64_t src_va, uint64_t bytes);

  // ---- completion ----
  Result<bool> IsDone(Fence fence);
  Status Wait(Fence fence);  // with the context's default timeout
  Status Wait(Fence fence, std::chrono::nanoseconds timeout);
  Status Synchronize();  // waits for the last fence
  Status Synchronize(std::chrono::nanoseconds timeout);
  Fence last_fence() const;

  class Impl;
  Impl* impl() { return impl_.get(); }
  ~Channel();

 private:
  friend class Context;
  explicit Channel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A completion marker with a GPU timestamp (cuEvent).
class Event {
 public:
  // True when the latest Record has completed (or it was never recorded).
  Result<bool> Query();
  Status Wait(std::chrono::nanoseconds timeout = kWaitForever);
  // GPU time (ns, device clock) at which the latest recorded event completed. kFailedPrecondition
  // when never recorded, kUnavailable while still pending.
  Result<uint64_t> TimestampNs();

  // The CPU as the event's producer (host functions on a stream): ArmForHost makes the event
  // pending with a new target the GPU never writes — Channel::WaitEvent then holds that channel's
  // later work — and ReleaseFromHost(target) completes it from the CPU. Targets are released in the
  // order they were armed. An armed target must be released (else the waiting channel hangs until
  // its context's bounded teardown).
  uint32_t ArmForHost();
  void ReleaseFromHost(uint32_t target);

  class Impl;
  Impl* impl() { return impl_.get(); }
  ~Event();

 private:
  friend class Context;
  explicit Event(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_DRIVER_H_
