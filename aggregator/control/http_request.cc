#include "aggregator/control/http_request.h"

#include <cctype>

namespace gpuvm::control {
namespace {

// RFC 9110's tchar.
bool IsTokenChar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  for (char t : std::string_view("!#$%&'*+-.^_`|~")) {
    if (c == t) return true;
  }
  return false;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// A field value or a request target: no control characters (tab only in values) and no DEL; bytes
// from 0x80 (obs-text) pass.
bool IsPrintable(std::string_view s, bool tab_ok) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f) return false;
  }
  return true;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

HttpVerdict Refuse(int status, std::string why) {
  return HttpVerdict{HttpVerdict::Kind::kRefuse, status, false, std::move(why)};
}

// The line of `text` starting at `start` without its CRLF or LF, and where the next one starts;
// false when it has no line end yet.
bool NextLine(std::string_view text, size_t start, std::string_view* line, size_t* next) {
  const size_t lf = text.find('\n', start);
  if (lf == std::string_view::npos) return false;
  size_t end = lf;
  if (end > start && text[end - 1] == '\r') --end;
  *line = text.substr(start, end - start);
  *next = lf + 1;
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "Error";
}

}  // namespace

HttpVerdict ReadHttpRequest(std::string_view received) {
  const HttpVerdict too_long =
      Refuse(431, "request head longer than " + std::to_string(kMaxHttpHeadBytes) + " bytes");
  std::string_view line;
  size_t next = 0;
  if (!NextLine(received, 0, &line, &next)) {
    return received.size() > kMaxHttpHeadBytes ? too_long : HttpVerdict{};
  }
  if (next > kMaxHttpHeadBytes) return too_long;
  // METHOD SP TARGET SP VERSION, single spaces.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Refuse(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || target.empty() || !IsPrintable(target, false)) {
    return Refuse(400, "malformed request line");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit(version[5]) ||
      version[6] != '.' || !std::isdigit(version[7])) {
    return Refuse(400, "malformed HTTP version");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Refuse(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  // The header block, line by line up to the empty one. Each complete line is judged at once.
  int hosts = 0;
  for (;;) {
    const size_t start = next;
    if (!NextLine(received, start, &line, &next)) {
      return received.size() > kMaxHttpHeadBytes ? too_long : HttpVerdict{};
    }
    if (next > kMaxHttpHeadBytes) return too_long;
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon)) ||
        !IsPrintable(line.substr(colon + 1), true)) {
      // (Also obs-fold, a line starting with a space: no token before its colon.)
      return Refuse(400, "malformed header line");
    }
    hosts += EqualsIgnoringCase(line.substr(0, colon), "host");
  }
  if (version == "HTTP/1.1" && hosts != 1) return Refuse(400, "HTTP/1.1 wants one Host header");
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") return Refuse(404, "only /metrics is served here");
  if (method != "GET" && method != "HEAD") return Refuse(405, "only GET and HEAD are served");
  return HttpVerdict{HttpVerdict::Kind::kServeMetrics, 200, method == "HEAD", ""};
}

std::string HttpResponse(int status, std::string_view content_type, std::string_view body,
                         bool head) {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  r += "Content-Type: " + std::string(content_type) + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 405) r += "Allow: GET, HEAD\r\n";
  r += "Connection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

std::string HttpRefusal(const HttpVerdict& verdict) {
  return HttpResponse(verdict.status, "text/plain; charset=utf-8", verdict.why + "\n");
}

}  // namespace gpuvm::control
