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

// The owner of a handle of type T of a Xen library, which `Close` releases.
template <typename T, auto Close>
struct HandleCloser {
  void operator()(T* h) const { Close(h); }
};
template <typename T, auto Close>
using XenHandle = std::unique_ptr<T, HandleCloser<T, Close>>;

using DeviceModelHandle = XenHandle<xendevicemodel_handle, xendevicemodel_close>;
using ForeignMemoryHandle = XenHandle<xenforeignmemory_handle, xenforeignmemory_close>;
using EvtchnHandle = XenHandle<xenevtchn_handle, xenevtchn_close>;
using GnttabHandle = XenHandle<xengnttab_handle, xengnttab_close>;
using GntshrHandle = XenHandle<xengntshr_handle, xengntshr_close>;
using ControlHandle = XenHandle<xc_interface, xc_interface_close>;
using StoreHandle = XenHandle<xs_handle, xs_close>;

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
