#include "runtime/core/module_image.h"

#include <cstring>
#include <set>

namespace gpuvm::runtime {

Result<CompiledModule> FromIsaModule(const isa::Module& module) {
  CompiledModule out;
  std::set<std::string> names;
  for (const isa::ModuleKernel& k : module.kernels) {
    if (!names.insert(k.name).second) {
      return Status::InvalidArgument("module image has kernel '" + k.name + "' twice");
    }
    CompiledKernel ck;
    ck.name = k.name;
    ck.image = k.image;
    for (const isa::ModuleParam& p : k.params) {
      ck.params.push_back({p.offset, p.size});
      ck.param_bytes = std::max(ck.param_bytes, p.offset + p.size);
    }
    out.kernels.push_back(std::move(ck));
  }
  for (size_t i = 0; i < module.globals.size(); ++i) {
    const isa::ModuleGlobal& g = module.globals[i];
    ModuleVariable v;
    v.name = g.name;
    v.space = ModuleVariable::Space::kGlobal;
    v.size = g.size;
    v.align = std::max<uint32_t>(g.align, 1);
    v.init = g.init;
    if (v.size == 0 || v.init.size() > v.size) {
      return Status::InvalidArgument("module image global '" + g.name + "' has a bad size");
    }
    for (const isa::ModuleRelocation& r : g.relocations) {
      if ((r.size != 4 && r.size != 8) || r.offset > v.size || r.size > v.size - r.offset ||
          r.target >= module.globals.size()) {
        return Status::InvalidArgument("module image global '" + g.name + "' has a bad relocation");
      }
      v.relocations.push_back({r.offset, r.size, r.target, r.addend});
    }
    v.bank_offset = uint32_t(8 * i);
    out.variables.push_back(std::move(v));
  }
  if (module.globals.size() > isa::kMaxModuleGlobals) {
    return Status::InvalidArgument("module image has too many globals");
  }
  out.address_bank_bytes = uint32_t(8 * module.globals.size());
  out.const_image = module.const_image;
  return out;
}

Result<uint64_t> NativeModuleSize(std::span<const uint8_t> header) {
  if (header.size() < 12) return Status::InvalidArgument("module image header is truncated");
  uint32_t magic, total;
  std::memcpy(&magic, header.data(), 4);
  std::memcpy(&total, header.data() + 8, 4);
  if (magic != isa::kModuleMagic) return Status::InvalidArgument("not a GVISA module image");
  if (total < isa::kModuleHeaderBytes || total > (256u << 20)) {
    return Status::InvalidArgument("module image claims an implausible size " +
                                   std::to_string(total));
  }
  return uint64_t(total);
}

}  // namespace gpuvm::runtime
