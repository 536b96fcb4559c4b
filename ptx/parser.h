// The PTX front end's entry point: text in, a checked ptx::Module (ptx/ast.h) out, or a Status
// naming the line, the kernel and the instruction that is wrong or unsupported.
//
// The input is hostile (it comes from guests): the parser never crashes, never recurses deeper than
// a fixed bound, and refuses modules, names, register counts, instruction counts and initializers
// beyond ParseLimits. The caller passes its own private copy of the text (a guest must not be able
// to change it while it is parsed); the returned Module owns all of its data.
//
// Threading: ParseModule is a pure function; call it from any thread.
#ifndef GPUVM_PTX_PARSER_H_
#define GPUVM_PTX_PARSER_H_

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "ptx/ast.h"

namespace gpuvm::ptx {

struct ParseLimits {
  uint64_t max_module_bytes = 8u << 20;  // whole text
  uint32_t max_identifier_length = 1024;
  uint32_t max_registers_per_function = 1u << 18;
  uint64_t max_registers_per_module = 1u << 20;
  uint32_t max_instructions = 1u << 19;        // whole module
  uint32_t max_block_nesting = 32;             // `{ { ... } }` inside a function body
  uint32_t max_operands = 64;                  // incl. call arguments
  uint64_t max_variable_bytes = 1ull << 32;    // any one variable's declared size
  uint64_t max_initializer_bytes = 16u << 20;  // all initializer images of the module together
  uint32_t max_functions = 1u << 14;
  uint32_t max_variables = 1u << 18;  // module + all functions' locals and params
};

// Parses and checks one PTX module.
// Errors: kInvalidArgument (malformed text, undeclared/duplicate names, type mismatches, wrong
// operands), kUnimplemented (valid PTX outside the supported subset, docs/PTX.md),
// kResourceExhausted (a ParseLimits bound). Messages read "line N: in kernel 'k': instruction
// 'add.s32': expected 3 operands, got 2".
Result<Module> ParseModule(std::string_view text, const ParseLimits& limits = ParseLimits());

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_PARSER_H_
