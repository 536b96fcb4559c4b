#include "base/vm_name.h"

#include <charconv>
#include <cstdio>
#include <system_error>

#include "base/quote.h"
#include "base/share.h"

namespace gpuvm {
namespace {

constexpr uint64_t kMaxOptionNumber = 999999;  // six digits: MiB and chN

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

// 1..kMaxOptionNumber written as plain digits (no sign, no leading zero).
std::optional<uint64_t> SmallNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 6 || digits[0] == '0') return std::nullopt;
  for (char c : digits) {
    if (!IsAsciiDigit(c)) return std::nullopt;
  }
  uint64_t v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  return v;
}

bool IsModeWord(std::string_view token) {
  if (token.empty() || token[0] < 'a' || token[0] > 'z') return false;
  for (char c : token) {
    if (!((c >= 'a' && c <= 'z') || c == '-')) return false;
  }
  return true;
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
               ? " (an fv VM's mode, VRAM and share are options of their own: gpuvm-vm --mode, "
                 "--vram-mib, --share)"
               : ""));
    }
  }
  return Status::Ok();
}

std::string_view VmBaseName(std::string_view text) { return text.substr(0, text.find('@')); }

Result<VmNameParts> ParseVmName(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("VM name " + QuoteForMessage(text) + ": " + why);
  };
  if (text.size() > kMaxVmNameLength) {
    return bad("it is " + std::to_string(text.size()) + " characters; a VM's name and options " +
               "fit in " + std::to_string(kMaxVmNameLength) + " (VM_CONFIG's name field)");
  }
  VmNameParts parts;
  const size_t at = text.find('@');
  parts.name = std::string(text.substr(0, at));
  GPUVM_RETURN_IF_ERROR(CheckVmName(parts.name));
  if (at == std::string_view::npos) return parts;
  std::string_view rest = text.substr(at + 1);
  if (rest.empty()) return bad("'@' without options after it");
  if (rest.find('@') != std::string_view::npos) {
    return bad("'@' twice: a NAME cannot contain '@' (it starts the options)");
  }
  for (;;) {
    const size_t comma = rest.find(',');
    const std::string_view token = rest.substr(0, comma);
    if (token.empty()) return bad("an empty option");
    for (char c : token) {
      if (!((c >= 'a' && c <= 'z') || IsAsciiDigit(c) || c == '.' || c == '-')) {
        return bad("option " + QuoteForMessage(token) + " has " + Shown(c) +
                   " (options are MODE, MiB, chN or shareP, separated by ',')");
      }
    }
    const auto twice = [&](const char* what) { return bad(std::string(what) + " given twice"); };
    if (IsAsciiDigit(token[0])) {
      std::optional<uint64_t> mib = SmallNumber(token);
      if (!mib) return bad("VRAM " + QuoteForMessage(token) + " must be 1 to 999999 (MiB)");
      if (parts.vram_mib) return twice("VRAM");
      parts.vram_mib = *mib;
    } else if (token.size() > 2 && token.substr(0, 2) == "ch" && IsAsciiDigit(token[2])) {
      std::optional<uint64_t> n = SmallNumber(token.substr(2));
      if (!n) return bad("channels " + QuoteForMessage(token) + " must be ch1 to ch999999");
      if (parts.channels) return twice("the channel count");
      parts.channels = static_cast<uint32_t>(*n);
    } else if (token.substr(0, 5) == "share") {
      Result<double> share = ParseSharePercent(token.substr(5));
      if (!share.ok()) return bad(share.status().message());
      if (parts.share) return twice("the share");
      parts.share = *share;
    } else if (IsModeWord(token)) {
      if (!parts.mode.empty()) return twice("the mode");
      parts.mode = std::string(token);
    } else {
      return bad("unknown option " + QuoteForMessage(token) + " (MODE, MiB, chN or shareP)");
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return parts;
}

Result<std::string> FormatVmName(const VmNameParts& parts) {
  GPUVM_RETURN_IF_ERROR(CheckVmName(parts.name));
  std::string options;
  const auto add = [&](const std::string& option) {
    options += (options.empty() ? "@" : ",") + option;
  };
  if (!parts.mode.empty()) {
    if (!IsModeWord(parts.mode)) {
      return Status::InvalidArgument("fv mode " + QuoteForMessage(parts.mode) +
                                     " is not a word of [a-z-]");
    }
    add(parts.mode);
  }
  if (parts.vram_mib) {
    if (*parts.vram_mib == 0 || *parts.vram_mib > kMaxOptionNumber) {
      return Status::InvalidArgument("VRAM must be 1 to 999999 MiB, not " +
                                     std::to_string(*parts.vram_mib));
    }
    add(std::to_string(*parts.vram_mib));
  }
  if (parts.channels) {
    if (*parts.channels == 0 || *parts.channels > kMaxOptionNumber) {
      return Status::InvalidArgument("channels must be 1 to 999999, not " +
                                     std::to_string(*parts.channels));
    }
    add("ch" + std::to_string(*parts.channels));
  }
  if (parts.share) {
    if (!(*parts.share >= 0 && *parts.share <= 100)) {
      return Status::InvalidArgument("share must be 0 to 100 (percent)");
    }
    add("share" + FormatSharePercent(*parts.share));
  }
  const size_t length = parts.name.size() + options.size();
  if (length > kMaxVmNameLength) {
    if (options.size() >= kMaxVmNameLength) {
      return Status::InvalidArgument("the options " + QuoteForMessage(options) + " alone take " +
                                     std::to_string(options.size()) + " of the " +
                                     std::to_string(kMaxVmNameLength) +
                                     " characters of a VM's name: leave some out");
    }
    return Status::InvalidArgument(
        "VM name " + QuoteForMessage(parts.name) + " (" + std::to_string(parts.name.size()) +
        " characters) with its options " + QuoteForMessage(options) + " makes " +
        std::to_string(length) + " characters; a VM's name and options fit in " +
        std::to_string(kMaxVmNameLength) + " (VM_CONFIG's name field): use a name of at most " +
        std::to_string(kMaxVmNameLength - options.size()) + " characters");
  }
  return parts.name + options;
}

}  // namespace gpuvm
