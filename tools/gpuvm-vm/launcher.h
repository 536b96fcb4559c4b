// The local VM launcher (gpuvm-vm): starts a VM of the local hypervisor backend — a process — and
// runs a guest program in it:
//
//   1. the domain: guest RAM (a sealed memfd), the ioreq region, per-vCPU eventfds
//      (hypervisor/local/domain.h);
//   2. its device model: gpuvm-dm --backend local --domain-fd 3 --token-fd 4, which connects to
//      the aggregator (HELLO, AUTH, VM_CONFIG: refused there if the GPU is taken), hands over the
//      guest RAM, and claims the virtual GPU's PCI function; we wait until it has. The token on
//      fd 4 (a pipe) is the VM's one-time token, which we asked the aggregator's control socket
//      for (`vm-token DOMID`, docs/SECURITY.md): without it the aggregator admits no device model;
//   3. the guest program, with GPUVM_BUS=local and $GPUVM_LOCAL_VM_FD naming an inherited socket
//      on which the domain is handed out: the runtime's trapping Bus
//      (guest-pv-driver/local_trap_bus.h) asks for it, enumerates the GPU and traps every BAR
//      access. Every request gets a copy, so the program may be a script running several GPU
//      programs one after another (each brings its own driver, as if it loaded nouveau; two at
//      the same time would fight over the GPU as two drivers would);
//   4. supervision: when the guest exits, the device model is stopped (TEARDOWN: the aggregator
//      resets the GPU before it acknowledges); when the device model dies, the guest is killed (its
//      GPU is gone). A child that is merely stopped (SIGSTOP) is waited for. Both children die
//      with the launcher (PR_SET_PDEATHSIG), so a killed launcher leaves nothing holding the GPU.
//
// Threading: RunVm runs on the calling thread and forks; call it from a process that is
// single-threaded at the time (a parent-death signal belongs to the forking thread).
#ifndef GPUVM_TOOLS_GPUVM_VM_LAUNCHER_H_
#define GPUVM_TOOLS_GPUVM_VM_LAUNCHER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuvm::vm {

struct VmOptions {
  std::string mode = "pt";          // gpuvm-dm --mode; fv-naive|fv-lazy|fv-bar-remap|fv-optimized
                                    // become --mode fv --variant lazy (...), pv-naive|pv-multicall
                                    // --mode pv --variant naive|multicall; pvdrm: no gpuvm-dm, a
                                    // PVDRM backend and split driver (docs/PVDRM.md)
  uint64_t vram_mib = 0;            // fv/pv: the VM's VRAM (0: the aggregator's default)
  uint32_t channels = 0;            // fv/pv: its channel count (0: the aggregator's default)
  std::optional<double> share;      // the VM's GPU share in percent (base/share.h); none: not given
  std::string aggregator;           // socket; empty: $GPUVM_AGGREGATOR or the default
  uint64_t ram_bytes = 1ull << 30;  // guest RAM (a lazily backed memfd)
  uint32_t vcpus = 1;
  uint16_t domid = 0;   // 0: one derived from our pid
  std::string name;     // empty: "vm<domid>"; else 1-31 of [A-Za-z0-9._-] (base/vm_name.h)
  std::string dm_path;  // empty: $GPUVM_DM, else the gpuvm-dm this build made
  // pvdrm: the VM's PVDRM backend instead of gpuvm-dm; empty: $GPUVM_PVDRM_BACKEND, else the
  // gpuvm-pvdrm-backend beside gpuvm-vm or this build's.
  std::string pvdrm_backend_path;
  std::string pid_file;  // if set: "dm <pid>\nguest <pid>\n" once both run (tests kill them)
  std::chrono::milliseconds dm_start_timeout = std::chrono::seconds(20);
  bool verbose = false;
  std::vector<std::string> argv;  // the guest program and its arguments
};

// (our choice) Guest RAM stays below the 32-bit BAR0 at 0xf0000000, like a PC's PCI hole.
inline constexpr uint64_t kMaxRamBytes = 3ull << 30;

// Parses gpuvm-vm's command line (see main.cc). A name that is not 1-31 of [A-Za-z0-9._-] or an
// option its mode does not take is refused here with the reason.
Result<VmOptions> ParseArgs(const std::vector<std::string>& args);
// What gpuvm-dm is given about the VM: --mode (pt, fv or pv), --name ("vm<domid>" when no name
// was given) and the typed options VM_CONFIG carries (--variant, --vram-mib, --channels, --share).
std::string DeviceModelMode(const VmOptions& options);
std::vector<std::string> DeviceModelVmArgs(const VmOptions& options, uint16_t domid);
std::string Usage();

// Runs the VM. Returns the guest program's exit status (128 + signal when a signal ended it), or an
// error when the VM could not start (the device model's own message is on stderr) or its device
// model died under it.
Result<int> RunVm(const VmOptions& options);

}  // namespace gpuvm::vm

#endif  // GPUVM_TOOLS_GPUVM_VM_LAUNCHER_H_
