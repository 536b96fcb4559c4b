// The format of gpuvm's log lines (the aggregator's and gpuvm-dm's): one line per event, logfmt
// style key=value fields, so that an operator can grep or parse every line about one VM:
//
//   ts=2026-11-28T01:18:05.123Z level=warn component=gpuvm-aggregator vm=3 name=web msg="..."
//
// ts (UTC, milliseconds), level (info, warn, error) and component come first; then the event's own
// fields, where a line about a VM always starts with `vm=<id> name=<name>` (VmLogFields); msg last.
// A value is written as is when it is non-empty printable ASCII without spaces, '"', '=' or '\';
// otherwise in double quotes, '"' and '\' escaped with '\', anything unprintable as '?' (a guest or
// peer can put text into a message; it never writes control characters into the log).
//
// Inside the programs, log sinks carry an event's body (LogEvent: "level=... <fields> msg=...");
// the program's writer adds ts and component (FormatLogLine). A sink handed plain text (not a
// LogEvent) still gives a well-formed line: the text becomes an info line's msg.
//
// Threading: pure functions, except WriteLogLine, which writes one whole line per call (stdio's
// lock makes concurrent calls interleave by lines only).
#ifndef GPUVM_BASE_LOG_H_
#define GPUVM_BASE_LOG_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpuvm {

enum class LogLevel { kInfo, kWarn, kError };

// "info", "warn", "error".
std::string_view LogLevelName(LogLevel level);

// `value` as a logfmt value (quoted and escaped when needed, see above).
std::string LogValue(std::string_view value);

// " key=value" (with its leading space), for appending a field to a field list.
std::string LogField(std::string_view key, std::string_view value);

// The fields that start every line about a VM: "vm=3 name=web".
std::string VmLogFields(uint32_t vm, std::string_view name);

// One event's body: "level=warn vm=3 name=web msg=\"...\"" (`fields` may be empty).
std::string LogEvent(LogLevel level, std::string_view fields, std::string_view msg);
inline std::string LogEvent(std::string_view msg) { return LogEvent(LogLevel::kInfo, {}, msg); }

// The whole line (no newline): "ts=... level=... component=... <fields> msg=...".
std::string FormatLogLine(std::chrono::system_clock::time_point when, std::string_view component,
                          std::string_view body);

// Writes FormatLogLine(now, component, body) and a newline to `out` in one call, and flushes.
void WriteLogLine(std::FILE* out, std::string_view component, std::string_view body);

// The log of a program serving one VM (gpuvm-dm, gpuvm-pvdrm-backend): lines on stderr carrying
// the VM's name and domain, and its aggregator id once the aggregator has admitted it.
// Threading: Admitted before the log is shared; the call operator from any thread.
class VmLog {
 public:
  VmLog(std::string component, std::string name, uint32_t domid)
      : component_(std::move(component)), name_(std::move(name)), domid_(domid) {}
  void Admitted(uint32_t vm) { vm_ = vm; }
  void operator()(LogLevel level, const std::string& msg) const;

 private:
  const std::string component_;
  const std::string name_;
  const uint32_t domid_;
  std::optional<uint32_t> vm_;
};

}  // namespace gpuvm

#endif  // GPUVM_BASE_LOG_H_
