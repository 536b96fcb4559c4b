// The Xen toolstack libraries' headers, which lack extern "C" guards, and RAII owners of their
// handles. Xen backend internals: nothing outside hypervisor/xen/ includes this.
//
// Threading: a handle belongs to one owner thread.
#ifndef GPUVM_HYPERVISOR_XEN_LIBXEN_H_
#define GPUVM_HYPERVISOR_XEN_LIBXEN_H_

#include <memory>
#include <string_view>

// Order matters: xenctrl.h first (it sets up the types the public headers after it rely on).
// clang-format off
extern "C" {
#include <xenctrl.h>
#include <xendevicemodel.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xengnttab.h>
#include <xenstore.h>
#include <xen/hvm/hvm_op.h>
#include <xen/memory.h>
}
// clang-format on

#include "base/status.h"

namespace gpuvm::hv::xen {

struct DeviceModelCloser {
  void operator()(xendevicemodel_handle* h) const { xendevicemodel_close(h); }
};
struct ForeignMemoryCloser {
  void operator()(xenforeignmemory_handle* h) const { xenforeignmemory_close(h); }
};
struct EvtchnCloser {
  void operator()(xenevtchn_handle* h) const { xenevtchn_close(h); }
};
struct GnttabCloser {
  void operator()(xengnttab_handle* h) const { xengnttab_close(h); }
};
struct GntshrCloser {
  void operator()(xengntshr_handle* h) const { xengntshr_close(h); }
};
struct ControlCloser {
  void operator()(xc_interface* h) const { xc_interface_close(h); }
};
struct StoreCloser {
  void operator()(xs_handle* h) const { xs_close(h); }
};

using DeviceModelHandle = std::unique_ptr<xendevicemodel_handle, DeviceModelCloser>;
using ForeignMemoryHandle = std::unique_ptr<xenforeignmemory_handle, ForeignMemoryCloser>;
using EvtchnHandle = std::unique_ptr<xenevtchn_handle, EvtchnCloser>;
using GnttabHandle = std::unique_ptr<xengnttab_handle, GnttabCloser>;
using GntshrHandle = std::unique_ptr<xengntshr_handle, GntshrCloser>;
using ControlHandle = std::unique_ptr<xc_interface, ControlCloser>;
using StoreHandle = std::unique_ptr<xs_handle, StoreCloser>;

// Open failures: Unavailable("xen: cannot open <what> (no Xen here?): <strerror>").
Status OpenFailed(std::string_view what, int err);
// Call failures: FromErrno with "xen: <call>" context.
Status CallFailed(std::string_view call, int err);

Result<DeviceModelHandle> OpenDeviceModel();
Result<ForeignMemoryHandle> OpenForeignMemory();
Result<EvtchnHandle> OpenEvtchn();
Result<GnttabHandle> OpenGnttab();
Result<GntshrHandle> OpenGntshr();
Result<ControlHandle> OpenControl();
Result<StoreHandle> OpenStoreHandle();

}  // namespace gpuvm::hv::xen

#endif  // GPUVM_HYPERVISOR_XEN_LIBXEN_H_
