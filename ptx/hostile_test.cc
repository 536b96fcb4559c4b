// The parser under hostile input: limits hold, errors are clean, nothing crashes or recurses
// without bound.
#include <gtest/gtest.h>

#include <string>

#include "ptx/parser.h"

namespace gpuvm::ptx {
namespace {

constexpr std::string_view kHeader = ".version 9.0\n.target sm_75\n.address_size 64\n";

StatusCode CodeOf(const std::string& text, const ParseLimits& limits = ParseLimits()) {
  return ParseModule(text, limits).status().code();
}

TEST(PtxHostileTest, ModuleSizeLimit) {
  ParseLimits limits;
  limits.max_module_bytes = 100;
  EXPECT_EQ(CodeOf(std::string(kHeader) + std::string(200, ' '), limits),
            StatusCode::kResourceExhausted);
}

TEST(PtxHostileTest, RegisterLimits) {
  std::string text = std::string(kHeader) + ".entry k()\n{\n.reg .b32 %r<4000000000>;\nret;\n}\n";
  EXPECT_EQ(CodeOf(text), StatusCode::kResourceExhausted);
  ParseLimits limits;
  limits.max_registers_per_module = 100;
  std::string many = std::string(kHeader);
  for (int i = 0; i < 3; ++i)
    many += ".func f" + std::to_string(i) + "()\n{\n.reg .b32 %r<40>;\n}\n";
  EXPECT_EQ(CodeOf(many, limits), StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".entry k()\n{\n.reg .b32 %r<99999999999>;\n}\n"),
            StatusCode::kInvalidArgument);  // does not fit 32 bits
}

TEST(PtxHostileTest, NestingLimit) {
  std::string text = std::string(kHeader) + ".entry k()\n{\n";
  text += std::string(100000, '{');
  EXPECT_EQ(CodeOf(text), StatusCode::kResourceExhausted);
  // Deeply nested initializer braces and unbalanced section braces end cleanly too.
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".global .u32 x[4] = " + std::string(50000, '{')),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".section .debug { " + std::string(50000, '{')),
            StatusCode::kInvalidArgument);
}

TEST(PtxHostileTest, InstructionAndOperandLimits) {
  ParseLimits limits;
  limits.max_instructions = 10;
  std::string text = std::string(kHeader) + ".entry k()\n{\n";
  for (int i = 0; i < 20; ++i) text += "ret;\n";
  text += "}\n";
  EXPECT_EQ(CodeOf(text, limits), StatusCode::kResourceExhausted);
  std::string operands = std::string(kHeader) + ".entry k()\n{\n.reg .b32 %r;\nadd.s32 %r";
  for (int i = 0; i < 200; ++i) operands += ", %r";
  operands += ";\n}\n";
  EXPECT_NE(ParseModule(operands).status().message().find("too many operands"), std::string::npos);
}

TEST(PtxHostileTest, LongNamesAndHugeValues) {
  std::string name(5000, 'a');
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".global .u32 " + name + ";"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".global .u32 x[4294967296][4294967296];"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".global .align 1099511627776 .u32 x;"),
            StatusCode::kInvalidArgument);
  ParseLimits limits;
  limits.max_initializer_bytes = 16;
  EXPECT_EQ(CodeOf(std::string(kHeader) + ".global .u32 x[8] = {1,2,3,4,5};", limits),
            StatusCode::kResourceExhausted);
}

TEST(PtxHostileTest, GarbageIsRejectedCleanly) {
  const std::string inputs[] = {
      std::string("\0\0\0\0", 4),
      "\xff\xfe\xfd",
      std::string(kHeader) + ".entry",
      std::string(kHeader) + ".entry k(",
      std::string(kHeader) + ".entry k() {",
      std::string(kHeader) + ".entry k() { add",
      std::string(kHeader) + ".entry k() { add.s32",
      std::string(kHeader) + ".entry k() { .reg .b32 %r<",
      std::string(kHeader) + ".entry k() { @",
      std::string(kHeader) + ".entry k() { $L: $L",
      std::string(kHeader) + ".entry k() { ld.global.u32 %r1, [",
      std::string(kHeader) + ".entry k() { .reg .b32 %r; mov.b64 %r, {%r, %r, %r, %r, %r};}",
      std::string(kHeader) + ".global .u32 x = {",
      std::string(kHeader) + ".func (.param .b32 r) f(.param .b32 a) { call (r), f, (a, ",
      std::string(kHeader) + "}}}}",
      std::string(kHeader) + ".",
      std::string(kHeader) + "0x",
      std::string(kHeader) + "\"",
      ".version 9",
      ".version 9.0.0",
      ".version 9.0\n.target",
      ".version 9.0\n.target sm_",
      ".version 9.0\n.target sm_99999999999",
      ".version 9.0\n",                 // no .target
      ".version 9.0\n.target sm_75\n",  // no .address_size 64
  };
  for (const std::string& input : inputs) {
    auto result = ParseModule(input);
    EXPECT_FALSE(result.ok()) << input;
    EXPECT_FALSE(result.status().message().empty());
  }
}

}  // namespace
}  // namespace gpuvm::ptx
