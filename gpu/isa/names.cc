// Printable names of the ISA's enumerations (isa.h).
#include <iterator>

#include "gpu/isa/isa.h"
#include "gpu/isa/opcode_table.h"

namespace gpuvm::isa {

std::string_view OpcodeName(Opcode op) {
  const OpcodeInfo* info = FindOpcode(op);
  return info ? info->mnemonic : "op?";
}

std::string_view TypeName(Type t) {
  static constexpr std::string_view kNames[] = {"u8",  "s8",  "u16", "s16", "u32", "s32",
                                                "u64", "s64", "f32", "f64", "f16"};
  static_assert(std::size(kNames) == kTypeCount);
  uint8_t i = static_cast<uint8_t>(t);
  return i < kTypeCount ? kNames[i] : "t?";
}

std::string_view SpaceName(Space s) {
  static constexpr std::string_view kNames[] = {"generic", "global", "shared", "local", "const"};
  uint8_t i = static_cast<uint8_t>(s);
  return i <= static_cast<uint8_t>(Space::kConst) ? kNames[i] : "space?";
}

std::string_view SpecialRegName(SpecialReg r) {
  static constexpr std::string_view kNames[] = {"tid.x",           "tid.y",
                                                "tid.z",           "ntid.x",
                                                "ntid.y",          "ntid.z",
                                                "ctaid.x",         "ctaid.y",
                                                "ctaid.z",         "nctaid.x",
                                                "nctaid.y",        "nctaid.z",
                                                "laneid",          "warpid",
                                                "nwarpid",         "smid",
                                                "nsmid",           "gridid",
                                                "clock",           "lanemask_eq",
                                                "lanemask_lt",     "lanemask_le",
                                                "lanemask_gt",     "lanemask_ge",
                                                "activemask",      "dynamic_smem_size",
                                                "total_smem_size", "clock64",
                                                "globaltimer",     "shared_window",
                                                "local_window"};
  static_assert(std::size(kNames) == kSpecialRegCount);
  uint8_t i = static_cast<uint8_t>(r);
  return i < kSpecialRegCount ? kNames[i] : "sr?";
}

namespace {
template <size_t N>
std::string_view Pick(const std::string_view (&names)[N], uint8_t i, std::string_view fallback) {
  return i < N ? names[i] : fallback;
}
}  // namespace

std::string_view RoundingName(Rounding r) {
  static constexpr std::string_view kNames[] = {"",    "rn",  "rz",  "rm", "rp",
                                                "rni", "rzi", "rmi", "rpi"};
  return Pick(kNames, static_cast<uint8_t>(r), "round?");
}

std::string_view CompareName(Compare c) {
  static constexpr std::string_view kNames[] = {"eq",  "ne",  "lt",  "le",  "gt",  "ge",  "equ",
                                                "neu", "ltu", "leu", "gtu", "geu", "num", "nan"};
  return Pick(kNames, static_cast<uint8_t>(c), "cmp?");
}

std::string_view AtomOpName(AtomOp op) {
  static constexpr std::string_view kNames[] = {"add", "min",  "max", "inc", "dec",
                                                "cas", "exch", "and", "or",  "xor"};
  return Pick(kNames, static_cast<uint8_t>(op), "atomop?");
}

std::string_view ShflModeName(ShflMode m) {
  static constexpr std::string_view kNames[] = {"idx", "up", "down", "bfly"};
  return Pick(kNames, static_cast<uint8_t>(m), "shfl?");
}

std::string_view VoteModeName(VoteMode m) {
  static constexpr std::string_view kNames[] = {"all", "any", "uni", "ballot"};
  return Pick(kNames, static_cast<uint8_t>(m), "vote?");
}

std::string_view TestpModeName(TestpMode m) {
  static constexpr std::string_view kNames[] = {"finite",     "infinite", "number",
                                                "notanumber", "normal",   "subnormal"};
  return Pick(kNames, static_cast<uint8_t>(m), "testp?");
}

std::string_view PrmtModeName(PrmtMode m) {
  static constexpr std::string_view kNames[] = {"", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"};
  return Pick(kNames, static_cast<uint8_t>(m), "prmt?");
}

std::string_view PlopOpName(PlopOp op) {
  static constexpr std::string_view kNames[] = {"and", "or", "xor"};
  return Pick(kNames, static_cast<uint8_t>(op), "plop?");
}

}  // namespace gpuvm::isa
