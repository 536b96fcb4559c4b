// The opcode table (opcode_table.h), built at compile time from opcodes.def.
#include "gpu/isa/opcode_table.h"

#include <unordered_map>

namespace gpuvm::isa {
namespace {

constexpr OpcodeInfo Entry(Opcode op, std::string_view mnemonic, Form form,
                           std::string_view operands, TypeRule types, ModRule mod, uint8_t flags) {
  return OpcodeInfo{op,
                    mnemonic,
                    form,
                    operands,
                    form == Form::kGeneric ? ParseOperands(operands) : OperandList{},
                    types,
                    mod,
                    flags};
}

constexpr OpcodeInfo kTable[] = {
#define GVISA_OPCODE(name, value, mnemonic, form, operands, types, mod, flags) \
  Entry(Opcode::k##name, mnemonic, Form::form, operands, TypeRule::types, ModRule::mod, flags),
#include "gpu/isa/opcodes.def"
#undef GVISA_OPCODE
};

constexpr bool TableIsWellFormed() {
  for (size_t i = 0; i < std::size(kTable); ++i) {
    const OpcodeInfo& e = kTable[i];
    if (!e.operands.valid) return false;
    if (i > 0 && static_cast<uint8_t>(kTable[i - 1].op) >= static_cast<uint8_t>(e.op)) {
      return false;  // ascending, no duplicates
    }
    if ((e.form == Form::kGeneric) != (e.mod != ModRule::kForm)) return false;
  }
  return true;
}
static_assert(TableIsWellFormed(), "gpu/isa/opcodes.def: a malformed or out-of-order entry");

// Opcode value -> table index + 1 (0: not an opcode).
constexpr std::array<uint8_t, 256> kIndex = [] {
  std::array<uint8_t, 256> index{};
  for (size_t i = 0; i < std::size(kTable); ++i) {
    index[static_cast<uint8_t>(kTable[i].op)] = static_cast<uint8_t>(i + 1);
  }
  return index;
}();
static_assert(std::size(kTable) < 255);

}  // namespace

const OperandSpec* OpcodeInfo::OperandIn(Field field) const {
  for (const OperandSpec& o : operands.operands()) {
    if (o.field == field) return &o;
  }
  return nullptr;
}

bool OpcodeInfo::HasTarget() const {
  for (const OperandSpec& o : operands.operands()) {
    if (o.kind == OperandKind::kTarget) return true;
  }
  return false;
}

bool OpcodeInfo::IsPure() const {
  if (flags & (kMemRead | kMemWrite | kSync | kControl)) return false;
  if (form == Form::kCvt) return true;
  const OperandSpec* d = OperandIn(Field::kD);
  return form == Form::kGeneric && d != nullptr && d->kind != OperandKind::kPred;
}

const OpcodeInfo* FindOpcode(Opcode op) {
  const uint8_t i = kIndex[static_cast<uint8_t>(op)];
  return i == 0 ? nullptr : &kTable[i - 1];
}

const OpcodeInfo* FindOpcode(std::string_view mnemonic) {
  static const auto* by_name = [] {
    auto* map = new std::unordered_map<std::string_view, const OpcodeInfo*>();
    for (const OpcodeInfo& e : kTable) (*map)[e.mnemonic] = &e;
    return map;
  }();
  auto it = by_name->find(mnemonic);
  return it == by_name->end() ? nullptr : it->second;
}

std::span<const OpcodeInfo> AllOpcodes() { return kTable; }

uint8_t* FieldOf(Instruction* inst, Field field) {
  switch (field) {
    case Field::kD:
      return &inst->d;
    case Field::kA:
      return &inst->a;
    case Field::kB:
      return &inst->b;
    case Field::kC:
      return &inst->c;
    case Field::kMod:
      return &inst->mod;
    case Field::kNone:
      break;
  }
  return nullptr;
}

uint8_t FieldValue(const Instruction& inst, Field field) {
  Instruction copy = inst;
  const uint8_t* p = FieldOf(&copy, field);
  return p ? *p : 0;
}

uint8_t NegationBit(ModRule rule, Field field) {
  if (rule == ModRule::kSelect && field == Field::kC) return 1;
  if (rule == ModRule::kPlop && field == Field::kA) return kPlopNegA;
  if (rule == ModRule::kPlop && field == Field::kB) return kPlopNegB;
  return 0;
}

bool TakesRounding(ModRule rule) {
  return rule == ModRule::kArith || rule == ModRule::kArithSat || rule == ModRule::kRound ||
         rule == ModRule::kRoundSat;
}

}  // namespace gpuvm::isa
