#include "runtime/core/jit.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/align.h"
#include "ptx/parser.h"
#include "runtime/core/jit_translate.h"

namespace gpuvm::runtime {
namespace {

constexpr uint64_t kMaxParamBytes = 4096;  // docs/ISA.md: bank 0 holds at most 4 KiB
constexpr uint64_t kMaxBankBytes = 65536;  // a constant bank

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
      at = AlignUp(at, std::max<uint32_t>(p.Alignment(), 1));
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
  uint64_t const_at = 0;
  for (const ptx::Variable& v : module.globals) {
    if (v.space != ptx::StateSpace::kConst) continue;
    ModuleVariable mv;
    mv.name = v.name;
    mv.space = ModuleVariable::Space::kConst;
    mv.size = v.SizeBytes();
    mv.align = std::max<uint32_t>(v.Alignment(), 1);
    mv.init = v.init;
    const_at = AlignUp(const_at, mv.align);
    if (const_at + mv.size > kMaxBankBytes) {
      return Status::Unimplemented("module constants exceed the 64 KiB constant bank");
    }
    mv.bank_offset = uint32_t(const_at);
    const_at += mv.size;
    out.variables.push_back(std::move(mv));
  }
  return out;
}

Status MergeLayout(const CompiledModule& layout, CompiledModule* compiled) {
  for (const CompiledKernel& ours : layout.kernels) {
    auto it = std::find_if(compiled->kernels.begin(), compiled->kernels.end(),
                           [&](const CompiledKernel& k) { return k.name == ours.name; });
    if (it == compiled->kernels.end()) {
      return Status::Internal("the translator produced no kernel '" + ours.name + "'");
    }
    bool same = it->params.size() == ours.params.size();
    for (size_t i = 0; same && i < ours.params.size(); ++i) {
      same = it->params[i].offset == ours.params[i].offset &&
             it->params[i].size == ours.params[i].size;
    }
    if (!same) {
      return Status::Internal("kernel '" + ours.name +
                              "': the translator's parameter layout differs from the runtime's");
    }
  }
  for (const ModuleVariable& v : layout.variables) {
    if (v.bank_offset + v.size > compiled->const_image.size()) {
      return Status::Internal("constant '" + v.name +
                              "' lies outside the translator's const image");
    }
    size_t n = std::min<uint64_t>(v.init.size(), v.size);
    if (n && std::memcmp(compiled->const_image.data() + v.bank_offset, v.init.data(), n) != 0) {
      return Status::Internal("constant '" + v.name +
                              "': the translator placed it elsewhere than the runtime expects");
    }
    compiled->variables.push_back(v);
  }
  return Status::Ok();
}

Result<CompiledModule> CompilePtx(std::string_view ptx_text) {
  GPUVM_ASSIGN_OR_RETURN(ptx::Module module, ptx::ParseModule(ptx_text));
  GPUVM_ASSIGN_OR_RETURN(CompiledModule layout, LayOutModule(module));
  if (layout.kernels.empty()) return Status::InvalidArgument("the PTX module has no kernels");
  GPUVM_ASSIGN_OR_RETURN(isa::Module image, TranslateToIsa(module));
  GPUVM_ASSIGN_OR_RETURN(CompiledModule compiled, FromIsaModule(image));
  GPUVM_RETURN_IF_ERROR(MergeLayout(layout, &compiled));
  // The translator's image has no notion of managed variables: mark them by name.
  for (const ptx::Variable& v : module.globals) {
    if (!v.managed) continue;
    auto it = std::find_if(compiled.variables.begin(), compiled.variables.end(),
                           [&](const ModuleVariable& mv) {
                             return mv.name == v.name && mv.space == ModuleVariable::Space::kGlobal;
                           });
    if (it == compiled.variables.end()) {
      return Status::Internal("managed variable '" + v.name + "' is not in the translated module");
    }
    it->managed = true;
  }
  return compiled;
}

bool HaveTranslator() { return TranslatorAvailable(); }

}  // namespace gpuvm::runtime
