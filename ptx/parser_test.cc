// Targeted tests of the PTX front end: one construct at a time, then the errors it must report.
#include "ptx/parser.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>

#include "ptx/instruction_set.h"
#include "ptx/printer.h"

namespace gpuvm::ptx {
namespace {

constexpr std::string_view kHeader = ".version 9.0\n.target sm_75\n.address_size 64\n";

Module Parse(std::string_view body) {
  std::string text = std::string(kHeader) + std::string(body);
  auto module = ParseModule(text);
  EXPECT_TRUE(module.ok()) << module.status().ToString() << "\n" << text;
  if (!module.ok()) return Module();
  return std::move(module).value();
}

Status ParseError(std::string_view body) {
  std::string text = std::string(kHeader) + std::string(body);
  auto module = ParseModule(text);
  EXPECT_FALSE(module.ok()) << "parsed:\n" << text;
  return module.ok() ? Status::Ok() : module.status();
}

// A kernel with the given declarations and body lines.
std::string Kernel(std::string_view body, std::string_view params = "") {
  return ".visible .entry k(" + std::string(params) + ")\n{\n" + std::string(body) + "\n}\n";
}

// The single instruction of a kernel whose body is `regs` then `inst`.
Instruction One(std::string_view inst, std::string_view regs =
                                           ".reg .pred %p<4>; .reg .b16 %rs<4>; .reg .b32 %r<8>; "
                                           ".reg .f32 %f<8>; .reg .b64 %rd<8>; .reg .f64 %fd<8>;") {
  Module m = Parse(Kernel(std::string(regs) + "\n" + std::string(inst)));
  if (m.functions.empty() || m.functions[0].body.empty()) {
    ADD_FAILURE() << "no instruction in: " << inst;
    return Instruction();
  }
  return m.functions[0].body.back();
}

std::string ErrorOf(std::string_view inst) {
  Status s =
      ParseError(Kernel(".reg .pred %p<4>; .reg .b16 %rs<4>; .reg .b32 %r<8>; "
                        ".reg .f32 %f<8>; .reg .b64 %rd<8>; .reg .f64 %fd<8>;\n" +
                        std::string(inst)));
  return s.message();
}

// ------------------------------------------------------------------------------------------------
// Module structure

TEST(PtxParserTest, HeaderFields) {
  Module m = Parse("");
  EXPECT_EQ(m.version_major, 9u);
  EXPECT_EQ(m.version_minor, 0u);
  EXPECT_EQ(m.target, "sm_75");
  EXPECT_EQ(m.sm_version, 75u);
  EXPECT_EQ(m.address_size, 64u);
  auto newer = ParseModule(".version 8.5\n.target sm_90a, debug\n.address_size 64\n");
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  EXPECT_EQ(newer->sm_version, 90u);
}

TEST(PtxParserTest, HeaderErrors) {
  EXPECT_EQ(ParseModule(".target sm_75\n").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseModule(".version 9.0\n.target sm_75\n.global .u32 x;").status().code(),
            StatusCode::kUnimplemented);  // no .address_size 64: 32-bit
  EXPECT_EQ(ParseModule(".version 9.0\n.target sm_75\n.address_size 32\n").status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(ParseModule(".version 10.0\n.target sm_75\n.address_size 64\n").status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(ParseModule(".version 9.0\n.target sm_75, map_f64_to_f32\n.address_size 64\n")
                .status()
                .code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(ParseModule(".version 9.0\n.version 9.0\n").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseModule("").status().code(), StatusCode::kInvalidArgument);
}

TEST(PtxParserTest, CommentsAndDebugDirectivesAreSkipped) {
  Module m = Parse(
      "// line comment\n/* block\n comment */\n.file 1 \"/tmp/a.cu\", 1700000000, 1234\n"
      ".section .debug_abbrev { .b8 17, 1, 37; }\n"
      ".visible .entry k()\n{\n.loc 1 5 3\n.pragma \"nounroll\";\n"
      "  .loc 1 6 7, function_name $L__info_string0, inlined_at 1 10 5\n ret; // done\n}\n");
  ASSERT_EQ(m.functions.size(), 1u);
  ASSERT_EQ(m.functions[0].body.size(), 1u);
  EXPECT_EQ(m.functions[0].body[0].opcode, Opcode::kRet);
  EXPECT_EQ(m.functions[0].body[0].line, 14u);  // lines count from the start of the text
}

TEST(PtxParserTest, GlobalsWithInitializers) {
  Module m = Parse(
      ".global .align 4 .b8 bytes[8] = {1, 2, 255, 0, 7};\n"
      ".const .align 4 .f32 scale[2] = {0f3F800000, 2.5};\n"
      ".global .s32 neg = -5;\n"
      ".global .u32 counts[] = {1, 2, 3};\n"
      ".global .align 8 .u64 ptrs[2] = {bytes, generic(counts)+4};\n"
      ".extern .shared .align 16 .b8 dyn[];\n"
      ".shared .align 4 .b8 tile[4][16];\n"
      ".global .u16 rows[][3] = {{1, 2, 3}, {4}};\n"
      ".global .u32 padded[2][3] = {{1}, {2, 3}};\n"
      ".global .v2 .f32 pairs[2] = {{0f3F800000}, {1.5, 2.5}};\n");
  ASSERT_EQ(m.globals.size(), 10u);
  const Variable& bytes = m.globals[0];
  EXPECT_EQ(bytes.space, StateSpace::kGlobal);
  EXPECT_EQ(bytes.SizeBytes(), 8u);
  EXPECT_EQ(bytes.Alignment(), 4u);
  EXPECT_EQ(bytes.init, (std::vector<uint8_t>{1, 2, 255, 0, 7}));  // a prefix; the rest is zero
  const Variable& scale = m.globals[1];
  ASSERT_EQ(scale.init.size(), 8u);
  float f[2];
  std::memcpy(f, scale.init.data(), 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 2.5f);
  EXPECT_EQ(m.globals[2].init, (std::vector<uint8_t>{0xfb, 0xff, 0xff, 0xff}));
  EXPECT_EQ(m.globals[3].elements, 3u);  // size from the initializer
  EXPECT_EQ(m.globals[3].init.size(), 12u);
  const Variable& ptrs = m.globals[4];
  ASSERT_EQ(ptrs.relocations.size(), 2u);
  EXPECT_EQ(ptrs.relocations[0].offset, 0u);
  EXPECT_EQ(ptrs.relocations[0].index, 0u);
  EXPECT_FALSE(ptrs.relocations[0].generic);
  EXPECT_EQ(ptrs.relocations[1].offset, 8u);
  EXPECT_EQ(ptrs.relocations[1].index, 3u);
  EXPECT_TRUE(ptrs.relocations[1].generic);
  EXPECT_EQ(ptrs.relocations[1].addend, 4);
  const Variable& dyn = m.globals[5];
  EXPECT_EQ(dyn.linkage, Linkage::kExtern);
  EXPECT_TRUE(dyn.unsized);
  EXPECT_EQ(dyn.SizeBytes(), 0u);
  EXPECT_EQ(m.globals[6].SizeBytes(), 64u);
  EXPECT_EQ(m.globals[6].dims, (std::vector<uint64_t>{4, 16}));
  EXPECT_EQ(m.FindGlobal("tile"), 6);
  // Nested braces are rows; short rows are zero-filled.
  EXPECT_EQ(m.globals[7].dims, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(m.globals[7].SizeBytes(), 12u);
  EXPECT_EQ(m.globals[7].init, (std::vector<uint8_t>{1, 0, 2, 0, 3, 0, 4, 0, 0, 0, 0, 0}));
  std::vector<uint32_t> padded(6);
  ASSERT_EQ(m.globals[8].init.size(), 24u);
  std::memcpy(padded.data(), m.globals[8].init.data(), 24);
  EXPECT_EQ(padded, (std::vector<uint32_t>{1, 0, 0, 2, 3, 0}));
  std::vector<float> pairs(4);
  ASSERT_EQ(m.globals[9].init.size(), 16u);
  std::memcpy(pairs.data(), m.globals[9].init.data(), 16);
  EXPECT_EQ(pairs, (std::vector<float>{1.0f, 0.0f, 1.5f, 2.5f}));
}

TEST(PtxParserTest, VariableErrors) {
  EXPECT_NE(ParseError(".global .u8 x[2] = {1, 2, 3};").message().find("too many initializers"),
            std::string::npos);
  EXPECT_NE(ParseError(".global .u8 x = 256;").message().find("does not fit"), std::string::npos);
  EXPECT_NE(ParseError(".global .u8 x[2][2] = {{1, 2, 3}};").message().find("in a brace"),
            std::string::npos);
  EXPECT_NE(ParseError(".global .u8 x[2] = {{1}};").message().find("nested deeper"),
            std::string::npos);
  EXPECT_NE(ParseError(".shared .u32 x = 1;").message().find("cannot have initializers"),
            std::string::npos);
  EXPECT_NE(ParseError(".global .u32 x[];").message().find("needs a size"), std::string::npos);
  EXPECT_NE(ParseError(".global .u32 x; .global .u32 x;").message().find("duplicate name 'x'"),
            std::string::npos);
  EXPECT_NE(ParseError(".global .align 3 .u32 x;").message().find("power of two"),
            std::string::npos);
  EXPECT_NE(ParseError(".global .u64 p = nowhere;").message().find("undeclared name 'nowhere'"),
            std::string::npos);
  EXPECT_EQ(ParseError(".extern .global .u32 x;").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ParseError(".global .texref t;").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseError(".tex .u64 t;").code(), StatusCode::kUnimplemented);
}

TEST(PtxParserTest, ManagedVariables) {
  // nvcc's form of `__device__ __managed__ int counter = 5;`.
  Module m = Parse(
      ".global .attribute(.managed) .align 4 .u32 counter = 5;\n"
      ".global .attribute(.managed) .align 4 .b8 table[16];\n.global .u32 plain;\n");
  ASSERT_EQ(m.globals.size(), 3u);
  EXPECT_TRUE(m.globals[0].managed);
  EXPECT_EQ(m.globals[0].align, 4u);
  EXPECT_EQ(m.globals[0].init, (std::vector<uint8_t>{5, 0, 0, 0}));
  EXPECT_TRUE(m.globals[1].managed);
  EXPECT_EQ(m.globals[1].SizeBytes(), 16u);
  EXPECT_FALSE(m.globals[2].managed);
  EXPECT_NE(ParseError(".shared .attribute(.managed) .u32 x;").message().find(".global variables"),
            std::string::npos);
  EXPECT_EQ(ParseError(".global .attribute(.unified(1, 2)) .u32 x;").code(),
            StatusCode::kUnimplemented);
  EXPECT_FALSE(ParseModule(std::string(kHeader) + ".global .attribute .u32 x;").ok());
  EXPECT_FALSE(ParseModule(std::string(kHeader) + ".global .attribute(.managed .u32 x;").ok());
}

TEST(PtxParserTest, KernelParametersAndPerformanceDirectives) {
  Module m = Parse(
      ".visible .entry k(\n .param .u64 .ptr .global .align 16 k_p0,\n"
      " .param .align 8 .b8 k_p1[24],\n .param .f32 k_p2\n)\n"
      ".maxntid 256, 1, 1\n.minnctapersm 2\n.reqntid 128\n{\n ret;\n}\n");
  ASSERT_EQ(m.functions.size(), 1u);
  const Function& f = m.functions[0];
  EXPECT_TRUE(f.is_entry);
  EXPECT_EQ(f.linkage, Linkage::kVisible);
  ASSERT_EQ(f.params.size(), 3u);
  EXPECT_EQ(f.params[0].ptr_space, StateSpace::kGlobal);
  EXPECT_EQ(f.params[0].ptr_align, 16u);
  EXPECT_EQ(f.params[0].SizeBytes(), 8u);
  EXPECT_EQ(f.params[1].SizeBytes(), 24u);
  EXPECT_EQ(f.params[1].Alignment(), 8u);
  EXPECT_EQ(f.params[2].type, ScalarType::kF32);
  EXPECT_EQ(f.maxntid, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(f.reqntid, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(f.minnctapersm, 2u);
}

TEST(PtxParserTest, RegisterRangesAndScopes) {
  Module m = Parse(Kernel(
      ".reg .pred %p<3>;\n.reg .b32 %r<5>, %extra;\n.reg .b64 %SP;\n"
      "mov.u32 %r4, %extra;\n"
      "{\n .reg .pred %p1;\n .reg .b32 temp;\n setp.ne.u32 %p1, %r4, 0;\n mov.u32 temp, %r0;\n}\n"
      "@%p1 bra $L_end;\n$L_end:\nret;"));
  const Function& f = m.functions[0];
  // %p0-2, %r0-4, %extra, %SP, then the block's %p1 and temp.
  ASSERT_EQ(f.registers.size(), 3u + 5u + 1u + 1u + 2u);
  EXPECT_EQ(f.registers[0].name, "%p0");
  EXPECT_EQ(f.registers[7].name, "%r4");
  EXPECT_EQ(f.registers[7].type, ScalarType::kB32);
  const RegId inner_p1 = 10;
  EXPECT_EQ(f.registers[inner_p1].name, "%p1");
  ASSERT_EQ(f.body.size(), 5u);
  EXPECT_EQ(f.body[0].operands[1].reg, 8u);        // %extra
  EXPECT_EQ(f.body[1].operands[0].reg, inner_p1);  // the block's own %p1
  EXPECT_EQ(f.body[2].operands[0].reg, 11u);       // temp
  EXPECT_EQ(f.body[3].guard.reg, 1u);              // the outer %p1 again
  EXPECT_FALSE(f.body[3].guard.negated);
}

TEST(PtxParserTest, ScopeErrors) {
  EXPECT_NE(ErrorOf("{ .reg .b32 %inner; }\nmov.u32 %inner, 1;").find("undeclared name '%inner'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(".reg .b32 %r1;").find("duplicate name '%r1'"), std::string::npos);
  EXPECT_NE(ErrorOf(".reg .b32 %r<2>;").find("duplicate register range"), std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %r8, 1;").find("undeclared name '%r8'"), std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %r01, 1;").find("undeclared name '%r01'"), std::string::npos);
  EXPECT_NE(ParseError(Kernel(".reg .b32 %q5;\n.reg .b32 %q<8>;")).message().find("redeclares %q5"),
            std::string::npos);
  EXPECT_NE(ParseError(Kernel(".reg .b32 %tid;")).message().find("special register"),
            std::string::npos);
  EXPECT_NE(ParseError(Kernel("{ { ret; }")).message().find("end of input"), std::string::npos);
}

TEST(PtxParserTest, LabelsResolveForwardAndBackward) {
  Module m = Parse(Kernel(
      ".reg .pred %p<2>;\n$top:\n@!%p1 bra $bottom;\nbra.uni $top;\n$bottom:\n$also_bottom:\n"
      "ret;\n$end:"));
  const Function& f = m.functions[0];
  ASSERT_EQ(f.labels.size(), 4u);
  EXPECT_EQ(f.labels[0].name, "$top");
  EXPECT_EQ(f.labels[0].target, 0u);
  EXPECT_EQ(f.labels[1].name, "$bottom");
  EXPECT_EQ(f.labels[1].target, 2u);
  EXPECT_EQ(f.labels[2].target, 2u);
  EXPECT_EQ(f.labels[3].target, 3u);  // == body.size(): a label at the end
  EXPECT_TRUE(f.body[0].guard.negated);
  EXPECT_EQ(f.body[0].operands[0].kind, OperandKind::kLabel);
  EXPECT_EQ(f.body[0].operands[0].label, 1u);
  EXPECT_TRUE(f.body[1].Has(kFlagUni));
}

TEST(PtxParserTest, FunctionsCallsAndPrototypes) {
  Module m = Parse(
      ".func (.param .b32 r) twice(.param .b32 a);\n"
      ".visible .entry k(.param .u64 out)\n{\n"
      " .reg .b32 %r<3>;\n"
      " { .param .b32 param0; .param .b32 retval0;\n"
      "   st.param.b32 [param0+0], %r1;\n"
      "   call.uni (retval0), twice, (param0);\n"
      "   ld.param.b32 %r2, [retval0+0]; }\n"
      " ret;\n}\n"
      ".func (.param .b32 r) twice(.param .b32 x)\n{\n .reg .b32 %v;\n"
      " ld.param.b32 %v, [x];\n add.s32 %v, %v, %v;\n st.param.b32 [r], %v;\n ret;\n}\n");
  ASSERT_EQ(m.functions.size(), 2u);
  const Function& twice = m.functions[0];  // the prototype's slot holds the definition
  EXPECT_EQ(twice.name, "twice");
  EXPECT_TRUE(twice.has_body);
  EXPECT_FALSE(twice.is_entry);
  EXPECT_EQ(twice.params[0].name, "x");  // the definition's names
  ASSERT_EQ(twice.body.size(), 4u);
  EXPECT_EQ(twice.body[2].operands[0].symbol.kind, Symbol::Kind::kReturn);
  const Function& k = m.functions[1];
  ASSERT_EQ(k.locals.size(), 2u);
  const Instruction& call = k.body[1];
  EXPECT_EQ(call.opcode, Opcode::kCall);
  EXPECT_EQ(call.callee, 0u);
  EXPECT_EQ(call.call_results, 1u);
  ASSERT_EQ(call.operands.size(), 2u);
  EXPECT_EQ(call.operands[0].symbol.kind, Symbol::Kind::kLocal);
  EXPECT_EQ(call.operands[0].symbol.index, 1u);  // retval0
  EXPECT_EQ(call.operands[1].symbol.index, 0u);  // param0
  EXPECT_EQ(k.body[0].operands[0].base, AddressBase::kSymbol);
}

// nvcc's device printf: a call of the extern vprintf (docs/JIT.md "Device printf"). Other
// undefined externs (malloc, free, anything) stay refused with the clear error.
TEST(PtxParserTest, VprintfIsAcceptedOtherExternsAreNot) {
  const std::string proto =
      ".extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, "
      ".param .b64 vprintf_param_1);\n";
  const std::string call =
      "{ .param .b64 param0; .param .b64 param1; .param .b32 retval0;\n"
      "call.uni (retval0), vprintf, (param0, param1);\n}";
  Module m = Parse(proto + Kernel(call));
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_FALSE(m.functions[0].has_body);
  EXPECT_EQ(m.functions[0].name, "vprintf");
  EXPECT_EQ(m.functions[1].body[0].callee, 0u);

  std::string other = proto + Kernel(call);
  for (size_t at; (at = other.find("vprintf")) != std::string::npos;)
    other.replace(at, 7, "malloc_");
  Status s = ParseError(other);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("'malloc_', which is declared but not defined"), std::string::npos)
      << s.ToString();
}

TEST(PtxParserTest, AssertFailIsAccepted) {
  const std::string proto =
      ".extern .func __assertfail(.param .b64 a, .param .b64 b, .param .b32 c, .param .b64 d, "
      ".param .b64 e);\n";
  Module m =
      Parse(proto + Kernel("{ .param .b64 p0; .param .b64 p1; .param .b32 p2; .param .b64 p3; "
                           ".param .b64 p4;\n"
                           "call.uni __assertfail, (p0, p1, p2, p3, p4);\n}"));
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_FALSE(m.functions[0].has_body);
}

TEST(PtxParserTest, CallErrors) {
  const std::string proto = ".func (.param .b32 r) f(.param .b32 a);\n";
  auto call = [&](std::string_view line) {
    return ParseError(
        proto + Kernel("{ .param .b32 p0; .param .b32 p1; .param .b64 wide; .param .b32 rv;\n" +
                       std::string(line) + "\n}"));
  };
  Status undefined = call("call.uni (rv), f, (p0);");
  EXPECT_EQ(undefined.code(), StatusCode::kUnimplemented);
  EXPECT_NE(undefined.message().find("declared but not defined"), std::string::npos);
  EXPECT_NE(undefined.message().find("kernel 'k'"), std::string::npos);
  EXPECT_NE(call("call.uni (rv), f, (p0, p1);").message().find("takes 1 argument"),
            std::string::npos);
  EXPECT_NE(call("call.uni f, (p0);").message().find("returns 1 value"), std::string::npos);
  EXPECT_NE(call("call.uni (rv), f, (wide);").message().find("does not match parameter"),
            std::string::npos);
  EXPECT_NE(call("call.uni (rv), nothing, (p0);").message().find("undeclared name 'nothing'"),
            std::string::npos);
  EXPECT_NE(ParseError(proto + ".func (.param .b64 r) f(.param .b32 a);")
                .message()
                .find("does not match its earlier declaration"),
            std::string::npos);
  EXPECT_NE(ParseError(Kernel("") + Kernel("")).message().find("defined twice"), std::string::npos);
  EXPECT_EQ(
      ParseError(Kernel(".reg .b64 %rd1; { .param .b32 rv; call.uni (rv), %rd1, (); }")).code(),
      StatusCode::kUnimplemented);
}

// ------------------------------------------------------------------------------------------------
// Operands

TEST(PtxParserTest, AddressForms) {
  Module m =
      Parse(".global .u32 g[4];\n" +
            Kernel(".reg .b32 %r<2>; .reg .b64 %rd<2>;\n"
                   "ld.global.u32 %r1, [%rd1];\nld.global.u32 %r1, [%rd1+16];\n"
                   "ld.global.u32 %r1, [%rd1+-4];\nld.global.u32 %r1, [%rd1-8];\n"
                   "ld.global.u32 %r1, [g+12];\nld.u32 %r1, [1024];\nld.shared.u32 %r1, [%r1];"));
  const auto& body = m.functions[0].body;
  ASSERT_EQ(body.size(), 7u);
  EXPECT_EQ(body[0].operands[1].base, AddressBase::kRegister);
  EXPECT_EQ(body[0].operands[1].offset, 0);
  EXPECT_EQ(body[1].operands[1].offset, 16);
  EXPECT_EQ(body[2].operands[1].offset, -4);
  EXPECT_EQ(body[3].operands[1].offset, -8);
  EXPECT_EQ(body[4].operands[1].base, AddressBase::kSymbol);
  EXPECT_EQ(body[4].operands[1].symbol.kind, Symbol::Kind::kGlobal);
  EXPECT_EQ(body[4].operands[1].offset, 12);
  EXPECT_EQ(body[5].operands[1].base, AddressBase::kNone);
  EXPECT_EQ(body[5].operands[1].offset, 1024);
  EXPECT_EQ(body[5].space, StateSpace::kNone);  // generic
  EXPECT_EQ(body[6].space, StateSpace::kShared);
}

TEST(PtxParserTest, Immediates) {
  auto imm = [](std::string_view inst, int operand = 2) { return One(inst).operands[operand]; };
  EXPECT_EQ(imm("add.s32 %r1, %r2, 0x10;").imm_bits, 16u);
  EXPECT_EQ(imm("add.s32 %r1, %r2, 017;").imm_bits, 15u);
  EXPECT_EQ(imm("add.s32 %r1, %r2, 0b101;").imm_bits, 5u);
  EXPECT_EQ(imm("add.s32 %r1, %r2, 7U;").imm_bits, 7u);
  EXPECT_EQ(imm("add.s32 %r1, %r2, -2147483648;").ImmAsInt(), -2147483648LL);
  EXPECT_EQ(imm("and.b32 %r1, %r2, 4294967295;").imm_bits, 4294967295u);
  EXPECT_EQ(imm("add.s64 %rd1, %rd2, -9223372036854775808;").ImmAsInt(), INT64_MIN);
  Operand f = imm("add.f32 %f1, %f2, 0f3F800000;");
  EXPECT_EQ(f.imm_kind, ImmKind::kF32);
  EXPECT_EQ(f.ImmAsFloat(), 1.0f);
  EXPECT_EQ(imm("add.f32 %f1, %f2, -0f3F800000;").ImmAsFloat(), -1.0f);
  Operand d = imm("add.f64 %fd1, %fd2, 0d4000000000000000;");
  EXPECT_EQ(d.imm_kind, ImmKind::kF64);
  EXPECT_EQ(d.ImmAsDouble(), 2.0);
  EXPECT_EQ(imm("mul.f64 %fd1, %fd2, 1.5e1;").ImmAsDouble(), 15.0);
  EXPECT_EQ(imm("mov.pred %p1, 1;", 1).imm_bits, 1u);
  EXPECT_EQ(imm("mov.pred %p1, -1;", 1).ImmAsInt(), -1);  // nvcc -G writes true as -1
}

TEST(PtxParserTest, SpecialRegisters) {
  Instruction i = One("mov.u32 %r1, %ctaid.y;");
  ASSERT_EQ(i.operands[1].kind, OperandKind::kSpecial);
  EXPECT_EQ(i.operands[1].sreg, SpecialRegister::kCtaid);
  EXPECT_EQ(i.operands[1].component, 1);
  EXPECT_EQ(One("mov.u32 %r1, %laneid;").operands[1].sreg, SpecialRegister::kLaneid);
  EXPECT_EQ(One("mov.u64 %rd1, %clock64;").operands[1].sreg, SpecialRegister::kClock64);
  EXPECT_EQ(One("mov.u64 %rd1, %globaltimer;").operands[1].sreg, SpecialRegister::kGlobaltimer);
  EXPECT_EQ(One("mov.u32 %r1, %lanemask_lt;").operands[1].sreg, SpecialRegister::kLanemaskLt);
  EXPECT_EQ(One("mov.u32 %r1, %clock_hi;").operands[1].sreg, SpecialRegister::kClockHi);
  EXPECT_EQ(One("mov.u32 %r1, %envreg31;").operands[1].sreg, SpecialRegister::kEnvreg31);
  EXPECT_EQ(One("mov.u64 %rd1, %pm3_64;").operands[1].sreg, SpecialRegister::kPm3_64);
  EXPECT_NE(ErrorOf("mov.u32 %r1, %pm3_64;").find("%pm3_64 is .u64"), std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %r1, %envreg32;").find("undeclared"), std::string::npos);
  // WARP_SZ is the integer 32 wherever a number may stand.
  Instruction w = One("add.u32 %r1, %r2, WARP_SZ;");
  ASSERT_EQ(w.operands[2].kind, OperandKind::kImmediate);
  EXPECT_EQ(w.operands[2].imm_bits, 32u);
  EXPECT_NE(ErrorOf("mov.u32 %r1, %tid;").find("needs a component"), std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %r1, %clock64;").find("%clock64 is .u64"), std::string::npos);
}

TEST(PtxParserTest, VectorsAndPairs) {
  Instruction ld = One("ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];");
  EXPECT_EQ(ld.vector, 4);
  EXPECT_TRUE(ld.Has(kFlagNc));
  ASSERT_EQ(ld.operands[0].kind, OperandKind::kVector);
  EXPECT_EQ(ld.operands[0].elements.size(), 4u);
  Instruction st = One("st.shared.v2.u32 [%r1], {%r2, %r3};");
  EXPECT_EQ(st.operands[1].elements.size(), 2u);
  Instruction sink = One("ld.global.v2.u32 {%r1, _}, [%rd1];");
  EXPECT_EQ(sink.operands[0].elements[1].kind, OperandKind::kSink);
  Instruction pack = One("mov.b64 %rd1, {%r1, %r2};");
  EXPECT_EQ(pack.operands[1].kind, OperandKind::kVector);
  Instruction unpack = One("mov.b32 {%rs1, %rs2}, %r1;");
  EXPECT_EQ(unpack.operands[0].elements.size(), 2u);
  Instruction shfl = One("shfl.sync.down.b32 %r1|%p1, %r2, 4, 31, -1;");
  EXPECT_EQ(shfl.operands[0].kind, OperandKind::kRegisterPair);
  EXPECT_EQ(shfl.shuffle, ShuffleMode::kDown);
  EXPECT_NE(ErrorOf("ld.global.v4.f32 {%f1, %f2}, [%rd1];").find("expected a vector of 4"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mov.b32 %r1, {%rs0, %rs1, %rs2, %rs3};").find("at least as wide"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mov.b64 %rd1, {%r1, %r2, %r3, %r4};").find("%r1 has type .b32, expected .b16"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mov.b64 %rd1, {%rs1, %rs2};").find("register %rs1 has type .b16"),
            std::string::npos);
  EXPECT_NE(ErrorOf("st.global.v2.u32 [%rd1], {%r1, _};").find("only valid in a destination"),
            std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 %r1|%p1, %r2, %r3;").find("register pair is not valid"),
            std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// Instructions: the modifiers decode into the right fields

TEST(PtxParserTest, ArithmeticModifiers) {
  Instruction mw = One("mul.wide.s32 %rd1, %r1, %r2;");
  EXPECT_EQ(mw.opcode, Opcode::kMul);
  EXPECT_EQ(mw.mul_mode, MulMode::kWide);
  EXPECT_EQ(mw.type, ScalarType::kS32);
  EXPECT_EQ(One("mad.wide.u32 %rd1, %r1, %r2, %rd3;").mul_mode, MulMode::kWide);
  EXPECT_EQ(One("mul.hi.u32 %r1, %r2, %r3;").mul_mode, MulMode::kHi);
  Instruction madcc = One("mad.lo.cc.u32 %r1, %r2, %r3, %r4;");
  EXPECT_TRUE(madcc.Has(kFlagCc));
  EXPECT_TRUE(One("addc.cc.u32 %r1, %r2, %r3;").Has(kFlagCc));
  Instruction fma = One("fma.rn.ftz.sat.f32 %f1, %f2, %f3, %f4;");
  EXPECT_EQ(fma.rounding, Rounding::kRn);
  EXPECT_TRUE(fma.Has(kFlagFtz));
  EXPECT_TRUE(fma.Has(kFlagSat));
  Instruction div = One("div.approx.ftz.f32 %f1, %f2, %f3;");
  EXPECT_TRUE(div.Has(kFlagApprox));
  EXPECT_TRUE(One("div.full.f32 %f1, %f2, %f3;").Has(kFlagFull));
  EXPECT_EQ(One("div.rn.f64 %fd1, %fd2, %fd3;").rounding, Rounding::kRn);
  EXPECT_TRUE(One("rcp.approx.ftz.f64 %fd1, %fd2;").Has(kFlagFtz));
  EXPECT_EQ(One("sqrt.rz.f32 %f1, %f2;").rounding, Rounding::kRz);
  EXPECT_TRUE(One("ex2.approx.ftz.f32 %f1, %f2;").Has(kFlagApprox));
  EXPECT_TRUE(One("max.NaN.f32 %f1, %f2, %f3;").Has(kFlagNaN));
  EXPECT_EQ(One("testp.notanumber.f64 %p1, %fd1;").test, TestProperty::kNotANumber);
  EXPECT_EQ(One("copysign.f32 %f1, %f2, %f3;").opcode, Opcode::kCopysign);
  EXPECT_EQ(One("abs.s64 %rd1, %rd2;").type, ScalarType::kS64);
  EXPECT_EQ(One("rem.u64 %rd1, %rd2, 7;").opcode, Opcode::kRem);
  EXPECT_EQ(One("tanh.approx.f32 %f1, %f2;").opcode, Opcode::kTanh);
}

TEST(PtxParserTest, BitAndCompareModifiers) {
  EXPECT_TRUE(One("bfind.shiftamt.u32 %r1, %r2;").Has(kFlagShiftAmt));
  Instruction shf = One("shf.r.clamp.b32 %r1, %r2, %r3, %r4;");
  EXPECT_TRUE(shf.Has(kFlagRight));
  EXPECT_TRUE(shf.Has(kFlagClamp));
  EXPECT_EQ(One("prmt.b32.f4e %r1, %r2, %r3, %r4;").permute, PermuteMode::kF4e);
  EXPECT_EQ(One("prmt.b32 %r1, %r2, %r3, 0x5410;").permute, PermuteMode::kNone);
  EXPECT_EQ(One("lop3.b32 %r1, %r2, %r3, %r4, 0x96;").operands[4].imm_bits, 0x96u);
  EXPECT_EQ(One("bfi.b64 %rd1, %rd2, %rd3, 32, 32;").operands.size(), 5u);
  EXPECT_EQ(One("dp4a.u32.s32 %r1, %r2, %r3, %r4;").type2, ScalarType::kS32);
  Instruction setp = One("setp.ltu.and.ftz.f32 %p1|%p2, %f1, %f2, !%p3;");
  EXPECT_EQ(setp.compare, CompareOp::kLtu);
  EXPECT_EQ(setp.bool_op, BoolOp::kAnd);
  EXPECT_TRUE(setp.operands[3].negated);
  EXPECT_EQ(One("setp.lo.u32 %p1, %r1, %r2;").compare, CompareOp::kLo);
  Instruction set = One("set.gt.u32.f32 %r1, %f1, %f2;");
  EXPECT_EQ(set.type, ScalarType::kU32);
  EXPECT_EQ(set.type2, ScalarType::kF32);
  EXPECT_EQ(One("selp.f32 %f1, 0f3F800000, %f2, %p1;").opcode, Opcode::kSelp);
  EXPECT_EQ(One("slct.f32.s32 %f1, %f2, %f3, %r1;").type2, ScalarType::kS32);
  EXPECT_EQ(One("not.pred %p1, %p2;").type, ScalarType::kPred);
  EXPECT_EQ(One("cnot.b32 %r1, %r2;").opcode, Opcode::kCnot);
}

TEST(PtxParserTest, ConversionModifiers) {
  Instruction cvt = One("cvt.rzi.s32.f32 %r1, %f1;");
  EXPECT_EQ(cvt.rounding, Rounding::kRzi);
  EXPECT_EQ(cvt.type, ScalarType::kS32);
  EXPECT_EQ(cvt.type2, ScalarType::kF32);
  EXPECT_EQ(One("cvt.rn.f32.f64 %f1, %fd1;").rounding, Rounding::kRn);
  EXPECT_EQ(One("cvt.rpi.f32.f32 %f1, %f2;").rounding, Rounding::kRpi);
  EXPECT_TRUE(One("cvt.sat.f32.f32 %f1, %f2;").Has(kFlagSat));
  EXPECT_EQ(One("cvt.f64.f32 %fd1, %f1;").rounding, Rounding::kNone);
  EXPECT_EQ(One("cvt.s32.s8 %r1, %r2;").type2, ScalarType::kS8);  // relaxed source width
  EXPECT_EQ(One("cvt.u16.u32 %rs1, %r1;").type, ScalarType::kU16);
  EXPECT_EQ(One("cvt.rn.f16.f32 %rs1, %f1;").type, ScalarType::kF16);
  EXPECT_EQ(One("cvt.f32.f16 %f1, %rs1;").type2, ScalarType::kF16);
  EXPECT_EQ(One("cvt.rm.f32.u64 %f1, %rd1;").rounding, Rounding::kRm);
  Instruction cvta = One("cvta.to.global.u64 %rd1, %rd2;");
  EXPECT_TRUE(cvta.Has(kFlagTo));
  EXPECT_EQ(cvta.space, StateSpace::kGlobal);
  EXPECT_FALSE(One("cvta.local.u64 %rd1, %rd2;").Has(kFlagTo));
}

TEST(PtxParserTest, MemoryModifiers) {
  Instruction ld = One("ld.volatile.shared.u32 %r1, [%r2];");
  EXPECT_EQ(ld.order, MemoryOrder::kVolatile);
  Instruction acq = One("ld.acquire.gpu.global.u64 %rd1, [%rd2];");
  EXPECT_EQ(acq.order, MemoryOrder::kAcquire);
  EXPECT_EQ(acq.scope, MemoryScope::kGpu);
  EXPECT_EQ(One("st.global.cs.f32 [%rd1], %f1;").cache, CacheOp::kCs);
  EXPECT_EQ(One("ld.global.ca.u32 %r1, [%rd1];").cache, CacheOp::kCa);
  EXPECT_TRUE(One("ld.global.nc.L1::no_allocate.v2.f32 {%f1, %f2}, [%rd1];").Has(kFlagCacheHint));
  EXPECT_EQ(One("ldu.global.u32 %r1, [%rd1];").opcode, Opcode::kLdu);
  EXPECT_EQ(One("ld.shared::cta.u32 %r1, [%r2];").space, StateSpace::kShared);
  EXPECT_EQ(One("ld.global.u8 %rs1, [%rd1];").type,
            ScalarType::kU8);  // narrower type, wider register
  EXPECT_EQ(One("st.local.b8 [%rd1], %r1;").type, ScalarType::kB8);
  EXPECT_TRUE(One("prefetch.global.L2 [%rd1];").Has(kFlagL2));
  EXPECT_EQ(One("isspacep.shared %p1, %rd1;").space, StateSpace::kShared);
  Instruction atom = One("atom.relaxed.gpu.global.cas.b64 %rd1, [%rd2], %rd3, %rd4;");
  EXPECT_EQ(atom.atomic_op, AtomicOp::kCas);
  EXPECT_EQ(atom.order, MemoryOrder::kRelaxed);
  EXPECT_EQ(atom.operands.size(), 4u);
  EXPECT_EQ(One("atom.shared.exch.b32 %r1, [%r2], %r3;").atomic_op, AtomicOp::kExch);
  EXPECT_EQ(One("atom.global.add.f64 %fd1, [%rd1], %fd2;").type, ScalarType::kF64);
  EXPECT_EQ(One("atom.inc.u32 %r1, [%rd1], 17;").space, StateSpace::kNone);
  Instruction red = One("red.shared.xor.b32 [%r1], %r2;");
  EXPECT_EQ(red.opcode, Opcode::kRed);
  EXPECT_EQ(red.atomic_op, AtomicOp::kXor);
}

TEST(PtxParserTest, SynchronizationAndWarpModifiers) {
  Instruction bar = One("bar.sync 0;");
  EXPECT_EQ(bar.opcode, Opcode::kBar);
  EXPECT_TRUE(bar.Has(kFlagSync));
  EXPECT_TRUE(bar.Has(kFlagAligned));  // bar.sync == barrier.sync.aligned
  Instruction barrier = One("barrier.sync 1, 64;");
  EXPECT_FALSE(barrier.Has(kFlagAligned));
  EXPECT_EQ(barrier.operands.size(), 2u);
  EXPECT_TRUE(One("barrier.sync.aligned 0;").Has(kFlagAligned));
  EXPECT_TRUE(One("bar.arrive 1, 64;").Has(kFlagArrive));
  Instruction red = One("bar.red.popc.u32 %r1, 0, %p1;");
  EXPECT_TRUE(red.Has(kFlagRed));
  EXPECT_EQ(red.atomic_op, AtomicOp::kPopc);
  EXPECT_EQ(One("bar.red.and.pred %p1, 0, 64, !%p2;").operands.size(), 4u);
  Instruction warp_sync = One("bar.warp.sync -1;");
  EXPECT_TRUE(warp_sync.Has(kFlagWarp));
  EXPECT_FALSE(warp_sync.Has(kFlagAligned));
  EXPECT_EQ(One("membar.gl;").scope, MemoryScope::kGpu);
  EXPECT_EQ(One("membar.cta;").scope, MemoryScope::kCta);
  Instruction fence = One("fence.acq_rel.sys;");
  EXPECT_EQ(fence.order, MemoryOrder::kAcqRel);
  EXPECT_EQ(fence.scope, MemoryScope::kSys);
  EXPECT_EQ(One("vote.sync.ballot.b32 %r1, %p1, -1;").vote, VoteMode::kBallot);
  EXPECT_TRUE(One("vote.sync.any.pred %p1, !%p2, %r1;").operands[1].negated);
  EXPECT_EQ(One("activemask.b32 %r1;").opcode, Opcode::kActivemask);
  EXPECT_EQ(One("nanosleep.u32 %r1;").opcode, Opcode::kNanosleep);
  EXPECT_EQ(One("exit;").opcode, Opcode::kExit);
  EXPECT_EQ(One("trap;").opcode, Opcode::kTrap);
  EXPECT_TRUE(One("ret.uni;").Has(kFlagUni));
}

// ------------------------------------------------------------------------------------------------
// Errors name the instruction, the line and the kernel

TEST(PtxErrorTest, UnknownOpcode) {
  Status s = ParseError(Kernel(".reg .b32 %r<3>;\ntex.2d.v4.f32.f32 %r1, [t, {%r1}];"));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "line 7: in kernel 'k': unsupported instruction 'tex.2d.v4.f32.f32'");
}

TEST(PtxErrorTest, FunctionsAreNamedAsFunctions) {
  Status s = ParseError(".func f()\n{\nfrobnicate;\n}\n");
  EXPECT_EQ(s.message(), "line 6: in function 'f': unsupported instruction 'frobnicate'");
}

TEST(PtxErrorTest, BadModifiers) {
  EXPECT_EQ(ErrorOf("add.lo.s32 %r1, %r2, %r3;"),
            "line 7: in kernel 'k': instruction 'add.lo.s32': modifier '.lo' is not valid for add");
  EXPECT_NE(ErrorOf("add.s32.bogus %r1, %r2, %r3;").find("unknown modifier '.bogus'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("add.rn.rz.f32 %f1, %f2, %f3;").find("conflicts"), std::string::npos);
  EXPECT_NE(ErrorOf("add.ftz.ftz.f32 %f1, %f2, %f3;").find("duplicate modifier"),
            std::string::npos);
  EXPECT_NE(ErrorOf("add %r1, %r2, %r3;").find("missing type suffix"), std::string::npos);
  EXPECT_NE(ErrorOf("add.s32.s32 %r1, %r2, %r3;").find("too many type suffixes"),
            std::string::npos);
  EXPECT_EQ(ParseError(Kernel(".reg .b16 %rs<3>;\nadd.bf16 %rs0, %rs1, %rs2;")).message(),
            "line 7: in kernel 'k': instruction 'add.bf16': half-precision arithmetic is not "
            "supported (type '.bf16' is not valid for add)");
  EXPECT_NE(ErrorOf("mul.s32 %r1, %r2, %r3;").find("needs .lo, .hi or .wide"), std::string::npos);
  EXPECT_NE(ErrorOf("mul.wide.s64 %rd1, %rd2, %rd3;").find("16/32-bit"), std::string::npos);
  EXPECT_NE(ErrorOf("cvt.s32.f32 %r1, %f1;").find("needs .rni/.rzi/.rmi/.rpi"), std::string::npos);
  EXPECT_NE(ErrorOf("cvt.f32.s32 %f1, %r1;").find("needs .rn/.rz/.rm/.rp"), std::string::npos);
  EXPECT_NE(ErrorOf("cvt.rn.s32.s16 %r1, %rs1;").find("takes no rounding"), std::string::npos);
  EXPECT_NE(ErrorOf("cvt.f32.f64 %f1, %fd1;").find("narrowing"), std::string::npos);
  EXPECT_NE(ErrorOf("div.f32 %f1, %f2, %f3;").find("exactly one of .approx"), std::string::npos);
  EXPECT_NE(ErrorOf("fma.f32 %f1, %f2, %f3, %f4;").find("fma needs"), std::string::npos);
  EXPECT_NE(ErrorOf("sin.f32 %f1, %f2;").find("needs .approx"), std::string::npos);
  EXPECT_NE(ErrorOf("add.ftz.f64 %fd1, %fd2, %fd3;").find("only valid with .f32"),
            std::string::npos);
  EXPECT_NE(ErrorOf("setp.f32 %p1, %f1, %f2;").find("needs a comparison"), std::string::npos);
  EXPECT_NE(ErrorOf("setp.ltu.s32 %p1, %r1, %r2;").find("unordered comparisons need a float"),
            std::string::npos);
  EXPECT_NE(ErrorOf("setp.hi.f32 %p1, %f1, %f2;").find("need an integer type"), std::string::npos);
  EXPECT_NE(ErrorOf("ld.const.nc.u32 %r1, [%rd1];").find("'.nc' needs .global"), std::string::npos);
  EXPECT_NE(ErrorOf("st.const.u32 [%rd1], %r1;").find("cannot store to .const"), std::string::npos);
  EXPECT_NE(ErrorOf("ld.relaxed.global.u32 %r1, [%rd1];").find("need a scope"), std::string::npos);
  EXPECT_NE(ErrorOf("atom.local.add.u32 %r1, [%rd1], 1;").find(".global, .shared"),
            std::string::npos);
  EXPECT_NE(ErrorOf("atom.global.inc.u64 %rd1, [%rd2], 1;").find(".inc is not valid with .u64"),
            std::string::npos);
  EXPECT_NE(ErrorOf("red.global.cas.b32 [%rd1], %r1;").find("red has no .cas"), std::string::npos);
  EXPECT_NE(ErrorOf("atom.global.u32 %r1, [%rd1], 1;").find("needs an operation"),
            std::string::npos);
  EXPECT_NE(ErrorOf("shfl.down.b32 %r1, %r2, 1, 31;").find("only shfl.sync"), std::string::npos);
  EXPECT_NE(ErrorOf("vote.sync.ballot.pred %p1, %p2, -1;").find("vote.ballot takes .b32"),
            std::string::npos);
  EXPECT_NE(ErrorOf("bar.aligned 0;").find("not valid for bar"), std::string::npos);
  EXPECT_NE(ErrorOf("bar 0;").find("exactly one of .sync"), std::string::npos);
  EXPECT_NE(ErrorOf("membar;").find("needs .cta, .gl or .sys"), std::string::npos);
  EXPECT_NE(ErrorOf("shf.l.b32 %r1, %r2, %r3, %r4;").find(".clamp or .wrap"), std::string::npos);
  EXPECT_NE(ErrorOf("ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2;").find("cache-policy"),
            std::string::npos);
}

TEST(PtxErrorTest, WrongOperands) {
  EXPECT_EQ(ErrorOf("add.s32 %r1, %r2;"),
            "line 7: in kernel 'k': instruction 'add.s32': expected 3 operands, got 2");
  EXPECT_NE(ErrorOf("bar.sync 0, 1, 2;").find("expected 1-2 operands, got 3"), std::string::npos);
  EXPECT_NE(ErrorOf("ret %r1;").find("expected 0 operands, got 1"), std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 5, %r2, %r3;").find("operand 1: an immediate is not valid here"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %tid.x, %r1;").find("operand 1: a special register is not valid here"),
            std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 %r1, [%rd1], %r3;").find("operand 2: an address is not valid here"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ld.global.u32 %r1, %rd1;").find("a register is not valid here"),
            std::string::npos);
  EXPECT_NE(ErrorOf("lop3.b32 %r1, %r2, %r3, %r4, %r5;").find("a register is not valid here"),
            std::string::npos);
  EXPECT_NE(ErrorOf("lop3.b32 %r1, %r2, %r3, %r4, 256;").find("0..255"), std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 %r1, !%r2, %r3;").find("'!' is not valid here"), std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 %r1, %r2, %r3").find("expected ',' or ';'"), std::string::npos);
}

TEST(PtxErrorTest, TypeMismatches) {
  EXPECT_EQ(ErrorOf("add.s32 %r1, %rd2, %r3;"),
            "line 7: in kernel 'k': instruction 'add.s32': operand 2: register %rd2 has type .b64, "
            "expected .s32");
  EXPECT_NE(ErrorOf("add.f32 %f1, %fd1, %f2;").find("%fd1 has type .f64"), std::string::npos);
  EXPECT_NE(ErrorOf("mul.wide.s32 %r1, %r2, %r3;").find("expected .s64"), std::string::npos);
  EXPECT_NE(ErrorOf("setp.eq.s32 %r1, %r2, %r3;").find("expected .pred"), std::string::npos);
  EXPECT_NE(ErrorOf("selp.b32 %r1, %r2, %r3, %r4;").find("expected .pred"), std::string::npos);
  EXPECT_NE(ErrorOf("add.s32 %r1, %r2, 0f3F800000;").find("floating-point immediate"),
            std::string::npos);
  EXPECT_NE(ErrorOf("add.s16 %rs1, %rs2, 70000;").find("does not fit .s16"), std::string::npos);
  EXPECT_NE(ErrorOf("ld.global.u32 %r1, [%f1];").find("must be a 32- or 64-bit integer"),
            std::string::npos);
  EXPECT_NE(ErrorOf("ld.global.f32 %f1, [%rd1];\n@%r1 ret;").find("not a .pred register"),
            std::string::npos);
  // Bit types agree with any type of their size; ld/st/cvt registers may be wider.
  EXPECT_EQ(One("mov.b32 %f1, %r1;").opcode, Opcode::kMov);
  EXPECT_EQ(One("add.f32 %f1, %f2, %r1;").opcode, Opcode::kAdd);
  EXPECT_EQ(One("st.global.u8 [%rd1], %r1;").opcode, Opcode::kSt);
  EXPECT_NE(ErrorOf("ld.global.u32 %rs1, [%rd1];").find("%rs1 has type .b16"), std::string::npos);
}

TEST(PtxErrorTest, SymbolSpaces) {
  Status s = ParseError(".shared .u32 sh;\n" + Kernel(".reg .b32 %r1;\nld.global.u32 %r1, [sh];"));
  EXPECT_NE(s.message().find("'sh' is in .shared, not .global"), std::string::npos);
  Status params = ParseError(Kernel(".reg .b32 %r1;\nst.param.u32 [p], %r1;", ".param .u32 p"));
  EXPECT_NE(params.message().find("kernel parameters are read-only"), std::string::npos);
}

TEST(PtxErrorTest, UndefinedAndDuplicateLabels) {
  EXPECT_EQ(ErrorOf("bra $nowhere;"), "line 7: in kernel 'k': undefined label '$nowhere'");
  EXPECT_EQ(ErrorOf("$a:\n$a:\nret;"), "line 8: in kernel 'k': duplicate label '$a'");
}

TEST(PtxErrorTest, LexerErrorsCarryTheLine) {
  EXPECT_EQ(ErrorOf("mov.u32 %r1, 0f3F80;"),
            "line 7: in kernel 'k': 0f literal needs exactly 8 hex digits");
  EXPECT_NE(ErrorOf("mov.u32 %r1, 99999999999999999999;").find("out of range"), std::string::npos);
  EXPECT_NE(ParseError("/* never closed").message().find("unterminated /* comment"),
            std::string::npos);
  EXPECT_NE(ParseError(".pragma \"open;\n").message().find("unterminated string"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mov.u32 %r1, #;").find("unexpected character"), std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// Printer

TEST(PtxPrinterTest, InstructionsPrintBackAsPtx) {
  Module m =
      Parse(Kernel(".reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<2>; .reg .b64 %rd<2>;\n"
                   "@!%p1 ld.global.nc.v2.f32 {%f0, %f1}, [%rd1+-8];\n"
                   "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;\n"
                   "mov.u32 %r3, %tid.y;\n"
                   "setp.lt.and.f32 %p0, %f0, 0f3F800000, !%p1;\n"
                   "barrier.sync 0;\n"
                   "bar.sync 0;\n"
                   "membar.gl;"));
  const Function& f = m.functions[0];
  ASSERT_EQ(f.body.size(), 7u);
  EXPECT_EQ(PrintInstruction(m, f, f.body[0]), "@!%p1 ld.global.nc.v2.f32 {%f0, %f1}, [%rd1+-8];");
  EXPECT_EQ(PrintInstruction(m, f, f.body[1]), "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;");
  EXPECT_EQ(PrintInstruction(m, f, f.body[2]), "mov.u32 %r3, %tid.y;");
  EXPECT_EQ(PrintInstruction(m, f, f.body[3]), "setp.lt.and.f32 %p0, %f0, 0f3F800000, !%p1;");
  EXPECT_EQ(PrintInstruction(m, f, f.body[4]), "barrier.sync 0;");
  EXPECT_EQ(PrintInstruction(m, f, f.body[5]), "bar.sync 0;");
  EXPECT_EQ(PrintInstruction(m, f, f.body[6]), "membar.gl;");
  EXPECT_EQ(InstructionMnemonic(f.body[0]), "ld.global.nc.v2.f32");
}

TEST(PtxPrinterTest, ShadowedNamesGetUniqueSpellings) {
  Module m =
      Parse(Kernel(".reg .b32 %r<2>;\n{ .reg .b32 %r1; mov.u32 %r1, 5; }\n{ .param .b32 p; }\n{ "
                   ".param .b32 p; }\n"
                   "mov.u32 %r1, 6;"));
  std::string printed = PrintModule(m);
  EXPECT_NE(printed.find("%r1$1"), std::string::npos) << printed;
  auto again = ParseModule(printed);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
  EXPECT_EQ(PrintModule(*again), printed);
  EXPECT_EQ(again->functions[0].body[1].operands[0].reg, 1u);  // the outer %r1, not the block's
}

}  // namespace
}  // namespace gpuvm::ptx
