#include "ptx/ast.h"

#include <bit>
#include <cmath>
#include <iterator>
#include <limits>

namespace gpuvm::ptx {

uint32_t TypeSize(ScalarType type) {
  switch (type) {
    case ScalarType::kNone:
      return 0;
    case ScalarType::kPred:
    case ScalarType::kB8:
    case ScalarType::kU8:
    case ScalarType::kS8:
      return 1;
    case ScalarType::kB16:
    case ScalarType::kU16:
    case ScalarType::kS16:
    case ScalarType::kF16:
    case ScalarType::kBF16:
      return 2;
    case ScalarType::kB32:
    case ScalarType::kU32:
    case ScalarType::kS32:
    case ScalarType::kF32:
    case ScalarType::kF16x2:
    case ScalarType::kBF16x2:
      return 4;
    case ScalarType::kB64:
    case ScalarType::kU64:
    case ScalarType::kS64:
    case ScalarType::kF64:
      return 8;
    case ScalarType::kB128:
      return 16;
  }
  return 0;
}

bool IsBitType(ScalarType type) {
  return type == ScalarType::kB8 || type == ScalarType::kB16 || type == ScalarType::kB32 ||
         type == ScalarType::kB64 || type == ScalarType::kB128;
}

bool IsUnsignedType(ScalarType type) {
  return type == ScalarType::kU8 || type == ScalarType::kU16 || type == ScalarType::kU32 ||
         type == ScalarType::kU64;
}

bool IsSignedType(ScalarType type) {
  return type == ScalarType::kS8 || type == ScalarType::kS16 || type == ScalarType::kS32 ||
         type == ScalarType::kS64;
}

bool IsIntegerType(ScalarType type) { return IsUnsignedType(type) || IsSignedType(type); }

bool IsFloatType(ScalarType type) {
  return type == ScalarType::kF16 || type == ScalarType::kF16x2 || type == ScalarType::kBF16 ||
         type == ScalarType::kBF16x2 || type == ScalarType::kF32 || type == ScalarType::kF64;
}

std::string_view TypeName(ScalarType type) {
  switch (type) {
    case ScalarType::kNone:
      return "";
    case ScalarType::kPred:
      return "pred";
    case ScalarType::kB8:
      return "b8";
    case ScalarType::kB16:
      return "b16";
    case ScalarType::kB32:
      return "b32";
    case ScalarType::kB64:
      return "b64";
    case ScalarType::kB128:
      return "b128";
    case ScalarType::kU8:
      return "u8";
    case ScalarType::kU16:
      return "u16";
    case ScalarType::kU32:
      return "u32";
    case ScalarType::kU64:
      return "u64";
    case ScalarType::kS8:
      return "s8";
    case ScalarType::kS16:
      return "s16";
    case ScalarType::kS32:
      return "s32";
    case ScalarType::kS64:
      return "s64";
    case ScalarType::kF16:
      return "f16";
    case ScalarType::kF16x2:
      return "f16x2";
    case ScalarType::kBF16:
      return "bf16";
    case ScalarType::kBF16x2:
      return "bf16x2";
    case ScalarType::kF32:
      return "f32";
    case ScalarType::kF64:
      return "f64";
  }
  return "";
}

std::string_view StateSpaceName(StateSpace space) {
  switch (space) {
    case StateSpace::kNone:
      return "";
    case StateSpace::kReg:
      return "reg";
    case StateSpace::kGlobal:
      return "global";
    case StateSpace::kShared:
      return "shared";
    case StateSpace::kLocal:
      return "local";
    case StateSpace::kConst:
      return "const";
    case StateSpace::kParam:
      return "param";
  }
  return "";
}

namespace {
struct SpecialRegisterRow {
  std::string_view name;
  ScalarType type;
  bool component;
};
constexpr SpecialRegisterRow kSpecialRegisters[] = {
    {"", ScalarType::kNone, false},  // kNone
#define GPUVM_PTX_SREG(e, name, type, component) {name, ScalarType::type, component},
#include "ptx/special_registers.def"
#undef GPUVM_PTX_SREG
};
static_assert(std::size(kSpecialRegisters) == static_cast<size_t>(kLastSpecialRegister) + 1);
const SpecialRegisterRow& RowOf(SpecialRegister sreg) {
  const auto i = static_cast<size_t>(sreg);
  return kSpecialRegisters[i < std::size(kSpecialRegisters) ? i : 0];
}
}  // namespace

std::string_view SpecialRegisterName(SpecialRegister sreg) { return RowOf(sreg).name; }

ScalarType SpecialRegisterType(SpecialRegister sreg) { return RowOf(sreg).type; }

bool SpecialRegisterHasComponent(SpecialRegister sreg) { return RowOf(sreg).component; }

std::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kNone:
      return "";
    case Opcode::kAdd:
      return "add";
    case Opcode::kSub:
      return "sub";
    case Opcode::kMul:
      return "mul";
    case Opcode::kMad:
      return "mad";
    case Opcode::kMul24:
      return "mul24";
    case Opcode::kMad24:
      return "mad24";
    case Opcode::kSad:
      return "sad";
    case Opcode::kDiv:
      return "div";
    case Opcode::kRem:
      return "rem";
    case Opcode::kAbs:
      return "abs";
    case Opcode::kNeg:
      return "neg";
    case Opcode::kMin:
      return "min";
    case Opcode::kMax:
      return "max";
    case Opcode::kAddc:
      return "addc";
    case Opcode::kSubc:
      return "subc";
    case Opcode::kMadc:
      return "madc";
    case Opcode::kFma:
      return "fma";
    case Opcode::kRcp:
      return "rcp";
    case Opcode::kSqrt:
      return "sqrt";
    case Opcode::kRsqrt:
      return "rsqrt";
    case Opcode::kSin:
      return "sin";
    case Opcode::kCos:
      return "cos";
    case Opcode::kLg2:
      return "lg2";
    case Opcode::kEx2:
      return "ex2";
    case Opcode::kTanh:
      return "tanh";
    case Opcode::kCopysign:
      return "copysign";
    case Opcode::kTestp:
      return "testp";
    case Opcode::kPopc:
      return "popc";
    case Opcode::kClz:
      return "clz";
    case Opcode::kBfind:
      return "bfind";
    case Opcode::kBrev:
      return "brev";
    case Opcode::kBfe:
      return "bfe";
    case Opcode::kBfi:
      return "bfi";
    case Opcode::kBmsk:
      return "bmsk";
    case Opcode::kPrmt:
      return "prmt";
    case Opcode::kLop3:
      return "lop3";
    case Opcode::kShf:
      return "shf";
    case Opcode::kShl:
      return "shl";
    case Opcode::kShr:
      return "shr";
    case Opcode::kAnd:
      return "and";
    case Opcode::kOr:
      return "or";
    case Opcode::kXor:
      return "xor";
    case Opcode::kNot:
      return "not";
    case Opcode::kCnot:
      return "cnot";
    case Opcode::kDp4a:
      return "dp4a";
    case Opcode::kSetp:
      return "setp";
    case Opcode::kSet:
      return "set";
    case Opcode::kSelp:
      return "selp";
    case Opcode::kSlct:
      return "slct";
    case Opcode::kMov:
      return "mov";
    case Opcode::kCvt:
      return "cvt";
    case Opcode::kCvta:
      return "cvta";
    case Opcode::kLd:
      return "ld";
    case Opcode::kLdu:
      return "ldu";
    case Opcode::kSt:
      return "st";
    case Opcode::kPrefetch:
      return "prefetch";
    case Opcode::kIsspacep:
      return "isspacep";
    case Opcode::kAtom:
      return "atom";
    case Opcode::kRed:
      return "red";
    case Opcode::kBar:
      return "bar";
    case Opcode::kMembar:
      return "membar";
    case Opcode::kFence:
      return "fence";
    case Opcode::kShfl:
      return "shfl";
    case Opcode::kVote:
      return "vote";
    case Opcode::kActivemask:
      return "activemask";
    case Opcode::kBra:
      return "bra";
    case Opcode::kCall:
      return "call";
    case Opcode::kRet:
      return "ret";
    case Opcode::kExit:
      return "exit";
    case Opcode::kTrap:
      return "trap";
    case Opcode::kBrkpt:
      return "brkpt";
    case Opcode::kNanosleep:
      return "nanosleep";
  }
  return "";
}

uint32_t Variable::ElementSize() const { return TypeSize(type) * vector; }

uint64_t Variable::SizeBytes() const { return unsized ? 0 : ElementSize() * elements; }

uint32_t Variable::Alignment() const { return align != 0 ? align : ElementSize(); }

int64_t Operand::ImmAsInt() const {
  if (imm_kind == ImmKind::kInt) return static_cast<int64_t>(imm_bits);
  double v = ImmAsDouble();
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

double Operand::ImmAsDouble() const {
  switch (imm_kind) {
    case ImmKind::kInt:
      return static_cast<double>(static_cast<int64_t>(imm_bits));
    case ImmKind::kF32:
      return std::bit_cast<float>(static_cast<uint32_t>(imm_bits));
    case ImmKind::kF64:
      return std::bit_cast<double>(imm_bits);
    case ImmKind::kNone:
      break;
  }
  return 0.0;
}

float Operand::ImmAsFloat() const {
  if (imm_kind == ImmKind::kF32) return std::bit_cast<float>(static_cast<uint32_t>(imm_bits));
  if (imm_kind == ImmKind::kInt) return static_cast<float>(static_cast<int64_t>(imm_bits));
  return static_cast<float>(ImmAsDouble());
}

int Module::FindFunction(std::string_view name) const {
  for (size_t i = 0; i < functions.size(); ++i) {
    if (functions[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Module::FindGlobal(std::string_view name) const {
  for (size_t i = 0; i < globals.size(); ++i) {
    if (globals[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const Variable* ResolveVariable(const Module& module, const Function& function,
                                const Symbol& symbol) {
  const std::vector<Variable>* table = nullptr;
  switch (symbol.kind) {
    case Symbol::Kind::kGlobal:
      table = &module.globals;
      break;
    case Symbol::Kind::kParam:
      table = &function.params;
      break;
    case Symbol::Kind::kReturn:
      table = &function.returns;
      break;
    case Symbol::Kind::kLocal:
      table = &function.locals;
      break;
    case Symbol::Kind::kNone:
    case Symbol::Kind::kFunction:
      return nullptr;
  }
  if (symbol.index >= table->size()) return nullptr;
  return &(*table)[symbol.index];
}

std::string DescribeLocation(const Function& function, uint32_t line) {
  std::string out = "line " + std::to_string(line) + ": in ";
  out += function.is_entry ? "kernel '" : "function '";
  out += function.name;
  out += "': ";
  return out;
}

}  // namespace gpuvm::ptx
