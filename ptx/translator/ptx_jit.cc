// ptx_jit: translates PTX files with the JIT and prints, per kernel, its statistics and (with -d)
// the GVISA disassembly. A debugging aid: `ptx_jit -d bench/kernels/fmmul.ptx`.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gpu/isa/disassembler.h"
#include "gpu/isa/encoding.h"
#include "ptx/translator/translator.h"

int main(int argc, char** argv) {
  bool disassemble = false;
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-d") {
      disassemble = true;
      continue;
    }
    std::ifstream file(arg);
    if (!file) {
      fprintf(stderr, "%s: cannot open\n", arg.c_str());
      ++failures;
      continue;
    }
    std::stringstream text;
    text << file.rdbuf();
    std::vector<gpuvm::ptx::KernelStats> stats;
    gpuvm::Result<gpuvm::isa::Module> module = gpuvm::ptx::CompilePtx(text.str(), {}, &stats);
    if (!module.ok()) {
      fprintf(stderr, "%s: %s\n", arg.c_str(), module.status().ToString().c_str());
      ++failures;
      continue;
    }
    for (size_t k = 0; k < module->kernels.size(); ++k) {
      const gpuvm::isa::ModuleKernel& kernel = module->kernels[k];
      printf(
          "%s: %s: %u instructions, %u registers, %u predicates, %u copies coalesced, %zu bytes\n",
          arg.c_str(), kernel.name.c_str(), stats[k].instructions, stats[k].registers,
          stats[k].predicates, stats[k].moves_removed, kernel.image.size());
      if (!disassemble) continue;
      gpuvm::Result<gpuvm::isa::Kernel> decoded = gpuvm::isa::DecodeKernel(kernel.image);
      if (decoded.ok()) printf("%s\n", gpuvm::isa::DisassembleKernel(*decoded).c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}
