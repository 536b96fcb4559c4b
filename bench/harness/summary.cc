#include "bench/harness/summary.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace gpuvm::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

void Summary::Add(const RunRecord& record) {
  Cell& cell = cells_[{record.bench, record.mode}];
  ++cell.runs;
  if (cell.api.empty()) cell.api = record.api;
  if (cell.problem.empty()) cell.problem = record.problem;
  if (!record.correct) {
    ++cell.failed;
    ++failures_;
    if (cell.first_error.empty()) cell.first_error = record.error;
    return;  // a failed run's times mean nothing
  }
  cell.seconds.push_back(record.seconds);
  cell.wall.push_back(record.wall_seconds);
  for (int i = 0; i < kPhaseCount; ++i) cell.phases[i].push_back(record.phases[i]);
  for (const auto& [name, value] : record.counters) cell.counters[name].push_back(value);
  if (record.iterations > 0 && !record.counters.empty()) {
    double traps = 0;
    for (const auto& [name, value] : record.counters) {
      if (name.rfind("bar", 0) == 0) traps += value;
      cell.per_iteration[name].push_back(value / record.iterations);
    }
    cell.per_iteration["traps"].push_back(traps / record.iterations);
  }
}

const Summary::Cell* Summary::Find(const std::string& bench, const std::string& mode) const {
  const auto it = cells_.find({bench, mode});
  return it == cells_.end() ? nullptr : &it->second;
}

namespace {

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Right-aligned in `width`.
std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}
std::string PadRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// Seconds with 4 significant decimals below 10 s, fewer above.
std::string Seconds(double s) { return Printf(s < 10 ? "%.4f" : "%.2f", s); }

std::string Count(double c) {
  if (c >= 1e7) return Printf("%.3g", c);
  return Printf("%.0f", c);
}

}  // namespace

std::string Summary::Render(const std::string& header, const std::vector<std::string>& benchmarks,
                            const std::vector<std::string>& modes) const {
  std::string out = header + "\n";
  const bool have_native = std::find(modes.begin(), modes.end(), "native") != modes.end();
  constexpr size_t kName = 8, kApi = 8, kCol = 12;

  // 1. Medians and ratios.
  out += "\nmedian seconds per run (the program's phases summed)";
  out += have_native && modes.size() > 1 ? " and ratio to native\n" : "\n";
  out += PadRight("bench", kName) + PadRight("api", kApi);
  for (const std::string& m : modes) out += Pad(m + " s", kCol);
  if (have_native) {
    for (const std::string& m : modes) {
      if (m != "native") out += Pad(m + "/nat", kCol);
    }
  }
  out += "\n";
  for (const std::string& b : benchmarks) {
    std::string api;
    for (const std::string& m : modes) {
      if (const Cell* c = Find(b, m); c != nullptr && api.empty()) api = c->api;
    }
    out += PadRight(b, kName) + PadRight(api, kApi);
    for (const std::string& m : modes) {
      const Cell* c = Find(b, m);
      std::string text = "-";
      if (c != nullptr && !c->seconds.empty()) text = Seconds(Median(c->seconds));
      if (c != nullptr && c->seconds.empty() && c->failed > 0) text = "FAILED";
      if (c != nullptr && !c->seconds.empty() && c->failed > 0) text += "!";
      out += Pad(text, kCol);
    }
    if (have_native) {
      const Cell* native = Find(b, "native");
      const double base = native != nullptr ? Median(native->seconds) : 0;
      for (const std::string& m : modes) {
        if (m == "native") continue;
        const Cell* c = Find(b, m);
        std::string text = "-";
        if (c != nullptr && !c->seconds.empty() && base > 0) {
          const double ratio = Median(c->seconds) / base;
          text = Printf(ratio < 100 ? "%.2f" : "%.0f", ratio);
        }
        out += Pad(text, kCol);
      }
    }
    out += "\n";
  }

  // 2. Phases per mode.
  for (const std::string& m : modes) {
    out += "\nphases, median seconds: " + m + "\n" + PadRight("bench", kName);
    for (const char* p : kPhaseNames) out += Pad(p, kCol);
    out += Pad("total", kCol) + Pad("wall", kCol) + "  problem\n";
    for (const std::string& b : benchmarks) {
      const Cell* c = Find(b, m);
      if (c == nullptr || c->seconds.empty()) continue;
      out += PadRight(b, kName);
      for (int i = 0; i < kPhaseCount; ++i) out += Pad(Seconds(Median(c->phases[i])), kCol);
      out += Pad(Seconds(Median(c->seconds)), kCol) + Pad(Seconds(Median(c->wall)), kCol) + "  " +
             c->problem + "\n";
    }
  }

  // 3. Counters per mode (traps per BAR first, then whatever else the layer reported).
  static const std::vector<std::pair<std::string, std::string>> kTrapColumns = {
      {"bar0_reads", "BAR0 r"},  {"bar0_writes", "BAR0 w"}, {"bar1_reads", "BAR1 r"},
      {"bar1_writes", "BAR1 w"}, {"bar3_reads", "BAR3 r"},  {"bar3_writes", "BAR3 w"},
      {"refused", "refused"}};
  for (const std::string& m : modes) {
    std::set<std::string> names;
    for (const std::string& b : benchmarks) {
      if (const Cell* c = Find(b, m); c != nullptr) {
        for (const auto& [name, values] : c->counters) names.insert(name);
      }
    }
    if (names.empty()) continue;
    out += "\ntraps per BAR per run (median, gpuvm-dm's counters): " + m + "\n" +
           PadRight("bench", kName);
    for (const auto& [key, title] : kTrapColumns) out += Pad(title, kCol);
    out += "\n";
    for (const std::string& b : benchmarks) {
      const Cell* c = Find(b, m);
      if (c == nullptr || c->counters.empty()) continue;
      out += PadRight(b, kName);
      for (const auto& [key, title] : kTrapColumns) {
        const auto it = c->counters.find(key);
        out += Pad(it == c->counters.end() ? "-" : Count(Median(it->second)), kCol);
      }
      std::string extra;
      for (const auto& [name, values] : c->counters) {
        bool shown = false;
        for (const auto& [key, title] : kTrapColumns) shown |= key == name;
        if (!shown && name.rfind("config_", 0) != 0 && name.rfind("refused_", 0) != 0) {
          extra += " " + name + "=" + Count(Median(values));
        }
      }
      out += extra + "\n";
    }
  }

  // 4. Para-virtual calls (GPUvm's Table 4.1 shape): per benchmark and pv mode, the calls the
  // host applied and the doorbells the guest rang, beside every mode's exits (ioreqs) and traps
  // (elements), medians per run.
  std::vector<std::string> pv_modes, counted_modes;
  for (const std::string& m : modes) {
    bool pv = false, counted = false;
    for (const std::string& b : benchmarks) {
      if (const Cell* c = Find(b, m); c != nullptr) {
        pv |= c->counters.count("pv_calls") != 0;
        counted |= !c->counters.empty();
      }
    }
    if (pv) pv_modes.push_back(m);
    if (counted) counted_modes.push_back(m);
  }
  if (!pv_modes.empty()) {
    out +=
        "\npara-virtual calls / doorbells per run, and exits (ioreqs) / traps (elements) per run "
        "(medians)\n" +
        PadRight("bench", kName);
    for (const std::string& m : pv_modes) out += Pad(m + " calls", 20) + Pad("doorbells", 11);
    for (const std::string& m : counted_modes) out += Pad(m + " exits", 20) + Pad("traps", 11);
    out += "\n";
    auto median = [&](const Cell* c, const std::string& key) -> std::string {
      if (c == nullptr) return "-";
      const auto it = c->counters.find(key);
      return it == c->counters.end() ? "-" : Count(Median(it->second));
    };
    for (const std::string& b : benchmarks) {
      out += PadRight(b, kName);
      for (const std::string& m : pv_modes) {
        const Cell* c = Find(b, m);
        out += Pad(median(c, "pv_calls"), 20) + Pad(median(c, "pv_doorbells"), 11);
      }
      for (const std::string& m : counted_modes) {
        const Cell* c = Find(b, m);
        std::string traps = "-";
        if (c != nullptr) {
          double sum = 0;
          bool any = false;
          for (const auto& [key, title] : kTrapColumns) {
            if (key == "refused") continue;
            if (auto it = c->counters.find(key); it != c->counters.end()) {
              sum += Median(it->second);
              any = true;
            }
          }
          if (any) traps = Count(sum);
        }
        out += Pad(median(c, "mmio_exits"), 20) + Pad(traps, 11);
      }
      out += "\n";
    }
  }

  // 5. Per iteration, for the programs that count their iterations: traps (every BAR access,
  // elements) and page-table scans, the whole run (init and close too) divided by the iterations.
  bool iterated = false;
  for (const auto& [key, cell] : cells_) iterated |= !cell.per_iteration.empty();
  if (iterated) {
    static const std::vector<std::pair<std::string, std::string>> kColumns = {
        {"traps", "traps"},
        {"mmio_exits", "exits"},
        {"scans", "scans"},
        {"tables_scanned", "tables"},
        {"tlb_flushes", "TLB flushes"}};
    out += "\nper iteration (median; the whole run divided by the program's iterations)\n" +
           PadRight("bench", kName) + PadRight("mode", 14);
    for (const auto& [key, title] : kColumns) out += Pad(title, kCol);
    out += "\n";
    for (const std::string& b : benchmarks) {
      for (const std::string& m : modes) {
        const Cell* c = Find(b, m);
        if (c == nullptr || c->per_iteration.empty()) continue;
        out += PadRight(b, kName) + PadRight(m, 14);
        for (const auto& [key, title] : kColumns) {
          const auto it = c->per_iteration.find(key);
          out += Pad(it == c->per_iteration.end() ? "-" : Printf("%.1f", Median(it->second)), kCol);
        }
        out += "\n";
      }
    }
  }

  // 6. Failures.
  if (failures_ > 0) {
    out += "\nfailed runs ('!' above: medians are of the correct runs only)\n";
    for (const std::string& b : benchmarks) {
      for (const std::string& m : modes) {
        const Cell* c = Find(b, m);
        if (c == nullptr || c->failed == 0) continue;
        out += "  " + b + " " + m + ": " + std::to_string(c->failed) + " of " +
               std::to_string(c->runs) + " failed; first: " + c->first_error + "\n";
      }
    }
  }
  return out;
}

}  // namespace gpuvm::bench
