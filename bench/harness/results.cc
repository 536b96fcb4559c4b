#include "bench/harness/results.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>

namespace gpuvm::bench {

Json RunRecord::ToJson() const {
  Json j = Json::Object();
  j.Set("bench", Json::String(bench));
  j.Set("mode", Json::String(mode));
  j.Set("vms", Json::Number(vms));
  j.Set("vm", Json::Number(vm));
  j.Set("run", Json::Number(run));
  j.Set("api", Json::String(api));
  j.Set("size", Json::String(size));
  j.Set("problem", Json::String(problem));
  j.Set("seconds", Json::Number(seconds));
  j.Set("wall_seconds", Json::Number(wall_seconds));
  Json phase_object = Json::Object();
  for (int i = 0; i < kPhaseCount; ++i) phase_object.Set(kPhaseNames[i], Json::Number(phases[i]));
  j.Set("phases", std::move(phase_object));
  Json counter_object = Json::Object();
  for (const auto& [name, value] : counters) counter_object.Set(name, Json::Number(value));
  j.Set("counters", std::move(counter_object));
  if (iterations > 0) j.Set("iterations", Json::Number(iterations));
  j.Set("correct", Json::Bool(correct));
  j.Set("error", Json::String(error));
  j.Set("exit_status", Json::Number(exit_status));
  j.Set("rev", Json::String(rev));
  j.Set("load", Json::Number(std::round(load * 100) / 100));
  if (!huge_pages.empty()) j.Set("huge_pages", Json::String(huge_pages));
  j.Set("time", Json::String(time));
  return j;
}

namespace {

// The word in brackets of a sysfs selection ("always [madvise] never" -> "madvise").
std::string Selected(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "?";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "?";
  return line.substr(open + 1, close - open - 1);
}

}  // namespace

std::string HostHugePages() {
  return "private " + Selected("/sys/kernel/mm/transparent_hugepage/enabled") + ", shared " +
         Selected("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
}

namespace {

Result<const Json*> Field(const Json& object, const char* name, Json::Type type) {
  const Json* v = object.Find(name);
  if (v == nullptr) {
    return Status::InvalidArgument(std::string("the program's result has no \"") + name + "\"");
  }
  if (v->type() != type) {
    return Status::InvalidArgument(std::string("the program's result has a \"") + name +
                                   "\" of the wrong type");
  }
  return v;
}

// strtod, not stod: a flood of digits gives infinity instead of an exception.
double ToNumber(const std::string& digits) { return std::strtod(digits.c_str(), nullptr); }

// A duration a program may report: finite, not negative, under a day.
bool PlausibleSeconds(double s) { return std::isfinite(s) && s >= 0 && s < 86400; }

}  // namespace

Status ApplyProgramResult(std::string_view text, RunRecord* record) {
  GPUVM_ASSIGN_OR_RETURN(Json j, ParseJson(text));
  if (!j.is_object()) return Status::InvalidArgument("the program's result is not a JSON object");
  GPUVM_ASSIGN_OR_RETURN(const Json* bench, Field(j, "bench", Json::Type::kString));
  if (bench->string() != record->bench) {
    return Status::InvalidArgument("the program reported benchmark '" + bench->string() +
                                   "', not '" + record->bench + "'");
  }
  GPUVM_ASSIGN_OR_RETURN(const Json* api, Field(j, "api", Json::Type::kString));
  if (api->string() != "driver" && api->string() != "runtime") {
    return Status::InvalidArgument("the program's result has an unknown api");
  }
  GPUVM_ASSIGN_OR_RETURN(const Json* problem, Field(j, "problem", Json::Type::kString));
  GPUVM_ASSIGN_OR_RETURN(const Json* correct, Field(j, "correct", Json::Type::kBool));
  GPUVM_ASSIGN_OR_RETURN(const Json* seconds, Field(j, "seconds", Json::Type::kNumber));
  GPUVM_ASSIGN_OR_RETURN(const Json* phases, Field(j, "phases", Json::Type::kObject));
  GPUVM_ASSIGN_OR_RETURN(const Json* error, Field(j, "error", Json::Type::kString));
  if (!PlausibleSeconds(seconds->number())) {
    return Status::InvalidArgument("the program's result has an implausible \"seconds\"");
  }
  std::array<double, kPhaseCount> phase_seconds{};
  for (int i = 0; i < kPhaseCount; ++i) {
    GPUVM_ASSIGN_OR_RETURN(const Json* p, Field(*phases, kPhaseNames[i], Json::Type::kNumber));
    if (!PlausibleSeconds(p->number())) {
      return Status::InvalidArgument(std::string("the program's result has an implausible phase ") +
                                     kPhaseNames[i]);
    }
    phase_seconds[i] = p->number();
  }
  double iterations = 0;
  if (const Json* it = j.Find("iterations"); it != nullptr) {
    if (it->type() != Json::Type::kNumber || !std::isfinite(it->number()) || it->number() < 1 ||
        it->number() > 1e12 || it->number() != std::floor(it->number())) {
      return Status::InvalidArgument("the program's result has an implausible \"iterations\"");
    }
    iterations = it->number();
  }
  if (correct->bool_value() && !error->string().empty()) {
    return Status::InvalidArgument("the program's result is correct but carries an error");
  }
  constexpr size_t kMaxText = 512;  // a report is read by people; a flood is cut
  record->api = api->string();
  record->problem = problem->string().substr(0, kMaxText);
  record->correct = correct->bool_value();
  record->seconds = seconds->number();
  record->phases = phase_seconds;
  record->iterations = iterations;
  if (!correct->bool_value()) {
    record->error = error->string().empty() ? "the program reported a wrong result"
                                            : error->string().substr(0, kMaxText);
  }
  return Status::Ok();
}

std::map<std::string, double> ParseCounters(std::string_view vm_stderr) {
  std::map<std::string, double> counters;
  static const std::regex kTraps(
      R"(BAR0 r=(\d+) w=(\d+) \| BAR1 r=(\d+) w=(\d+) \| BAR3 r=(\d+) w=(\d+) \| config r=(\d+) w=(\d+) \| refused:(.*))");
  static const std::regex kPair(R"(([A-Za-z_][A-Za-z0-9_.-]*)=(\d+(?:\.\d+)?))");
  static const char* kTrapNames[] = {"bar0_reads", "bar0_writes", "bar1_reads",   "bar1_writes",
                                     "bar3_reads", "bar3_writes", "config_reads", "config_writes"};
  std::istringstream lines{std::string(vm_stderr)};
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 4096) continue;  // nobody's counter line; keeps the regexes cheap
    std::smatch m;
    if (std::regex_search(line, m, kTraps)) {
      for (int i = 0; i < 8; ++i) counters[kTrapNames[i]] = ToNumber(m[i + 1].str());
      double refused = 0;
      const std::string reasons = m[9].str();
      for (auto it = std::sregex_iterator(reasons.begin(), reasons.end(), kPair);
           it != std::sregex_iterator(); ++it) {
        const double n = ToNumber((*it)[2].str());
        counters["refused_" + (*it)[1].str()] = n;
        refused += n;
      }
      counters["refused"] = refused;
      continue;
    }
    const std::string hook = "gpuvm-counters:";
    const size_t at = line.find(hook);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + hook.size());
    for (auto it = std::sregex_iterator(rest.begin(), rest.end(), kPair);
         it != std::sregex_iterator(); ++it) {
      counters[(*it)[1].str()] = ToNumber((*it)[2].str());
    }
  }
  return counters;
}

std::map<std::string, double> ParseSessionCounters(std::string_view log,
                                                   const std::string& vm_name) {
  std::map<std::string, double> counters;
  static const std::regex kScans(R"(scans (\d+) \(tables (\d+))");
  static const std::regex kFlushes(R"(TLB flushes (\d+))");
  static const std::regex kEntries(R"(shadow entries written (\d+))");
  // The VM's lines carry its name as a field (base/log.h); a VM name is never quoted there.
  const std::string field = " name=" + vm_name + " ";
  std::istringstream lines{std::string(log)};
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 4096) continue;
    if (line.find(field) == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_search(line, m, kScans)) continue;
    counters["scans"] = ToNumber(m[1].str());
    counters["tables_scanned"] = ToNumber(m[2].str());
    if (std::regex_search(line, m, kFlushes)) counters["tlb_flushes"] = ToNumber(m[1].str());
    if (std::regex_search(line, m, kEntries)) {
      counters["shadow_entries_written"] = ToNumber(m[1].str());
    }
  }
  return counters;
}

std::string UtcTimestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpuvm::bench
