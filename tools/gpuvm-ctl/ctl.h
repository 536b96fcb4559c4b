// gpuvm-ctl's logic, apart from main() so it can be tested: turning the command line into a
// control request (checked locally first, so a typo never reaches the aggregator), talking to
// the control socket, and rendering replies for a terminal.
//
//   gpuvm-ctl [--socket PATH] list
//   gpuvm-ctl [--socket PATH] stats [--json]
//   gpuvm-ctl [--socket PATH] metrics             (the Prometheus text exposition)
//   gpuvm-ctl [--socket PATH] set-share VM PERCENT
//   gpuvm-ctl [--socket PATH] set-scheduler fifo|credit|band
//   gpuvm-ctl [--socket PATH] vm-token DOMID      (prints a one-time token, docs/SECURITY.md)
//   gpuvm-ctl [--socket PATH] pause VM | resume VM | kill-work VM | set-kernel-limit VM MS
//   gpuvm-ctl [--socket PATH] top [--interval-ms N] [--iterations N]   (a live view of `list`)
//
// The socket defaults to $GPUVM_CONTROL, else the aggregator's socket ($GPUVM_AGGREGATOR or
// @gpuvm-aggregator-<uid>) + "-control".
//
// Threading: plain functions.
#ifndef GPUVM_TOOLS_GPUVM_CTL_CTL_H_
#define GPUVM_TOOLS_GPUVM_CTL_CTL_H_

#include <string>
#include <vector>

#include "aggregator/control/protocol.h"
#include "base/status.h"

namespace gpuvm::ctl {

struct Invocation {
  std::string socket;  // resolved
  control::Request request;
  bool json = false;  // stats --json
  // top: a `list` every interval, drawn as a live view; 0 iterations: until interrupted.
  bool top = false;
  int interval_ms = 1000;
  int iterations = 0;
};

// InvalidArgument with the reason (the caller prints it with the usage).
Result<Invocation> ParseCommandLine(const std::vector<std::string>& args);
std::string DefaultControlSocket();
extern const char kUsage[];

// One request, one reply (control/client.h: a refusal reaches us as the reply, not as a broken
// pipe). Unavailable when nothing listens; DataLoss for a malformed reply.
Result<control::Reply> Call(const std::string& socket, const control::Request& request);

// The list as a table, e.g.
//   scheduler: band
//   ID  NAME  MODE  VRAM      CHANNELS  SHARE   GPU 100ms  500ms   10s     QUEUED  GPU TIME
//   STANDING
std::string RenderList(const control::ListReply& list);

// One frame of `top`: `now`, with the rates since `before` (the previous frame, `seconds` earlier;
// null for the first): each VM's GPU use over that interval (from its GPU time) beside its share
// and the scheduler's 100 ms / 500 ms / 10 s windows, queued work, VRAM used of assigned, traps/s.
std::string RenderTop(const control::ListReply& now, const control::ListReply* before,
                      double seconds);

// Runs an invocation: prints to stdout/stderr, returns the exit status (0 ok, 1 refused, 3 cannot
// reach the aggregator or a broken reply).
int Run(const Invocation& invocation);

}  // namespace gpuvm::ctl

#endif  // GPUVM_TOOLS_GPUVM_CTL_CTL_H_
