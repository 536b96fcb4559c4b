#include "base/vm_name.h"

#include <charconv>
#include <cstdio>
#include <system_error>

#include "base/quote.h"
#include "base/share.h"

namespace gpuvm {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}
std::string Shown(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

}  // namespace

Status CheckVmName(std::string_view name) {
  if (name.empty()) {
    return Status::InvalidArgument("a VM name cannot be empty (1 to 31 characters of " +
                                   std::string(kVmNameCharacters) + ")");
  }
  if (name.size() > kMaxVmNameLength) {
    return Status::InvalidArgument("VM name " + QuoteForMessage(name) + " is " +
                                   std::to_string(name.size()) + " characters; at most " +
                                   std::to_string(kMaxVmNameLength));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i])) {
      return Status::InvalidArgument(
          "VM name " + QuoteForMessage(name) + " has " + Shown(name[i]) + " at " +
          std::to_string(i + 1) + ": a name is 1 to 31 characters of " +
          std::string(kVmNameCharacters) +
          (name[i] == '@' || name[i] == ','
               ? " (a VM's mode, VRAM, channels and share are options of their own: gpuvm-vm "
                 "--mode, --vram-mib, --channels, --share; gpuvm-dm --variant, --vram-mib, "
                 "--channels, --share)"
               : ""));
    }
  }
  return Status::Ok();
}

}  // namespace gpuvm
