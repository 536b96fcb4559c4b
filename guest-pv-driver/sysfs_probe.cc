// gpuvm-sysfs-probe: finds the virtual GPU through the sysfs Bus (sysfs_bus.h), prints what the
// guest sees (PCI address, identity, where the firmware put the BARs), checks PMC_BOOT_0 says
// GF100, and measures the round trip of one trapped register read — inside a Xen HVM guest that is
// guest -> Xen -> ioreq -> gpuvm-dm (dom0) -> gpuvm-aggregator -> back. A program, not a test: the
// Xen test bed runs it in its guest (docs/XEN-TESTBED.md).
//
//   gpuvm-sysfs-probe [READS]     READS timed reads of PMC_BOOT_0 (default 200)
//
// Exits 0 when the device answers as a GF100, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu/hw/pmc.h"
#include "guest-pv-driver/sysfs_bus.h"

namespace {

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  using gpuvm::guest::Bar;
  namespace pmc = gpuvm::gf100::pmc;
  const int reads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;

  auto bus = gpuvm::guest::SysfsBus::FromEnvironment();
  if (!bus.ok()) {
    std::printf("probe: no GPU: %s\n", bus.status().ToString().c_str());
    return 1;
  }
  const gpuvm::gpu::PciIdentity& pci = (*bus)->pci();
  std::printf("probe: %s %04x:%04x class %06x rev %02x\n", (*bus)->address().c_str(), pci.vendor_id,
              pci.device_id, pci.class_code, pci.revision);
  for (Bar bar : {Bar::k0, Bar::k1, Bar::k3}) {
    std::printf("probe: BAR%d at 0x%llx, %llu MiB\n", int(bar),
                (unsigned long long)(*bus)->bar_address(bar),
                (unsigned long long)(pci.BarSize(bar) >> 20));
  }

  const uint32_t boot0 = (*bus)->ReadReg(pmc::kBoot0);
  const uint32_t chipset = (boot0 >> pmc::kBoot0ChipsetShift) & 0x1ff;
  std::printf("probe: PMC_BOOT_0 = 0x%08x (chipset 0x%x)\n", boot0, chipset);
  if (chipset != pmc::kChipsetGf100) {
    std::printf("probe: FAIL: not a GF100\n");
    return 1;
  }

  std::vector<double> us;
  us.reserve(size_t(reads));
  uint32_t mismatches = 0;
  for (int i = 0; i < reads; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const uint32_t v = (*bus)->ReadReg(pmc::kBoot0);
    const auto end = std::chrono::steady_clock::now();
    if (v != boot0) ++mismatches;
    us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::printf(
      "probe: trapped BAR0 read round trip over %d reads: median %.1f us, p10 %.1f us, p90 %.1f "
      "us, min %.1f us, max %.1f us\n",
      reads, Percentile(us, 0.5), Percentile(us, 0.1), Percentile(us, 0.9), Percentile(us, 0.0),
      Percentile(us, 1.0));
  if (mismatches != 0 || (*bus)->bad_accesses() != 0) {
    std::printf("probe: FAIL: %u reads disagreed, %llu bad accesses\n", mismatches,
                (unsigned long long)(*bus)->bad_accesses());
    return 1;
  }
  std::printf("probe: PASSED\n");
  return 0;
}
