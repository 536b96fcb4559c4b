// ptx_parse_bench: how fast the front end parses the kernel corpus. Prints, per file and in total,
// the median time of N parses and microseconds per KB. A program, not a test (timings are never
// asserted).
//   ptx_parse_bench [--repeat N] [dir]     (dir defaults to the source tree's bench/kernels)
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ptx/parser.h"

int main(int argc, char** argv) {
  int repeat = 21;
  std::string dir = GPUVM_KERNELS_DIR;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      dir = argv[i];
    }
  }
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.ends_with(".ptx")) files.push_back(name);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::printf("%-20s %8s %12s %10s\n", "file", "KB", "median us", "us/KB");
  double total_us = 0, total_kb = 0;
  for (const std::string& file : files) {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    std::vector<double> times;
    for (int r = 0; r < repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      auto module = gpuvm::ptx::ParseModule(text);
      auto end = std::chrono::steady_clock::now();
      if (!module.ok()) {
        std::printf("%s: %s\n", file.c_str(), module.status().ToString().c_str());
        return 1;
      }
      times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double kb = text.size() / 1024.0;
    total_us += median;
    total_kb += kb;
    std::printf("%-20s %8.1f %12.1f %10.2f\n", file.c_str(), kb, median, median / kb);
  }
  std::printf("%-20s %8.1f %12.1f %10.2f\n", "total", total_kb, total_us,
              total_kb > 0 ? total_us / total_kb : 0.0);
  return 0;
}
