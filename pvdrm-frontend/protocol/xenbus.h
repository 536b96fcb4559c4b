// PVDRM's XenBus conventions (docs/PVDRM.md, "Handshake"): where a device's two store directories
// are, the keys in them, and the states both ends move through — Xen's own XenbusState values from
// <xen/io/xenbus.h>. Both ends and the toolstack's part (AnnounceDevice/RemoveDevice: what xl does
// for a vif or vbd, done by whoever creates the device — gpuvm-vm, a test) use these.
//
// Threading: functions over a Store the caller owns (store.h's rules).
#ifndef GPUVM_PVDRM_FRONTEND_PROTOCOL_XENBUS_H_
#define GPUVM_PVDRM_FRONTEND_PROTOCOL_XENBUS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "hypervisor/store.h"
#include "hypervisor/types.h"
#include "pvdrm-frontend/protocol/wire.h"

namespace gpuvm::pvdrm {

inline constexpr std::string_view kDeviceType = "vgpu-drm";

// Keys (relative to a device directory).
inline constexpr std::string_view kStateKey = "state";
inline constexpr std::string_view kVersionKey = "protocol-version";    // both ends: decimal, "1"
inline constexpr std::string_view kRingRefKey = "ring-ref";            // frontend: grant_ref_t
inline constexpr std::string_view kEventChannelKey = "event-channel";  // frontend: its port
inline constexpr std::string_view kProtocolKey = "protocol";       // frontend: XEN_IO_PROTO_ABI_*
inline constexpr std::string_view kBackendKey = "backend";         // toolstack: the backend dir
inline constexpr std::string_view kBackendIdKey = "backend-id";    // toolstack: its domain
inline constexpr std::string_view kFrontendKey = "frontend";       // toolstack: the frontend dir
inline constexpr std::string_view kFrontendIdKey = "frontend-id";  // toolstack: its domain
inline constexpr std::string_view kErrorKey = "error";  // either end: why it gave up (one line)

// One device: a frontend domain's vgpu-drm number `devid`, served from `backend`'s domain.
struct DeviceAddress {
  hv::DomainId frontend = 1;
  hv::DomainId backend = hv::kControlDomain;
  uint32_t devid = 0;
};
// /local/domain/<frontend>/device/vgpu-drm/<devid>
std::string FrontendDir(const DeviceAddress& device);
// /local/domain/<backend>/backend/vgpu-drm/<frontend>/<devid>
std::string BackendDir(const DeviceAddress& device);
inline std::string Key(std::string_view dir, std::string_view key) {
  return std::string(dir) + "/" + std::string(key);
}

std::string_view StateName(XenbusState state);
// The state under `dir`: NotFound when the key (or the directory) is gone; DataLoss when the value
// is not a XenbusState (a peer writing junk is treated as gone by both ends).
Result<XenbusState> ReadState(hv::Store& store, std::string_view dir);
Status WriteState(hv::Store& store, std::string_view dir, XenbusState state);
// A decimal number in [0, max] under `path`, nothing else (no sign, spaces, leading zeros, hex).
Result<uint64_t> ReadNumber(hv::Store& store, std::string_view path, uint64_t max);
// Parses what ReadNumber accepts.
Result<uint64_t> ParseNumber(std::string_view text, uint64_t max);

// The toolstack's part: both directories with their cross-references, both states Initialising.
Status AnnounceDevice(hv::Store& store, const DeviceAddress& device);
// ... and removing them (xl does when the domain is destroyed; a vanished frontend directory is
// how a backend learns its frontend is gone for good).
Status RemoveDevice(hv::Store& store, const DeviceAddress& device);

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_PROTOCOL_XENBUS_H_
