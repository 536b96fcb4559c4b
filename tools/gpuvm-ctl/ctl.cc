#include "tools/gpuvm-ctl/ctl.h"

#include <cstdio>

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
    "       gpuvm-ctl [--socket PATH] set-share VM PERCENT     (VM: id or name; live)\n"
    "       gpuvm-ctl [--socket PATH] set-scheduler fifo|credit|band   (live)\n"
    "       gpuvm-ctl [--socket PATH] vm-token DOMID   (a one-time token for that domain's\n"
    "                                                   device model, docs/SECURITY.md)\n"
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
    } else if (args[i] == "--help" || args[i] == "-h") {
      return Status::InvalidArgument("help");
    } else {
      words.push_back(args[i]);
    }
  }
  if (words.empty()) return Status::InvalidArgument("no command");
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
  out += Pad("ID", 4, true) + "  " + Pad("NAME", 16) + Pad("MODE", 6) + Pad("VRAM", 10) +
         Pad("CHANNELS", 10) + Pad("SHARE", 9) + Pad("GPU 100ms", 11) + Pad("500ms", 8) +
         Pad("10s", 8) + Pad("QUEUED", 8) + Pad("GPU TIME", 14) + "STANDING\n";
  for (const control::VmRow& v : list.vms) {
    out += Pad(std::to_string(v.id), 4, true) + "  " + Pad(v.name.empty() ? "-" : v.name, 16) +
           Pad(v.mode, 6) + Pad(Bytes(v.vram_bytes), 10) +
           Pad(v.channels ? std::to_string(v.channels) : "-", 10);
    if (!v.scheduled) {
      out += "(not scheduled)\n";
      continue;
    }
    out += Pad(Format("%.1f%%", v.share_percent), 9) +
           Pad(Format("%.1f%%", v.usage_100ms * 100), 11) +
           Pad(Format("%.1f%%", v.usage_500ms * 100), 8) +
           Pad(Format("%.1f%%", v.usage_10s * 100), 8) + Pad(std::to_string(v.queued), 8) +
           Pad(Format("%.1f ms", v.gpu_ms), 14) + (v.standing.empty() ? "-" : v.standing) + "\n";
  }
  return out;
}

int Run(const Invocation& inv) {
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
             std::holds_alternative<control::VmTokenRequest>(inv.request)) {
    std::fputs(reply->body.c_str(), stdout);
  } else {
    std::fputs(("ok: " + control::FormatRequest(inv.request) + "\n").c_str(), stdout);
  }
  return 0;
}

}  // namespace gpuvm::ctl
