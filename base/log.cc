#include "base/log.h"

#include <ctime>

namespace gpuvm {

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string LogValue(std::string_view value) {
  bool bare = !value.empty();
  for (const char c : value) {
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '=' || c == '\\') bare = false;
  }
  if (bare) return std::string(value);
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
  }
  return out + "\"";
}

std::string LogField(std::string_view key, std::string_view value) {
  return " " + std::string(key) + "=" + LogValue(value);
}

std::string VmLogFields(uint32_t vm, std::string_view name) {
  return "vm=" + std::to_string(vm) + LogField("name", name);
}

std::string LogEvent(LogLevel level, std::string_view fields, std::string_view msg) {
  std::string body = "level=" + std::string(LogLevelName(level));
  if (!fields.empty()) body += " " + std::string(fields);
  return body + LogField("msg", msg);
}

std::string FormatLogLine(std::chrono::system_clock::time_point when, std::string_view component,
                          std::string_view body) {
  const auto since_epoch = when.time_since_epoch();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds);
  const std::time_t t = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  gmtime_r(&t, &utc);
  char ts[80];  // (room for any year: the compiler checks)
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis.count()));
  // A LogEvent body starts with its level; anything else is plain text: an info line's message.
  std::string_view level = "level=info";
  std::string rest;
  if (body.substr(0, 6) == "level=") {
    const size_t space = body.find(' ');
    level = body.substr(0, space);
    if (space != std::string_view::npos) rest = std::string(body.substr(space));
  } else {
    rest = LogField("msg", body);
  }
  return "ts=" + std::string(ts) + " " + std::string(level) + LogField("component", component) +
         rest;
}

void WriteLogLine(std::FILE* out, std::string_view component, std::string_view body) {
  if (out == nullptr) return;
  const std::string line = FormatLogLine(std::chrono::system_clock::now(), component, body) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

void VmLog::operator()(LogLevel level, const std::string& msg) const {
  const std::string fields = vm_ ? VmLogFields(*vm_, name_) : "name=" + LogValue(name_);
  WriteLogLine(stderr, component_,
               LogEvent(level, fields + LogField("domid", std::to_string(domid_)), msg));
}

}  // namespace gpuvm
