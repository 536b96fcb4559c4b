#include "runtime/core/jit.h"

#include <string>

#include "ptx/parser.h"
#include "runtime/core/jit_translate.h"

namespace gpuvm::runtime {
namespace {

constexpr uint64_t kMaxParamBytes = 4096;  // docs/ISA.md: bank 0 holds at most 4 KiB
constexpr uint64_t kMaxBankBytes = 65536;  // a constant bank

uint64_t AlignUp(uint64_t v, uint64_t a) { return a ? (v + a - 1) / a * a : v; }

}  // namespace

Result<CompiledModule> LayOutModule(const ptx::Module& module) {
  CompiledModule out;
  for (const ptx::Function& f : module.functions) {
    if (!f.is_entry || !f.has_body) continue;
    CompiledKernel k;
    k.name = f.name;
    uint64_t at = 0;
    for (const ptx::Variable& p : f.params) {
      uint64_t size = p.SizeBytes();
      uint64_t align = std::max<uint32_t>(p.Alignment(), 1);
      at = AlignUp(at, align);
      if (size == 0 || at + size > kMaxParamBytes) {
        return Status::Unimplemented("in kernel '" + f.name + "': parameter '" + p.name +
                                     "' does not fit the 4 KiB parameter bank");
      }
      k.params.push_back({uint32_t(at), uint32_t(size)});
      at += size;
    }
    k.param_bytes = uint32_t(at);
    out.kernels.push_back(std::move(k));
  }
  uint64_t const_at = 0, address_at = 0;
  for (const ptx::Variable& v : module.globals) {
    if (v.space != ptx::StateSpace::kGlobal && v.space != ptx::StateSpace::kConst) continue;
    if (v.linkage == ptx::Linkage::kExtern) {
      return Status::Unimplemented("line " + std::to_string(v.line) + ": extern variable '" +
                                   v.name + "' (separate compilation is not supported)");
    }
    ModuleVariable mv;
    mv.name = v.name;
    mv.size = v.SizeBytes();
    mv.align = std::max<uint32_t>(v.Alignment(), 1);
    mv.init = v.init;
    if (mv.size == 0) {
      return Status::Unimplemented("line " + std::to_string(v.line) + ": variable '" + v.name +
                                   "' has no size");
    }
    for (const ptx::Relocation& r : v.relocations) {
      if (r.is_function) {
        return Status::Unimplemented("line " + std::to_string(v.line) + ": variable '" + v.name +
                                     "' is initialized with a function address");
      }
      if (r.generic == false && module.globals[r.index].space != ptx::StateSpace::kGlobal) {
        return Status::Unimplemented("line " + std::to_string(v.line) + ": variable '" + v.name +
                                     "' holds the address of a non-global variable");
      }
      // Targets are numbered among all module globals; remapped to variables below.
      mv.relocations.push_back({r.offset, r.size, r.index, r.addend});
    }
    if (v.space == ptx::StateSpace::kConst) {
      mv.space = ModuleVariable::Space::kConst;
      const_at = AlignUp(const_at, mv.align);
      if (const_at + mv.size > kMaxBankBytes) {
        return Status::Unimplemented("module constants exceed the 64 KiB constant bank");
      }
      mv.bank_offset = uint32_t(const_at);
      const_at += mv.size;
    } else {
      mv.space = ModuleVariable::Space::kGlobal;
      if (address_at + 8 > kMaxBankBytes) return Status::Unimplemented("too many global variables");
      mv.bank_offset = uint32_t(address_at);
      address_at += 8;
    }
    out.variables.push_back(std::move(mv));
  }
  // Relocation targets: module.globals index -> variables index.
  for (ModuleVariable& mv : out.variables) {
    for (VariableRelocation& r : mv.relocations) {
      const std::string& target = module.globals[r.target].name;
      bool found = false;
      for (size_t i = 0; i < out.variables.size(); ++i) {
        if (out.variables[i].name == target) {
          r.target = uint32_t(i);
          found = true;
          break;
        }
      }
      if (!found) {
        return Status::Unimplemented("variable '" + mv.name + "' holds the address of '" + target +
                                     "', which is not a global or constant variable");
      }
      if ((r.size != 4 && r.size != 8) || r.offset > mv.size || r.size > mv.size - r.offset) {
        return Status::InvalidArgument("variable '" + mv.name + "' has a relocation out of range");
      }
    }
  }
  out.const_bank_bytes = uint32_t(AlignUp(const_at, 4));
  out.address_bank_bytes = uint32_t(address_at);
  return out;
}

Result<CompiledModule> CompilePtx(std::string_view ptx_text) {
  GPUVM_ASSIGN_OR_RETURN(ptx::Module module, ptx::ParseModule(ptx_text));
  GPUVM_ASSIGN_OR_RETURN(CompiledModule out, LayOutModule(module));
  if (out.kernels.empty() && out.variables.empty()) {
    return Status::InvalidArgument("the PTX module has no kernels");
  }
  GPUVM_RETURN_IF_ERROR(TranslateKernels(module, &out));
  return out;
}

bool HaveTranslator() { return TranslatorAvailable(); }

}  // namespace gpuvm::runtime
