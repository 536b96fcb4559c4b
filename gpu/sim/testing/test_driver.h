// A minimal register-level GF100 driver for tests, written the way nouveau drives the hardware:
// VRAM through the PRAMIN window, page tables written into VRAM, TLB flushes with nouveau's
// 0x100c80 handshake, BAR1/BAR3 bound to VMs through their instance registers, channels created
// with RAMFC + CHAN_TABLE + playlist, commands submitted as pushbuffer segments and IB entries with
// IB_PUT written through the channel's USER page in BAR1. It touches the GPU only through the
// gpu::Device port, so it drives the software GPU and any other Device alike.
//
// Reusable by every component's tests (device, compute engine, guest driver, aggregator): link
// `gpu_sim_testing`.
//
// Threading: not thread-safe; one test thread uses it. Misuse (VRAM exhaustion, bad arguments)
// aborts with a message: this is test code.
#ifndef GPUVM_GPU_SIM_TESTING_TEST_DRIVER_H_
#define GPUVM_GPU_SIM_TESTING_TEST_DRIVER_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <vector>

#include "gpu/device.h"
#include "gpu/hw/vm.h"

namespace gpuvm::sim::testing {

struct MapFlags {
  gf100::vm::Target target = gf100::vm::Target::kVram;
  bool read_only = false;
  bool supervisor_only = false;
  bool large = false;  // 128 KiB pages (the default VM_CFG): va, physical address and size aligned
};

class TestDriver;

// A GPU virtual address space: a page directory in VRAM and page tables allocated on demand.
class Vm {
 public:
  uint64_t page_directory() const { return pd_; }
  uint64_t limit() const { return limit_; }

  // Maps [va, va + size) to physical [physical, physical + size) (VRAM, or SYSRAM bus addresses).
  void Map(uint64_t va, uint64_t physical, uint64_t size, const MapFlags& flags = {});
  void Unmap(uint64_t va, uint64_t size);
  // Reserves `size` bytes of virtual addresses (aligned to `align`) above everything reserved so
  // far.
  uint64_t AllocVa(uint64_t size, uint64_t align = 0x1000);
  // Allocates VRAM and maps it at a fresh address; returns the virtual address (*physical: the VRAM
  // one).
  uint64_t AllocMapped(uint64_t size, uint64_t* physical = nullptr, const MapFlags& flags = {});

  // Raw page-table entries (the small-page PTE unless `large`).
  uint64_t ReadPte(uint64_t va, bool large = false);
  void WritePte(uint64_t va, uint64_t pte, bool large = false);

  // nouveau's TLB flush of this space: wait for a free slot in 0x100c80, PD >> 8 to 0x100cb8,
  // 0x80000001 to 0x100cbc, wait for 0x100c80 bit 15.
  void Flush();
  // Writes this space's page directory and limit into the instance block at `inst` (RAMIN
  // 0x200-0x20c).
  void BindTo(uint64_t inst);

 private:
  friend class TestDriver;
  struct Pde {
    uint64_t small_table = 0;  // 0 = none
    uint64_t large_table = 0;
  };
  Vm(TestDriver* driver, uint64_t pd, uint64_t limit) : driver_(driver), pd_(pd), limit_(limit) {}
  uint64_t PteAddress(uint64_t va, bool large, bool create);
  void WritePde(uint64_t index);

  TestDriver* driver_;
  uint64_t pd_;
  uint64_t limit_;
  uint64_t next_va_ =
      0x1000000;  // (our choice) leave the first 16 MiB unused to catch null pointers
  std::map<uint64_t, Pde> pdes_;
};

struct ChannelOptions {
  uint32_t ib_entries = 512;  // power of two
  uint64_t pushbuffer_size = 256 << 10;
};

class Channel {
 public:
  uint32_t id() const { return id_; }
  uint64_t instance() const { return inst_; }
  Vm* vm() const { return vm_; }
  uint64_t userd() const { return userd_; }
  uint64_t ib_address() const { return ib_va_; }
  uint32_t ib_entries() const { return ib_entries_; }

  // Pushbuffer building (words are collected until Submit).
  Channel& Inc(uint32_t subchannel, uint32_t method, std::initializer_list<uint32_t> data);
  Channel& Inc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data);
  Channel& NonInc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data);
  Channel& OneInc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data);
  Channel& Immediate(uint32_t subchannel, uint32_t method, uint32_t value);
  Channel& Raw(uint32_t word);
  size_t pending_words() const { return pending_.size(); }

  // Writes the pending words into the pushbuffer, appends an IB entry for them and publishes the
  // new IB_PUT through the USER page in BAR1.
  void Submit();
  // Appends an arbitrary IB entry and publishes IB_PUT.
  void SubmitIbEntry(uint64_t va, uint32_t words);
  // Writes IB_PUT (USER + 0x8c) through BAR1, as the driver would.
  void WriteIbPut(uint32_t put);
  uint32_t ib_put() const { return ib_put_; }
  // Read back through BAR1.
  uint32_t ReadIbGet();
  uint32_t ReadReference();

 private:
  friend class TestDriver;
  Channel() = default;
  TestDriver* driver_ = nullptr;
  uint32_t id_ = 0;
  Vm* vm_ = nullptr;
  uint64_t inst_ = 0;
  uint64_t userd_ = 0;
  uint64_t user_bar1_ = 0;  // the USER page's BAR1 offset
  uint64_t ib_va_ = 0, ib_phys_ = 0;
  uint32_t ib_entries_ = 0;
  uint32_t ib_put_ = 0;
  uint64_t pb_va_ = 0, pb_phys_ = 0, pb_size_ = 0, pb_pos_ = 0;
  std::vector<uint32_t> pending_;
};

class TestDriver {
 public:
  // `vram_size`: the device's VRAM size. VRAM below `reserved` is left alone. `zero_fill`: clear
  // every allocation through PRAMIN (skip it only for a fresh device whose VRAM is known to be
  // zero).
  TestDriver(gpu::Device* device, uint64_t vram_size, uint64_t reserved = 0x10000,
             bool zero_fill = true);
  ~TestDriver();

  gpu::Device* device() { return device_; }

  // ---- VRAM (bump allocator; the memory is zeroed through PRAMIN) ----
  uint64_t AllocVram(uint64_t size, uint64_t align = 0x1000);
  uint32_t Read32(uint64_t vram);
  void Write32(uint64_t vram, uint32_t value);
  uint64_t Read64(uint64_t vram);
  void Write64(uint64_t vram, uint64_t value);  // low word first
  void WriteBytes(uint64_t vram, const void* data, uint64_t length);
  void ReadBytes(uint64_t vram, void* data, uint64_t length);
  void Fill32(uint64_t vram, uint32_t value, uint64_t length);

  // ---- address spaces and BARs ----
  Vm* CreateVm(uint64_t limit = gf100::vm::kVaLimit - 1);
  // Points BAR1 or BAR3 at `vm` (allocates the BAR's instance block, writes 0x1704 / 0x1714).
  void BindBar(gpu::Bar bar, Vm* vm);
  Vm* bar1_vm() const { return bar1_vm_; }
  Vm* bar3_vm() const { return bar3_vm_; }

  // ---- channels ----
  // Creates channel `chid` in `vm`: IB ring and pushbuffer mapped in the VM, RAMFC, CHAN_TABLE,
  // playlist. The first channel also sets up BAR1 (if not bound yet), the USER area and POLL_AREA.
  Channel* CreateChannel(uint32_t chid, Vm* vm, const ChannelOptions& options = {});
  // Writes the playlist of every created (and not removed) channel and submits it (0x2270/0x2274).
  void CommitPlaylist();
  void RemoveFromPlaylist(uint32_t chid);

  // PMC 0x140, PFIFO 0x2140 and PGRAPH 0x40013c: every interrupt enabled.
  void EnableInterrupts();

 private:
  friend class Vm;
  friend class Channel;
  uint64_t PraminOffset(uint64_t vram);  // moves the window if needed
  void SetupUserArea();

  gpu::Device* device_;
  uint64_t vram_size_;
  uint64_t next_vram_;
  bool zero_fill_;
  uint64_t pramin_base_ = ~0ull;
  std::vector<std::unique_ptr<Vm>> vms_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<uint32_t> playlist_;
  Vm* bar1_vm_ = nullptr;
  Vm* bar3_vm_ = nullptr;
  uint64_t user_area_ = 0;       // VRAM: 128 USER pages
  uint64_t user_area_bar1_ = 0;  // their BAR1 offset
  uint64_t playlist_buffer_ = 0;
};

}  // namespace gpuvm::sim::testing

#endif  // GPUVM_GPU_SIM_TESTING_TEST_DRIVER_H_
