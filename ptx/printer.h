// Prints a ptx::Module (or one instruction) back as PTX text. Used for diagnostics — the translator
// can quote the instruction it rejects — and by the tests, which check that print(parse(x)) parses
// back to the same module.
//
// The printed module is equivalent, not identical, to the source: declarations are hoisted to the
// top of each function (so names that nested `{ }` blocks reused get a `$N` suffix to stay unique),
// prototypes come first, comments and debug directives are gone, and immediates are printed in
// decimal or as 0f/0d bit patterns.
//
// Threading: pure functions.
#ifndef GPUVM_PTX_PRINTER_H_
#define GPUVM_PTX_PRINTER_H_

#include <string>

#include "ptx/ast.h"

namespace gpuvm::ptx {

std::string PrintModule(const Module& module);

// One instruction with its operands, using the registers' declared names: "@!%p1 bra $L__BB0_2;".
std::string PrintInstruction(const Module& module, const Function& function,
                             const Instruction& inst);

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_PRINTER_H_
