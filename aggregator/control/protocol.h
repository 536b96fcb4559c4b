// The aggregator's control protocol (docs/CONTROL.md): what an operator's tool (gpuvm-ctl) sends to
// the aggregator's control socket and what comes back. Text, so that it can be read in a packet
// trace and typed by hand, strictly parsed, because anything that can connect to the socket is
// untrusted until the server has checked its credentials, and a typo must never change a share.
//
// One request per SOCK_SEQPACKET message, one reply per request:
//   list                            the VMs: mode, VRAM, channels, share, usage over 100 ms,
//                                   500 ms and 10 s
//   stats                           everything the scheduler and dispatcher count, and each VM's
//                                   refusals, as one JSON object
//   set-share VM PERCENT            VM: its id or its name; PERCENT: 0-100, up to 3 decimals,
//                                   '%' optional (base/share.h)
//   set-scheduler fifo|credit|band
//   vm-token DOMID                  a one-time token for that domain's device model
//                                   (docs/SECURITY.md)
//   pause VM / resume VM            the VM's GPU work is switched out and not scheduled until
//                                   resumed (docs/SCHEDULER.md "Pause, kernel limit, kill-work")
//   kill-work VM                    fails the VM's running and queued GPU work (its guest sees a
//                                   launch failure); the VM stays usable
//   set-kernel-limit VM MS          one kernel of VM may run MS ms of GPU time (0: no limit)
// Reply: a first line "ok" or "error <StatusCodeName>: <message>", then the body (list: one record
// per line, see ListReply; stats: JSON).
//
// Threading: pure functions.
#ifndef GPUVM_AGGREGATOR_CONTROL_PROTOCOL_H_
#define GPUVM_AGGREGATOR_CONTROL_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "scheduler/types.h"

namespace gpuvm::control {

// A request longer than this is refused unread (the longest valid one is far shorter).
inline constexpr size_t kMaxRequestBytes = 256;
// Replies fit one message: 64 VMs x ~250 bytes of list, or the stats JSON.
inline constexpr size_t kMaxReplyBytes = 128 * 1024;
// The control socket's path is the aggregator's socket path plus this.
inline constexpr std::string_view kControlSocketSuffix = "-control";
std::string ControlSocketPathFor(std::string_view aggregator_socket_path);

struct ListRequest {
  friend bool operator==(const ListRequest&, const ListRequest&) = default;
};
struct StatsRequest {
  friend bool operator==(const StatsRequest&, const StatsRequest&) = default;
};
struct SetShareRequest {
  std::string vm;  // decimal id, or a VM name (NAME or NAME@options, base/vm_name.h)
  double percent = 0;
  friend bool operator==(const SetShareRequest&, const SetShareRequest&) = default;
};
struct SetSchedulerRequest {
  sched::PolicyKind policy = sched::PolicyKind::kBand;
  friend bool operator==(const SetSchedulerRequest&, const SetSchedulerRequest&) = default;
};
// A one-time token for the device model of domain `domid` (1..32751; docs/SECURITY.md). Reply
// body: the token as 64 hex digits and a newline.
struct VmTokenRequest {
  uint16_t domid = 0;
  friend bool operator==(const VmTokenRequest&, const VmTokenRequest&) = default;
};
// The figures in the Prometheus text format (metrics.h); the reply body is the exposition.
struct MetricsRequest {
  friend bool operator==(const MetricsRequest&, const MetricsRequest&) = default;
};
// The operator's controls of a VM's GPU work (docs/SCHEDULER.md "Pause, kernel limit,
// kill-work"); `vm` as in SetShareRequest.
struct PauseRequest {
  std::string vm;
  friend bool operator==(const PauseRequest&, const PauseRequest&) = default;
};
struct ResumeRequest {
  std::string vm;
  friend bool operator==(const ResumeRequest&, const ResumeRequest&) = default;
};
// Reply body: "killed=N" and a newline (submissions failed).
struct KillWorkRequest {
  std::string vm;
  friend bool operator==(const KillWorkRequest&, const KillWorkRequest&) = default;
};
// Whole milliseconds of GPU time, 0 (no limit) to kMaxKernelLimitMs.
inline constexpr uint32_t kMaxKernelLimitMs = 86'400'000;  // 24 h
struct SetKernelLimitRequest {
  std::string vm;
  uint32_t ms = 0;
  friend bool operator==(const SetKernelLimitRequest&, const SetKernelLimitRequest&) = default;
};
using Request = std::variant<ListRequest, StatsRequest, SetShareRequest, SetSchedulerRequest,
                             VmTokenRequest, MetricsRequest, PauseRequest, ResumeRequest,
                             KillWorkRequest, SetKernelLimitRequest>;
// "MS" of set-kernel-limit (also gpuvm-aggregator --kernel-limit-ms): InvalidArgument saying why
// (negative, not a whole number, past 24 h).
Result<uint32_t> ParseKernelLimitMs(std::string_view text);

// InvalidArgument with a message that names what is wrong ("share '-5' is negative", "unknown
// command 'lst'"). Accepts one trailing newline; words are separated by single spaces. PERCENT is
// a share as every gpuvm tool takes it (base/share.h: 0-100, at most 3 decimals, '%' optional).
Result<Request> ParseRequest(std::string_view text);
std::string FormatRequest(const Request& request);

// --- replies ---
struct Reply {
  Status status;     // not OK: the request changed nothing
  std::string body;  // OK only
};
std::string FormatReply(const Reply& reply);
// DataLoss when the reply is not one this protocol produces.
Result<Reply> ParseReply(std::string_view text);

// What the aggregator knows of a VM by itself (the scheduler knows the rest of a `list` row).
struct VmIdentity {
  uint32_t id = 0;
  std::string name;
  std::string mode;  // "pt", "fv", "pv"
  uint64_t vram_bytes = 0;
  uint32_t channels = 0;
  uint64_t vram_used_bytes = 0;  // what the VM holds now: fv's dynamic VRAM grows; else vram_bytes
  uint64_t traps = 0;            // the VM's trapped BAR accesses so far (reads + writes, every BAR)
  friend bool operator==(const VmIdentity&, const VmIdentity&) = default;
};

// One VM as `list` shows it.
struct VmRow : VmIdentity {
  double share_percent = 0;
  bool scheduled = false;  // known to the scheduler (false: not yet, or the VM owns the GPU in pt)
  double usage_100ms = 0;  // fraction of wall time on the GPU, 0..1
  double usage_500ms = 0;
  double usage_10s = 0;
  uint32_t queued = 0;
  double gpu_ms = 0;  // all-time GPU time
  std::string standing;
  // The operator's controls (absent from an older aggregator's list: false / 0).
  bool paused = false;
  uint32_t kernel_limit_ms = 0;  // 0: no limit
  uint64_t killed = 0;           // submissions failed by kill-work or the kernel limit
  friend bool operator==(const VmRow&, const VmRow&) = default;
};
struct ListReply {
  sched::PolicyKind policy = sched::PolicyKind::kBand;
  std::vector<VmRow> vms;
  friend bool operator==(const ListReply&, const ListReply&) = default;
};
// Body lines: "scheduler policy=band", then "vm id=1 name=a mode=fv vram=268435456
// vram_used=1835008 channels=8 traps=10432 share=25 scheduled=1 usage100=0.2500 usage500=0.2500
// usage10s=0.2500 queued=0 gpu_ms=1.5 standing=at paused=0 kernel_limit_ms=0 killed=0". Names are
// %-escaped outside [A-Za-z0-9._@,-]; empty fields are "-". ParseList ignores fields it does not
// know and takes paused, kernel_limit_ms and killed as optional (an older aggregator's list).
std::string FormatList(const ListReply& list);
Result<ListReply> ParseList(std::string_view body);

// JSON string literal of `s` (quotes included), escaping what JSON requires.
std::string JsonString(std::string_view s);

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_PROTOCOL_H_
