// ptx_check: parses PTX files with the gpuvm front end and prints "ok" with a summary, or the load
// error. A developer tool (and what docs/PTX.md suggests for checking a kernel before shipping it).
//   ptx_check [--print] file.ptx...   (--print: write the parsed module back as PTX to stdout)
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "ptx/parser.h"
#include "ptx/printer.h"

int main(int argc, char** argv) {
  int failures = 0;
  bool print = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--print") {
      print = true;
      continue;
    }
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot open\n", argv[i]);
      ++failures;
      continue;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    auto module = gpuvm::ptx::ParseModule(text);
    if (!module.ok()) {
      std::printf("%s: %s\n", argv[i], module.status().ToString().c_str());
      ++failures;
      continue;
    }
    if (print) {
      std::fputs(gpuvm::ptx::PrintModule(*module).c_str(), stdout);
      continue;
    }
    size_t instructions = 0;
    for (const auto& f : module->functions) instructions += f.body.size();
    std::printf("%s: ok (%zu functions, %zu globals, %zu instructions)\n", argv[i],
                module->functions.size(), module->globals.size(), instructions);
  }
  return failures == 0 ? 0 : 1;
}
