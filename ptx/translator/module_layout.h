// The module-wide memory layout the translator builds before it lowers any kernel: a slot in
// isa::Module::globals for every .global variable (its address reaches kernels through constant
// bank 2), the relocations of address initializers, and the constant image (bank 1) with every
// .const variable — module scope here, function scope as kernels find them (PlaceConst) — and the
// hidden printf FIFO global when a kernel calls vprintf.
//
// Threading: one per Translate call.
#ifndef GPUVM_PTX_TRANSLATOR_MODULE_LAYOUT_H_
#define GPUVM_PTX_TRANSLATOR_MODULE_LAYOUT_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gpu/isa/module.h"
#include "ptx/ast.h"

namespace gpuvm::ptx::translator {

struct ModuleLayout {
  // Per Module::globals index: the slot in isa::Module::globals, or -1.
  std::vector<int64_t> global_slot;
  // Per Module::globals index: the offset in bank 1, or -1.
  std::vector<int64_t> const_offset;
  // (function, local) -> offset in bank 1 of a function-scope .const variable.
  std::map<std::pair<uint32_t, uint32_t>, int64_t> local_const_offset;
  isa::Module out;  // globals and the constant image; Translate adds the kernels

  // Lays out the module's globals and module-scope constants.
  Status Build(const Module& m);
  // Appends a .const variable (its initializer) to the constant image; its offset in *offset.
  Status PlaceConst(const Variable& v, int64_t* offset);
  // The slot of the hidden global holding the printf FIFO's address (gpu/isa/device_printf.h),
  // appended to the globals the first time a kernel calls vprintf: modules without printf carry
  // none, and the driver sets up a FIFO only for modules that have it.
  uint32_t PrintfFifoSlot();

 private:
  int64_t printf_fifo_slot_ = -1;
};

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_MODULE_LAYOUT_H_
