#include "tools/gpuvm-ctl/ctl.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "aggregator/control/client.h"

namespace gpuvm::ctl {
namespace {

std::string Pad(std::string s, size_t width, bool right = false) {
  if (s.size() >= width) return right ? s : s + " ";  // a long name still ends before the next
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string Format(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Bytes(uint64_t bytes) {
  if (bytes == 0) return "-";
  if (bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

const char kUsage[] =
    "usage: gpuvm-ctl [--socket PATH] list\n"
    "       gpuvm-ctl [--socket PATH] stats [--json]\n"
    "       gpuvm-ctl [--socket PATH] metrics   (Prometheus text format)\n"
    "       gpuvm-ctl [--socket PATH] set-share VM PERCENT     (VM: id or name; live)\n"
    "       gpuvm-ctl [--socket PATH] set-scheduler fifo|credit|band   (live)\n"
    "       gpuvm-ctl [--socket PATH] pause VM | resume VM   (its GPU work switched out / back)\n"
    "       gpuvm-ctl [--socket PATH] kill-work VM   (fails its running and queued GPU work)\n"
    "       gpuvm-ctl [--socket PATH] set-kernel-limit VM MS   (GPU time per kernel; 0 = off)\n"
    "       gpuvm-ctl [--socket PATH] vm-token DOMID   (a one-time token for that domain's\n"
    "                                                   device model, docs/SECURITY.md)\n"
    "       gpuvm-ctl [--socket PATH] top [--interval-ms N] [--iterations N]\n"
    "                                 (a live view: GPU use vs share, queues, VRAM, traps/s;\n"
    "                                  every N ms, default 1000; until interrupted by default)\n"
    "The socket defaults to $GPUVM_CONTROL, else the aggregator's socket + \"-control\".\n";

std::string DefaultControlSocket() { return control::DefaultControlSocket(); }

Result<Invocation> ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  inv.socket = DefaultControlSocket();
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--socket") {
      if (i + 1 >= args.size() || args[i + 1].empty()) {
        return Status::InvalidArgument("--socket wants a path");
      }
      inv.socket = args[++i];
    } else if (args[i] == "--json") {
      inv.json = true;
    } else if (args[i] == "--interval-ms" || args[i] == "--iterations") {
      const bool interval = args[i] == "--interval-ms";
      if (i + 1 >= args.size()) return Status::InvalidArgument(args[i] + " wants a number");
      const std::string& v = args[++i];
      int n = 0;
      if (v.empty() || v.size() > 7 || v.find_first_not_of("0123456789") != std::string::npos ||
          (n = std::stoi(v), interval ? (n < 100 || n > 3600000) : n > 1000000)) {
        return Status::InvalidArgument(interval ? "--interval-ms wants 100 to 3600000"
                                                : "--iterations wants 0 to 1000000");
      }
      (interval ? inv.interval_ms : inv.iterations) = n;
      inv.top = true;
    } else if (args[i] == "--help" || args[i] == "-h") {
      return Status::InvalidArgument("help");
    } else {
      words.push_back(args[i]);
    }
  }
  if (words.empty()) return Status::InvalidArgument("no command");
  if (inv.top && words[0] != "top") {
    return Status::InvalidArgument("--interval-ms and --iterations go with top");
  }
  if (words[0] == "top") {
    if (words.size() != 1) return Status::InvalidArgument("top takes no arguments");
    inv.top = true;
    words[0] = "list";  // top is `list` again and again
  }
  if (inv.json && words[0] != "stats") {
    return Status::InvalidArgument("--json goes with stats");
  }
  std::string text;
  for (const std::string& w : words) {
    if (w.empty() || w.find(' ') != std::string::npos) {
      return Status::InvalidArgument("argument '" + w + "' is empty or has a space");
    }
    text += (text.empty() ? "" : " ") + w;
  }
  GPUVM_ASSIGN_OR_RETURN(inv.request, control::ParseRequest(text));
  return inv;
}

Result<control::Reply> Call(const std::string& socket, const control::Request& request) {
  return control::Call(socket, request);
}

std::string RenderList(const control::ListReply& list) {
  std::string out = "scheduler: " + std::string(sched::PolicyKindName(list.policy)) + "\n";
  out += Pad("ID", 4, true) + "  " + Pad("NAME", 16) + Pad("MODE", 14) + Pad("VRAM", 10) +
         Pad("CHANNELS", 10) + Pad("SHARE", 9) + Pad("GPU 100ms", 11) + Pad("500ms", 8) +
         Pad("10s", 8) + Pad("QUEUED", 8) + Pad("GPU TIME", 14) + Pad("STANDING", 12) +
         Pad("LIMIT", 10) + "STATE\n";
  for (const control::VmRow& v : list.vms) {
    out += Pad(std::to_string(v.id), 4, true) + "  " + Pad(v.name.empty() ? "-" : v.name, 16) +
           Pad(v.mode, 14) + Pad(Bytes(v.vram_bytes), 10) +
           Pad(v.channels ? std::to_string(v.channels) : "-", 10);
    if (!v.scheduled) {
      out += "(not scheduled)\n";
      continue;
    }
    out += Pad(Format("%.1f%%", v.share_percent), 9) +
           Pad(Format("%.1f%%", v.usage_100ms * 100), 11) +
           Pad(Format("%.1f%%", v.usage_500ms * 100), 8) +
           Pad(Format("%.1f%%", v.usage_10s * 100), 8) + Pad(std::to_string(v.queued), 8) +
           Pad(Format("%.1f ms", v.gpu_ms), 14) + Pad(v.standing.empty() ? "-" : v.standing, 12) +
           Pad(v.kernel_limit_ms ? std::to_string(v.kernel_limit_ms) + " ms" : "-", 10) +
           (v.paused ? "paused" : "running") +
           (v.killed ? " (" + std::to_string(v.killed) + " killed)" : "") + "\n";
  }
  return out;
}

std::string RenderTop(const control::ListReply& now, const control::ListReply* before,
                      double seconds) {
  std::string out = "scheduler: " + std::string(sched::PolicyKindName(now.policy)) +
                    "   VMs: " + std::to_string(now.vms.size()) +
                    (before != nullptr ? "   rates over " + Format("%.1f s", seconds)
                                       : "   (rates from the next frame)") +
                    "\n";
  out += Pad("ID", 4, true) + "  " + Pad("NAME", 16) + Pad("MODE", 14) + Pad("SHARE", 8) +
         Pad("GPU now", 9) + Pad("100ms", 8) + Pad("500ms", 8) + Pad("10s", 8) + Pad("QUEUED", 8) +
         Pad("VRAM used/assigned", 20) + Pad("TRAPS/s", 10) + "STANDING\n";
  for (const control::VmRow& v : now.vms) {
    const control::VmRow* was = nullptr;
    if (before != nullptr) {
      for (const control::VmRow& b : before->vms) {
        if (b.id == v.id) was = &b;
      }
    }
    // Rates need the same VM in the previous frame; a new VM shows "-" until the next.
    const bool rates = was != nullptr && seconds > 0;
    const std::string gpu_now =
        rates ? Format("%.1f%%", std::max(0.0, v.gpu_ms - was->gpu_ms) / (seconds * 10)) : "-";
    const std::string traps = rates && v.traps >= was->traps
                                  ? Format("%.0f", double(v.traps - was->traps) / seconds)
                                  : "-";
    out += Pad(std::to_string(v.id), 4, true) + "  " + Pad(v.name.empty() ? "-" : v.name, 16) +
           Pad(v.mode, 14);
    if (v.scheduled) {
      out += Pad(Format("%.1f%%", v.share_percent), 8) + Pad(gpu_now, 9) +
             Pad(Format("%.1f%%", v.usage_100ms * 100), 8) +
             Pad(Format("%.1f%%", v.usage_500ms * 100), 8) +
             Pad(Format("%.1f%%", v.usage_10s * 100), 8) + Pad(std::to_string(v.queued), 8);
    } else {
      out += Pad("(not scheduled)", 49);
    }
    out += Pad(Bytes(v.vram_used_bytes) + " / " + Bytes(v.vram_bytes), 20) + Pad(traps, 10) +
           (v.standing.empty() ? "-" : v.standing) + "\n";
  }
  return out;
}

namespace {

// `top`: a frame per interval until the iterations are done (or forever); on a terminal each frame
// replaces the last.
int RunTop(const Invocation& inv) {
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  std::optional<control::ListReply> before;
  auto last = std::chrono::steady_clock::now();
  for (int frame = 0; inv.iterations == 0 || frame < inv.iterations; ++frame) {
    if (frame > 0) std::this_thread::sleep_for(std::chrono::milliseconds(inv.interval_ms));
    Result<control::Reply> reply = ctl::Call(inv.socket, inv.request);
    if (!reply.ok() || !reply->status.ok()) {
      std::fprintf(stderr, "gpuvm-ctl: %s: %s\n", inv.socket.c_str(),
                   (reply.ok() ? reply->status : reply.status()).ToString().c_str());
      return reply.ok() ? 1 : 3;
    }
    Result<control::ListReply> list = control::ParseList(reply->body);
    if (!list.ok()) {
      std::fprintf(stderr, "gpuvm-ctl: %s\n", list.status().ToString().c_str());
      return 3;
    }
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last).count();
    last = now;
    char clock[16] = "";
    const std::time_t t = std::time(nullptr);
    std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&t));
    const std::string frame_text = std::string(terminal ? "\x1b[H\x1b[2J" : "") +
                                   "gpuvm-ctl top  " + clock + "  " + inv.socket + "\n" +
                                   RenderTop(*list, before ? &*before : nullptr, seconds) +
                                   (terminal ? "" : "\n");
    std::fputs(frame_text.c_str(), stdout);
    std::fflush(stdout);
    before = std::move(*list);
  }
  return 0;
}

}  // namespace

int Run(const Invocation& inv) {
  if (inv.top) return RunTop(inv);
  Result<control::Reply> reply = ctl::Call(inv.socket, inv.request);
  if (!reply.ok()) {
    std::fprintf(stderr, "gpuvm-ctl: %s: %s\n", inv.socket.c_str(),
                 reply.status().ToString().c_str());
    return 3;
  }
  if (!reply->status.ok()) {
    std::fprintf(stderr, "gpuvm-ctl: refused: %s\n", reply->status.ToString().c_str());
    return 1;
  }
  if (std::holds_alternative<control::ListRequest>(inv.request)) {
    Result<control::ListReply> list = control::ParseList(reply->body);
    if (!list.ok()) {
      std::fprintf(stderr, "gpuvm-ctl: %s\n", list.status().ToString().c_str());
      return 3;
    }
    std::fputs(RenderList(*list).c_str(), stdout);
  } else if (std::holds_alternative<control::StatsRequest>(inv.request) ||
             std::holds_alternative<control::MetricsRequest>(inv.request) ||
             std::holds_alternative<control::VmTokenRequest>(inv.request)) {
    std::fputs(reply->body.c_str(), stdout);
  } else if (std::holds_alternative<control::KillWorkRequest>(inv.request)) {
    // Body "killed=N": how many submissions were failed.
    std::string body = reply->body;
    if (!body.empty() && body.back() == '\n') body.pop_back();
    std::fputs(("ok: " + control::FormatRequest(inv.request) + " (" + body + ")\n").c_str(),
               stdout);
  } else {
    std::fputs(("ok: " + control::FormatRequest(inv.request) + "\n").c_str(), stdout);
  }
  return 0;
}

}  // namespace gpuvm::ctl
