#include "bench/harness/scale.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace gpuvm::bench {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::string RenderScale(const std::vector<RunRecord>& records,
                        const std::vector<std::string>& benchmarks,
                        const std::vector<std::string>& modes, const std::vector<int>& counts) {
  struct Cell {
    std::vector<double> seconds;
    int failed = 0;
  };
  std::map<std::tuple<std::string, std::string, int>, Cell> cells;
  for (const RunRecord& r : records) {
    Cell& c = cells[{r.bench, r.mode, r.vms}];
    if (r.correct) {
      c.seconds.push_back(r.seconds);
    } else {
      ++c.failed;
    }
  }
  auto median = [&](const std::string& b, const std::string& m, int k) {
    auto it = cells.find({b, m, k});
    return it == cells.end() ? 0.0 : Median(it->second.seconds);
  };
  const bool has_native = std::find(modes.begin(), modes.end(), "native") != modes.end();
  std::string out =
      "scale run (GPUvm Fig 4.10): median seconds per VM over all VMs and runs; (xR) = ratio to\n"
      "the same mode with " +
      std::to_string(counts.empty() ? 1 : counts.front()) + " VM" +
      (counts.size() && counts.front() == 1 ? "" : "s") +
      (has_native ? ", [xN native] = ratio to native with as many programs at once" : "") + "\n";
  char buf[128];
  for (const std::string& b : benchmarks) {
    out += "\n" + b + "\n";
    std::snprintf(buf, sizeof buf, "  %-4s", "VMs");
    out += buf;
    for (const std::string& m : modes) {
      std::snprintf(buf, sizeof buf, " | %-32s", m.c_str());
      out += buf;
    }
    out += "\n";
    for (int k : counts) {
      std::snprintf(buf, sizeof buf, "  %-4d", k);
      out += buf;
      for (const std::string& m : modes) {
        const double s = median(b, m, k);
        const double first = median(b, m, counts.front());
        const double native = has_native ? median(b, "native", k) : 0;
        std::string cell;
        if (s <= 0) {
          cell = "-";
        } else {
          std::snprintf(buf, sizeof buf, "%.4f s (x%.2f)", s, first > 0 ? s / first : 0.0);
          cell = buf;
          if (m != "native" && native > 0) {
            std::snprintf(buf, sizeof buf, " [x%.1f native]", s / native);
            cell += buf;
          }
        }
        auto it = cells.find({b, m, k});
        if (it != cells.end() && it->second.failed > 0) {
          cell += " " + std::to_string(it->second.failed) + " FAILED";
        }
        std::snprintf(buf, sizeof buf, " | %-32s", cell.c_str());
        out += buf;
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace gpuvm::bench
