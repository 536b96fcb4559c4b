// A VM's name: what an operator calls the VM in `gpuvm-ctl`, logs and metrics. Only a name — the
// VM's mode, VRAM, channels and GPU share are typed fields of VM_CONFIG (docs/IPC.md, protocol
// version 6); until version 6 they rode in the name after an '@', which is why '@' and ',' are
// refused with a pointer to the options that replaced them.
//
// NAME is 1 to 31 characters of [A-Za-z0-9._-]: no spaces or control characters (the name shows
// up in logs, the control protocol, Prometheus labels and file names). Refused, never cut.
//
// Threading: pure functions.
#ifndef GPUVM_BASE_VM_NAME_H_
#define GPUVM_BASE_VM_NAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuvm {

// VM_CONFIG's name field: 32 bytes, NUL-terminated.
inline constexpr size_t kMaxVmNameLength = 31;
// What a NAME may contain, for messages.
inline constexpr std::string_view kVmNameCharacters = "[A-Za-z0-9._-]";

// InvalidArgument saying what is wrong ("VM name 'a b' has ' ' at 2: ...").
Status CheckVmName(std::string_view name);

}  // namespace gpuvm

#endif  // GPUVM_BASE_VM_NAME_H_
