// Fuzz target: ioreq decoding in the device model. The input is a stream of 33-byte records: one
// control byte and a raw Xen ioreq_t exactly as a hostile guest (local backend) or a buggy
// hypervisor could leave it in a slot. Each record goes through the same path a real request takes
// — xen_abi::FromXen on the copied slot, then DeviceModel::Handle — against fake hypervisor pieces
// and a fake aggregator. The control byte steers the record to the PCI function (so BARs get
// programmed and moved) or sets the vCPU. The device model must never crash, never forward a
// refused access, and always answer reads of valid sizes within their width.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "hypervisor/xen_abi/ioreq_page.h"
#include "qemu-device/device_model.h"
#include "qemu-device/testing/fake_aggregator.h"
#include "qemu-device/testing/fake_hypervisor.h"

using namespace gpuvm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dm::testing::RecordingIoreqServer server;
  dm::testing::FakeAggregator aggregator;
  dm::testing::VectorGuestMemory memory(16);
  dm::DeviceModelConfig config;
  config.layout.bar1_size = 1 << 20;  // small BARs so random addresses hit them now and then
  config.layout.bar3_size = 1 << 16;
  config.layout.bar0_size = 1 << 16;
  auto model = dm::DeviceModel::Create(config, &server, &aggregator, &memory);
  if (!model.ok()) std::abort();
  constexpr size_t kRecord = 1 + sizeof(ioreq_t);
  for (size_t at = 0; at + kRecord <= size; at += kRecord) {
    const uint8_t control = data[at];
    ioreq_t slot;
    std::memcpy(&slot, data + at + 1, sizeof(slot));
    hv::IoRequest request = hv::xen_abi::FromXen(slot, control & 1);
    if (control & 0x80) {
      // Aim at our own function's configuration space, keeping the rest of the record.
      request.space = hv::IoSpace::kPciConfig;
      request.sbdf = config.sbdf;
      request.addr &= 0x3f;
    }
    if (control & 0x40) request.buffered = true;
    const size_t before = aggregator.accesses().size();
    const uint64_t refused_before = (*model)->counters().Snapshot().refused_total();
    const uint64_t answer = (*model)->Handle(request);
    const bool valid_size =
        request.size == 1 || request.size == 2 || request.size == 4 || request.size == 8;
    if (request.dir == hv::IoDirection::kRead && valid_size && request.size < 8 &&
        !request.data_is_ptr && (answer >> (8 * request.size)) != 0) {
      std::abort();  // a read answered wider than the access
    }
    if ((*model)->counters().Snapshot().refused_total() > refused_before && !request.data_is_ptr &&
        request.count <= 1 && aggregator.accesses().size() != before) {
      std::abort();  // a refused single access reached the aggregator
    }
    if (aggregator.accesses().size() > 100000) aggregator.Clear();
  }
  // Every mapped range is one of the BARs at its current place, and no two overlap.
  for (size_t i = 0; i < server.ranges.size(); ++i) {
    for (size_t j = i + 1; j < server.ranges.size(); ++j) {
      if (server.ranges[i].first <= server.ranges[j].second &&
          server.ranges[j].first <= server.ranges[i].second) {
        std::abort();
      }
    }
  }
  return 0;
}
