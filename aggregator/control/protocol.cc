#include "aggregator/control/protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/json_string.h"
#include "base/quote.h"
#include "base/share.h"
#include "base/vm_name.h"

namespace gpuvm::control {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '@' || c == ',';
}

std::vector<std::string_view> SplitWords(std::string_view text) {
  std::vector<std::string_view> words;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ') {
      words.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return words;
}

std::string Escape(std::string_view s) {
  if (s.empty()) return "-";
  std::string out;
  for (char c : s) {
    if (IsNameChar(c)) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    }
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Result<std::string> Unescape(std::string_view s) {
  if (s == "-") return std::string();
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) return Status::DataLoss("truncated escape");
      const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return Status::DataLoss("bad escape");
      out += static_cast<char>(hi << 4 | lo);
      i += 2;
    } else if (IsNameChar(s[i])) {
      out += s[i];
    } else {
      return Status::DataLoss("unescaped character in a name");
    }
  }
  return out;
}

template <typename T>
bool ParseUnsigned(std::string_view s, T* out) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (!IsAsciiDigit(c)) return false;
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// A non-negative decimal without exponent, as FormatList writes it.
bool ParseFixed(std::string_view s, double* out) {
  if (s.empty() || s.size() > 32) return false;
  size_t dots = 0;
  for (char c : s) {
    if (c == '.') {
      ++dots;
    } else if (!IsAsciiDigit(c)) {
      return false;
    }
  }
  if (dots > 1 || s.front() == '.' || s.back() == '.') return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(*out);
}

std::string Fixed(double v, int decimals) {
  if (!std::isfinite(v) || v < 0) v = 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A VM reference: a decimal id or a VM name (base/vm_name.h).
Result<std::string> ParseVmRef(std::string_view vm) {
  bool id = vm.size() <= 10;
  for (char c : vm) id &= IsAsciiDigit(c);
  if (!id) {
    Status name = CheckVmName(vm);
    if (!name.ok()) {
      return Status::InvalidArgument("VM " + QuoteForMessage(vm) +
                                     " is neither an id nor a VM name: " + name.message());
    }
  }
  return std::string(vm);
}

}  // namespace

Result<uint32_t> ParseKernelLimitMs(std::string_view text) {
  if (!text.empty() && text.front() == '-') {
    return Status::InvalidArgument("kernel limit " + QuoteForMessage(text) +
                                   " is negative; 0 (no limit) to 86400000 ms");
  }
  const bool digits =
      !text.empty() && text.size() <= 32 && std::all_of(text.begin(), text.end(), IsAsciiDigit);
  if (!digits) {
    return Status::InvalidArgument("kernel limit " + QuoteForMessage(text) +
                                   " is not a whole number of milliseconds (0: no limit)");
  }
  // Digits only: too many of them (past any integer type) is simply too long a limit.
  const size_t first = std::min(text.find_first_not_of('0'), text.size());
  uint64_t ms = 0;
  const std::string_view significant = text.substr(first);
  if (significant.size() > 9 || (!significant.empty() && !ParseUnsigned(significant, &ms)) ||
      ms > kMaxKernelLimitMs) {
    return Status::InvalidArgument("kernel limit " + QuoteForMessage(text) +
                                   " ms is past 24 h (86400000 ms)");
  }
  return static_cast<uint32_t>(ms);
}

std::string ControlSocketPathFor(std::string_view aggregator_socket_path) {
  return std::string(aggregator_socket_path) + std::string(kControlSocketSuffix);
}

Result<Request> ParseRequest(std::string_view text) {
  if (text.size() > kMaxRequestBytes) {
    return Status::InvalidArgument("request of " + std::to_string(text.size()) +
                                   " bytes is longer than " + std::to_string(kMaxRequestBytes));
  }
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  for (char c : text) {
    if (c < 0x20 || c >= 0x7f) {
      return Status::InvalidArgument("request has a control or non-ASCII character");
    }
  }
  if (text.empty()) return Status::InvalidArgument("empty request");
  const std::vector<std::string_view> words = SplitWords(text);
  for (std::string_view w : words) {
    if (w.empty()) return Status::InvalidArgument("words must be separated by single spaces");
  }
  const std::string_view command = words[0];
  const auto want_args = [&](size_t n, std::string_view usage) -> Status {
    if (words.size() != n + 1) {
      return Status::InvalidArgument(std::string(command) + " takes " + std::to_string(n) +
                                     " argument" + (n == 1 ? "" : "s") + ": " + std::string(usage));
    }
    return Status::Ok();
  };
  if (command == "list") {
    GPUVM_RETURN_IF_ERROR(want_args(0, "list"));
    return Request(ListRequest{});
  }
  if (command == "stats") {
    GPUVM_RETURN_IF_ERROR(want_args(0, "stats"));
    return Request(StatsRequest{});
  }
  if (command == "metrics") {
    GPUVM_RETURN_IF_ERROR(want_args(0, "metrics"));
    return Request(MetricsRequest{});
  }
  if (command == "set-share") {
    GPUVM_RETURN_IF_ERROR(want_args(2, "set-share VM PERCENT"));
    GPUVM_ASSIGN_OR_RETURN(std::string vm, ParseVmRef(words[1]));
    GPUVM_ASSIGN_OR_RETURN(double percent, ParseSharePercent(words[2]));
    return Request(SetShareRequest{std::move(vm), percent});
  }
  if (command == "pause" || command == "resume" || command == "kill-work") {
    GPUVM_RETURN_IF_ERROR(want_args(1, std::string(command) + " VM"));
    GPUVM_ASSIGN_OR_RETURN(std::string vm, ParseVmRef(words[1]));
    if (command == "pause") return Request(PauseRequest{std::move(vm)});
    if (command == "resume") return Request(ResumeRequest{std::move(vm)});
    return Request(KillWorkRequest{std::move(vm)});
  }
  if (command == "set-kernel-limit") {
    GPUVM_RETURN_IF_ERROR(want_args(2, "set-kernel-limit VM MS"));
    GPUVM_ASSIGN_OR_RETURN(std::string vm, ParseVmRef(words[1]));
    GPUVM_ASSIGN_OR_RETURN(uint32_t ms, ParseKernelLimitMs(words[2]));
    return Request(SetKernelLimitRequest{std::move(vm), ms});
  }
  if (command == "set-scheduler") {
    GPUVM_RETURN_IF_ERROR(want_args(1, "set-scheduler fifo|credit|band"));
    Result<sched::PolicyKind> kind = sched::ParsePolicyKind(words[1]);
    if (!kind.ok()) {
      return Status::InvalidArgument("unknown scheduler " + QuoteForMessage(words[1]) +
                                     "; choose fifo, credit or band");
    }
    return Request(SetSchedulerRequest{*kind});
  }
  if (command == "vm-token") {
    GPUVM_RETURN_IF_ERROR(want_args(1, "vm-token DOMID"));
    uint32_t domid = 0;
    if (!ParseUnsigned(words[1], &domid) || domid == 0 || domid > 0x7fef ||
        words[1].front() == '0') {
      return Status::InvalidArgument("domain " + QuoteForMessage(words[1]) +
                                     " is not a guest's domain id (1-32751)");
    }
    return Request(VmTokenRequest{static_cast<uint16_t>(domid)});
  }
  return Status::InvalidArgument("unknown command " + QuoteForMessage(command) +
                                 "; commands: list, stats, metrics, set-share VM PERCENT, "
                                 "set-scheduler fifo|credit|band, vm-token DOMID, pause VM, "
                                 "resume VM, kill-work VM, set-kernel-limit VM MS");
}

std::string FormatRequest(const Request& request) {
  struct Visitor {
    std::string operator()(const ListRequest&) const { return "list"; }
    std::string operator()(const StatsRequest&) const { return "stats"; }
    std::string operator()(const MetricsRequest&) const { return "metrics"; }
    std::string operator()(const SetShareRequest& r) const {
      return "set-share " + r.vm + " " + FormatSharePercent(r.percent);
    }
    std::string operator()(const SetSchedulerRequest& r) const {
      return "set-scheduler " + std::string(sched::PolicyKindName(r.policy));
    }
    std::string operator()(const VmTokenRequest& r) const {
      return "vm-token " + std::to_string(r.domid);
    }
    std::string operator()(const PauseRequest& r) const { return "pause " + r.vm; }
    std::string operator()(const ResumeRequest& r) const { return "resume " + r.vm; }
    std::string operator()(const KillWorkRequest& r) const { return "kill-work " + r.vm; }
    std::string operator()(const SetKernelLimitRequest& r) const {
      return "set-kernel-limit " + r.vm + " " + std::to_string(r.ms);
    }
  };
  return std::visit(Visitor{}, request);
}

std::string FormatReply(const Reply& reply) {
  if (reply.status.ok()) return "ok\n" + reply.body;
  std::string message;
  for (char c : reply.status.message()) message += (c == '\n' || c == '\r') ? ' ' : c;
  return "error " + std::string(StatusCodeName(reply.status.code())) + ": " + message + "\n";
}

Result<Reply> ParseReply(std::string_view text) {
  const size_t eol = text.find('\n');
  if (eol == std::string_view::npos) return Status::DataLoss("reply without a status line");
  const std::string_view first = text.substr(0, eol);
  if (first == "ok") return Reply{Status::Ok(), std::string(text.substr(eol + 1))};
  constexpr std::string_view kError = "error ";
  if (first.substr(0, kError.size()) != kError) {
    return Status::DataLoss("reply starts with neither 'ok' nor 'error'");
  }
  const std::string_view rest = first.substr(kError.size());
  const size_t colon = rest.find(": ");
  if (colon == std::string_view::npos) return Status::DataLoss("error reply without a message");
  const std::string_view code_name = rest.substr(0, colon);
  for (int c = static_cast<int>(StatusCode::kInvalidArgument);
       c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == code_name) {
      return Reply{Status(static_cast<StatusCode>(c), std::string(rest.substr(colon + 2))), ""};
    }
  }
  return Status::DataLoss("error reply with an unknown code");
}

std::string FormatList(const ListReply& list) {
  std::string out = "scheduler policy=" + std::string(sched::PolicyKindName(list.policy)) + "\n";
  for (const VmRow& v : list.vms) {
    out += "vm id=" + std::to_string(v.id) + " name=" + Escape(v.name) + " mode=" + Escape(v.mode) +
           " vram=" + std::to_string(v.vram_bytes) +
           " vram_used=" + std::to_string(v.vram_used_bytes) +
           " channels=" + std::to_string(v.channels) + " traps=" + std::to_string(v.traps) +
           " share=" + Fixed(v.share_percent, 3) + " scheduled=" + (v.scheduled ? "1" : "0") +
           " usage100=" + Fixed(v.usage_100ms, 4) + " usage500=" + Fixed(v.usage_500ms, 4) +
           " usage10s=" + Fixed(v.usage_10s, 4) + " queued=" + std::to_string(v.queued) +
           " gpu_ms=" + Fixed(v.gpu_ms, 3) + " standing=" + Escape(v.standing) +
           " paused=" + (v.paused ? "1" : "0") +
           " kernel_limit_ms=" + std::to_string(v.kernel_limit_ms) +
           " killed=" + std::to_string(v.killed) + "\n";
  }
  return out;
}

Result<ListReply> ParseList(std::string_view body) {
  ListReply list;
  bool saw_scheduler = false;
  size_t start = 0;
  while (start < body.size()) {
    size_t eol = body.find('\n', start);
    if (eol == std::string_view::npos) return Status::DataLoss("list line without newline");
    const std::string_view line = body.substr(start, eol - start);
    start = eol + 1;
    const std::vector<std::string_view> words = SplitWords(line);
    std::map<std::string_view, std::string_view> fields;
    for (size_t i = 1; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      if (eq == std::string_view::npos || eq == 0)
        return Status::DataLoss("list field without '='");
      fields[words[i].substr(0, eq)] = words[i].substr(eq + 1);
    }
    const auto field = [&](std::string_view key) -> Result<std::string_view> {
      auto it = fields.find(key);
      if (it == fields.end()) return Status::DataLoss("list line without " + std::string(key));
      return it->second;
    };
    if (words[0] == "scheduler") {
      GPUVM_ASSIGN_OR_RETURN(std::string_view policy, field("policy"));
      Result<sched::PolicyKind> kind = sched::ParsePolicyKind(policy);
      if (!kind.ok()) return Status::DataLoss("list names an unknown scheduler");
      list.policy = *kind;
      saw_scheduler = true;
      continue;
    }
    if (words[0] != "vm") return Status::DataLoss("unknown list record");
    VmRow v;
    std::string_view s;
    bool ok = true;
    GPUVM_ASSIGN_OR_RETURN(s, field("id"));
    ok &= ParseUnsigned(s, &v.id);
    GPUVM_ASSIGN_OR_RETURN(s, field("name"));
    GPUVM_ASSIGN_OR_RETURN(v.name, Unescape(s));
    GPUVM_ASSIGN_OR_RETURN(s, field("mode"));
    GPUVM_ASSIGN_OR_RETURN(v.mode, Unescape(s));
    GPUVM_ASSIGN_OR_RETURN(s, field("vram"));
    ok &= ParseUnsigned(s, &v.vram_bytes);
    GPUVM_ASSIGN_OR_RETURN(s, field("vram_used"));
    ok &= ParseUnsigned(s, &v.vram_used_bytes);
    GPUVM_ASSIGN_OR_RETURN(s, field("channels"));
    ok &= ParseUnsigned(s, &v.channels);
    GPUVM_ASSIGN_OR_RETURN(s, field("traps"));
    ok &= ParseUnsigned(s, &v.traps);
    GPUVM_ASSIGN_OR_RETURN(s, field("share"));
    ok &= ParseFixed(s, &v.share_percent);
    GPUVM_ASSIGN_OR_RETURN(s, field("scheduled"));
    ok &= s == "0" || s == "1";
    v.scheduled = s == "1";
    GPUVM_ASSIGN_OR_RETURN(s, field("usage100"));
    ok &= ParseFixed(s, &v.usage_100ms);
    GPUVM_ASSIGN_OR_RETURN(s, field("usage500"));
    ok &= ParseFixed(s, &v.usage_500ms);
    GPUVM_ASSIGN_OR_RETURN(s, field("usage10s"));
    ok &= ParseFixed(s, &v.usage_10s);
    GPUVM_ASSIGN_OR_RETURN(s, field("queued"));
    ok &= ParseUnsigned(s, &v.queued);
    GPUVM_ASSIGN_OR_RETURN(s, field("gpu_ms"));
    ok &= ParseFixed(s, &v.gpu_ms);
    GPUVM_ASSIGN_OR_RETURN(s, field("standing"));
    GPUVM_ASSIGN_OR_RETURN(v.standing, Unescape(s));
    // Added with pause/kill-work: an older aggregator's list has none of them.
    if (auto it = fields.find("paused"); it != fields.end()) {
      ok &= it->second == "0" || it->second == "1";
      v.paused = it->second == "1";
    }
    if (auto it = fields.find("kernel_limit_ms"); it != fields.end()) {
      ok &= ParseUnsigned(it->second, &v.kernel_limit_ms);
    }
    if (auto it = fields.find("killed"); it != fields.end()) {
      ok &= ParseUnsigned(it->second, &v.killed);
    }
    if (!ok) return Status::DataLoss("list line with a malformed number");
    list.vms.push_back(std::move(v));
  }
  if (!saw_scheduler) return Status::DataLoss("list without a scheduler line");
  return list;
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

}  // namespace gpuvm::control
