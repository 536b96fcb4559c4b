#include "hypervisor/xen/libxen.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace gpuvm::hv::xen {

Status OpenFailed(std::string_view what, int err) {
  return Status::Unavailable("xen: cannot open " + std::string(what) +
                             " (no Xen here?): " + std::strerror(err));
}

Status CallFailed(std::string_view call, int err) {
  return Status::FromErrno(err, "xen: " + std::string(call));
}

// A NULL logger makes the libraries log errors to stderr, which is what an operator wants on Xen;
// the probes without Xen print one line each and fail cleanly (docs/HYPERVISOR.md, "Platform").
Result<DeviceModelHandle> OpenDeviceModel() {
  DeviceModelHandle h(xendevicemodel_open(nullptr, 0));
  if (!h) return OpenFailed("the device model interface", errno);
  return h;
}

Result<ForeignMemoryHandle> OpenForeignMemory() {
  ForeignMemoryHandle h(xenforeignmemory_open(nullptr, 0));
  if (!h) return OpenFailed("the foreign memory interface", errno);
  return h;
}

Result<EvtchnHandle> OpenEvtchn() {
  EvtchnHandle h(xenevtchn_open(nullptr, 0));
  if (!h) return OpenFailed("the event channel device", errno);
  return h;
}

Result<GnttabHandle> OpenGnttab() {
  GnttabHandle h(xengnttab_open(nullptr, 0));
  if (!h) return OpenFailed("the grant table device", errno);
  return h;
}

Result<GntshrHandle> OpenGntshr() {
  GntshrHandle h(xengntshr_open(nullptr, 0));
  if (!h) return OpenFailed("the grant sharing device", errno);
  return h;
}

Result<ControlHandle> OpenControl() {
  ControlHandle h(xc_interface_open(nullptr, nullptr, 0));
  if (!h) return OpenFailed("the control interface", errno);
  return h;
}

Result<StoreHandle> OpenStoreHandle() {
  StoreHandle h(xs_open(0));
  if (!h) return OpenFailed("xenstore", errno);
  return h;
}

}  // namespace gpuvm::hv::xen
