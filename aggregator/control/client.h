// The client side of the control socket (protocol.h): one request, one reply. gpuvm-ctl uses it,
// and so does the local launcher (gpuvm-vm) to get its VM's token (`vm-token DOMID`,
// docs/SECURITY.md).
//
// A server that refuses us (another user's aggregator) answers `error PermissionDenied: ...` and
// hangs up; depending on who was first, our send then fails with EPIPE or our receive with
// ECONNRESET. Either way the refusal is still queued on our socket, and Call returns it as the
// reply instead of the broken pipe.
//
// Threading: plain functions.
#ifndef GPUVM_AGGREGATOR_CONTROL_CLIENT_H_
#define GPUVM_AGGREGATOR_CONTROL_CLIENT_H_

#include <string>

#include "aggregator/control/protocol.h"
#include "base/status.h"

namespace gpuvm::control {

// Unavailable when nothing listens (or the server hung up without a word); DataLoss for a reply
// this protocol does not produce; DeadlineExceeded after `timeout_ms` without one.
Result<Reply> Call(const std::string& socket, const Request& request, int timeout_ms = 10'000);

// The control socket of the aggregator listening on `aggregator_socket` (empty: the default one,
// $GPUVM_AGGREGATOR or @gpuvm-aggregator-<uid>): $GPUVM_CONTROL when set, else that socket +
// "-control".
std::string DefaultControlSocket(const std::string& aggregator_socket = "");

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_CLIENT_H_
