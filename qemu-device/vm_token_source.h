// Where gpuvm-dm gets its VM's one-time token (docs/SECURITY.md) — never from its command line,
// which every user on the host can read in /proc/PID/cmdline:
//  - an inherited descriptor (gpuvm-dm --token-fd N): the local launcher, gpuvm-vm, writes the
//    token into a pipe and hands the dm its read end;
//  - a file (--token-file PATH): the Xen toolstack (the test bed's dom0 script) writes one that
//    only its owner can read. A file group or others may read, or owned by another user (root
//    excepted), or that is not a regular file (a symlink included) is refused: a token somebody
//    else could read or swap is no proof of anything.
// Either holds 64 hex digits, optionally with a newline.
//
// Threading: plain functions.
#ifndef GPUVM_QEMU_DEVICE_VM_TOKEN_SOURCE_H_
#define GPUVM_QEMU_DEVICE_VM_TOKEN_SOURCE_H_

#include <string>

#include "base/status.h"
#include "ipc/protocol.h"

namespace gpuvm::dm {

// Reads `fd` to its end (at most 128 bytes); the caller closes it.
Result<ipc::VmToken> ReadVmTokenFromFd(int fd);
Result<ipc::VmToken> ReadVmTokenFromFile(const std::string& path);
// The token from `fd` when it is a descriptor (read, then closed at once), else from `path`.
Result<ipc::VmToken> ReadVmToken(int fd, const std::string& path);

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_VM_TOKEN_SOURCE_H_
