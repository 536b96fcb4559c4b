// ModuleLayout (module_layout.h): globals, relocations and the constant image of a module.
#include "ptx/translator/module_layout.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "gpu/isa/device_printf.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

Status ModuleLayout::Build(const Module& m) {
  global_slot.assign(m.globals.size(), -1);
  const_offset.assign(m.globals.size(), -1);
  for (size_t i = 0; i < m.globals.size(); ++i) {
    const Variable& v = m.globals[i];
    if (v.space == StateSpace::kGlobal) {
      global_slot[i] = static_cast<int64_t>(out.globals.size());
      isa::ModuleGlobal g;
      g.name = v.name;
      g.size = std::max<uint64_t>(v.SizeBytes(), 1);
      g.align = std::max<uint32_t>(v.Alignment(), 1);
      g.init = v.init;
      out.globals.push_back(std::move(g));
    } else if (v.space == StateSpace::kConst) {
      GPUVM_RETURN_IF_ERROR(PlaceConst(v, &const_offset[i]));
    }
  }
  // Relocations once every slot is known.
  for (size_t i = 0; i < m.globals.size(); ++i) {
    const Variable& v = m.globals[i];
    if (v.relocations.empty()) continue;
    if (v.space != StateSpace::kGlobal) {
      return Status::Unimplemented(
          "line " + std::to_string(v.line) + ": variable '" + v.name +
          "': address initializers are supported in .global variables only");
    }
    for (const Relocation& r : v.relocations) {
      if (r.is_function || r.index >= m.globals.size() || global_slot[r.index] < 0) {
        return Status::Unimplemented("line " + std::to_string(v.line) + ": variable '" + v.name +
                                     "': initializer takes the address of something other than a "
                                     ".global variable");
      }
      isa::ModuleRelocation rel;
      rel.offset = static_cast<uint32_t>(r.offset);
      rel.size = r.size;
      rel.target = static_cast<uint32_t>(global_slot[r.index]);
      rel.addend = r.addend;
      out.globals[global_slot[i]].relocations.push_back(rel);
    }
  }
  return Status::Ok();
}

uint32_t ModuleLayout::PrintfFifoSlot() {
  if (printf_fifo_slot_ < 0) {
    printf_fifo_slot_ = static_cast<int64_t>(out.globals.size());
    isa::ModuleGlobal g;
    g.name = std::string(isa::kPrintfFifoGlobal);
    g.size = 8;
    g.align = 8;
    out.globals.push_back(std::move(g));  // zero until the driver writes the FIFO's address
  }
  return static_cast<uint32_t>(printf_fifo_slot_);
}

Status ModuleLayout::PlaceConst(const Variable& v, int64_t* offset) {
  const uint64_t at = AlignUp(out.const_image.size(), std::max<uint32_t>(v.Alignment(), 1));
  const uint64_t size = v.SizeBytes();
  if (at + size > isa::kMaxConstImageBytes) {
    return Status::ResourceExhausted("line " + std::to_string(v.line) + ": variable '" + v.name +
                                     "': .const variables exceed the 64 KiB constant bank");
  }
  out.const_image.resize(at + size, 0);
  memcpy(out.const_image.data() + at, v.init.data(), std::min<size_t>(v.init.size(), size));
  *offset = static_cast<int64_t>(at);
  return Status::Ok();
}

}  // namespace gpuvm::ptx::translator
