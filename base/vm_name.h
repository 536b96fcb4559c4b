// A VM's name, and the options that travel in it. VM_CONFIG (docs/IPC.md) carries one name field of
// 31 printable characters and no field for an fv VM's mode, VRAM size, channel count or GPU share,
// so until that configuration gets typed fields those ride in the name after an '@':
//
//   NAME[@OPTION[,OPTION]...]      OPTION: MODE | MiB | chN | shareP
//   e.g.  web   web@lazy   a@opt,256,ch8   batch@share12.5
//
// NAME is 1 to 31 characters of [A-Za-z0-9._-]: no '@' or ',' (they separate the options), no
// spaces or control characters (the name shows up in logs, the control protocol and file names).
// MODE is an fv mode word ([a-z-], checked by the aggregator: naive, lazy, bar-remap, optimized,
// remap, opt); MiB the VM's VRAM in MiB (1-999999); chN its channel count (1-999999, the aggregator
// allows 1-128); shareP its GPU share (share.h: 0-100, at most 3 decimals). Each at most once.
// The whole string must fit the 31 characters: a name is refused, never cut.
//
// This is the one parser (and writer) of that syntax: gpuvm-vm writes it, gpuvm-dm checks what it
// is given, the aggregator reads the fv options at admission and the control plane the share and
// the NAME by which an operator names the VM.
//
// Threading: pure functions.
#ifndef GPUVM_BASE_VM_NAME_H_
#define GPUVM_BASE_VM_NAME_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuvm {

// VM_CONFIG's name field: 32 bytes, NUL-terminated.
inline constexpr size_t kMaxVmNameLength = 31;
// What a NAME may contain, for messages.
inline constexpr std::string_view kVmNameCharacters = "[A-Za-z0-9._-]";

struct VmNameParts {
  std::string name;                  // NAME
  std::string mode;                  // MODE; empty: not given
  std::optional<uint64_t> vram_mib;  // MiB
  std::optional<uint32_t> channels;  // chN
  std::optional<double> share;       // shareP, percent
  friend bool operator==(const VmNameParts&, const VmNameParts&) = default;
};

// NAME alone: InvalidArgument saying what is wrong ("VM name 'a b' has ' ' at 2: ...").
Status CheckVmName(std::string_view name);

// NAME[@OPTION,...]: InvalidArgument naming the offending part.
Result<VmNameParts> ParseVmName(std::string_view text);

// The inverse of ParseVmName (MODE first, then MiB, chN, shareP). InvalidArgument when a part is
// not valid or the result is longer than kMaxVmNameLength (saying how long the NAME may be with
// these options).
Result<std::string> FormatVmName(const VmNameParts& parts);

// The NAME part of a name as it is (no checks): "a@lazy,256" -> "a".
std::string_view VmBaseName(std::string_view text);

}  // namespace gpuvm

#endif  // GPUVM_BASE_VM_NAME_H_
