#include "ptx/printer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_set>
#include <vector>

#include "base/enum_names.h"
#include "ptx/instruction_set.h"

namespace gpuvm::ptx {
namespace {

std::string Hex(uint64_t bits, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*" PRIX64, digits, bits);
  return buf;
}

std::string ImmediateText(ImmKind kind, uint64_t bits) {
  switch (kind) {
    case ImmKind::kF32:
      return "0f" + Hex(bits & 0xffffffffu, 8);
    case ImmKind::kF64:
      return "0d" + Hex(bits, 16);
    default:
      return std::to_string(static_cast<int64_t>(bits));
  }
}

std::string OffsetText(int64_t offset) {
  if (offset == 0) return "";
  if (offset < 0) return "+-" + std::to_string(static_cast<uint64_t>(-(offset + 1)) + 1);
  return "+" + std::to_string(offset);
}

// Names used when printing one function: registers and locals get unique spellings.
struct Names {
  std::vector<std::string> registers;
  std::vector<std::string> locals;
};

class Printer {
 public:
  explicit Printer(const Module& module) : module_(module) {}

  std::string PrintAll() {
    out_ += ".version " + std::to_string(module_.version_major) + "." +
            std::to_string(module_.version_minor) + "\n";
    out_ += ".target " + module_.target + "\n";
    out_ += ".address_size " + std::to_string(module_.address_size) + "\n\n";
    for (const Function& f : module_.functions) {
      if (!f.is_entry) {
        Header(f);
        out_ += ";\n";
      }
    }
    for (const Variable& v : module_.globals) {
      VariableDecl(v, nullptr);
      out_ += ";\n";
    }
    for (const Function& f : module_.functions) {
      if (f.has_body) FunctionDef(f);
    }
    return std::move(out_);
  }

  std::string PrintOne(const Function& f, const ptx::Instruction& inst) {
    Names names;
    for (const Register& r : f.registers) names.registers.push_back(r.name);
    for (const Variable& v : f.locals) names.locals.push_back(v.name);
    names_ = &names;
    InstructionText(f, inst);
    names_ = nullptr;
    return std::move(out_);
  }

 private:
  static std::string_view LinkageText(Linkage l) {
    static constexpr EnumName<Linkage> kLinkages[] = {{Linkage::kVisible, ".visible "},
                                                      {Linkage::kExtern, ".extern "},
                                                      {Linkage::kWeak, ".weak "},
                                                      {Linkage::kCommon, ".common "}};
    return NameOf(kLinkages, l, "");
  }

  void VariableDecl(const Variable& v, const std::string* name) {
    out_ += LinkageText(v.linkage);
    out_ += ".";
    out_ += StateSpaceName(v.space);
    if (v.managed) out_ += " .attribute(.managed)";
    if (v.align != 0) out_ += " .align " + std::to_string(v.align);
    if (v.ptr_space != StateSpace::kNone || v.ptr_align != 0) {
      out_ += " .ptr";
      if (v.ptr_space != StateSpace::kNone) out_ += " ." + std::string(StateSpaceName(v.ptr_space));
      if (v.ptr_align != 0) out_ += " .align " + std::to_string(v.ptr_align);
    }
    if (v.vector != 1) out_ += " .v" + std::to_string(v.vector);
    out_ += " .";
    out_ += TypeName(v.type);
    out_ += " ";
    out_ += name != nullptr ? *name : v.name;
    for (uint64_t d : v.dims) out_ += d == 0 ? "[]" : "[" + std::to_string(d) + "]";
    if (!v.init.empty() || !v.relocations.empty()) Initializer(v);
  }

  void Initializer(const Variable& v) {
    const uint32_t size = TypeSize(v.type);
    const uint64_t count = size == 0 ? 0 : v.init.size() / size;
    const bool braces = !v.dims.empty() || v.vector != 1;
    out_ += braces ? " = {" : " = ";
    size_t next_reloc = 0;
    for (uint64_t i = 0; i < count; ++i) {
      if (i != 0) out_ += ", ";
      const uint64_t offset = i * size;
      if (next_reloc < v.relocations.size() && v.relocations[next_reloc].offset == offset) {
        const Relocation& r = v.relocations[next_reloc++];
        const std::string& target =
            r.is_function ? module_.functions[r.index].name : module_.globals[r.index].name;
        out_ += r.generic ? "generic(" + target + ")" : target;
        out_ += OffsetText(r.addend);
        continue;
      }
      uint64_t bits = 0;
      for (uint32_t b = 0; b < size; ++b) bits |= uint64_t{v.init[offset + b]} << (8 * b);
      if (v.type == ScalarType::kF32) {
        out_ += ImmediateText(ImmKind::kF32, bits);
      } else if (v.type == ScalarType::kF64) {
        out_ += ImmediateText(ImmKind::kF64, bits);
      } else if (IsSignedType(v.type) && size < 8 && (bits >> (8 * size - 1)) != 0) {
        out_ += std::to_string(static_cast<int64_t>(bits | (~uint64_t{0} << (8 * size))));
      } else {
        out_ += std::to_string(static_cast<int64_t>(bits));
      }
    }
    if (braces) out_ += "}";
  }

  void ParamList(const std::vector<Variable>& params) {
    out_ += "(";
    for (size_t i = 0; i < params.size(); ++i) {
      out_ += i == 0 ? "\n\t" : ",\n\t";
      VariableDecl(params[i], nullptr);
    }
    out_ += params.empty() ? ")" : "\n)";
  }

  void Header(const Function& f) {
    out_ += LinkageText(f.linkage);
    out_ += f.is_entry ? ".entry " : ".func ";
    if (!f.is_entry && !f.returns.empty()) {
      ParamList(f.returns);
      out_ += " ";
    }
    out_ += f.name;
    ParamList(f.params);
    auto dims = [&](const char* name, const std::array<uint32_t, 3>& d) {
      if (d[0] == 0) return;
      out_ += std::string("\n") + name + " " + std::to_string(d[0]) + ", " + std::to_string(d[1]) +
              ", " + std::to_string(d[2]);
    };
    dims(".maxntid", f.maxntid);
    dims(".reqntid", f.reqntid);
    if (f.minnctapersm != 0) out_ += "\n.minnctapersm " + std::to_string(f.minnctapersm);
    if (f.maxnreg != 0) out_ += "\n.maxnreg " + std::to_string(f.maxnreg);
    if (f.noreturn) out_ += "\n.noreturn";
  }

  // Unique names for everything declared in the body (nested blocks may reuse a name).
  Names MakeNames(const Function& f) {
    Names names;
    std::unordered_set<std::string> used;
    for (const Variable& v : module_.globals) used.insert(v.name);
    for (const Function& g : module_.functions) used.insert(g.name);
    for (const Variable& v : f.params) used.insert(v.name);
    for (const Variable& v : f.returns) used.insert(v.name);
    auto unique = [&](const std::string& name) {
      std::string candidate = name;
      for (int n = 1; used.contains(candidate); ++n) candidate = name + "$" + std::to_string(n);
      used.insert(candidate);
      return candidate;
    };
    for (const Register& r : f.registers) names.registers.push_back(unique(r.name));
    for (const Variable& v : f.locals) names.locals.push_back(unique(v.name));
    return names;
  }

  void FunctionDef(const Function& f) {
    Names names = MakeNames(f);
    names_ = &names;
    out_ += "\n";
    Header(f);
    out_ += "\n{\n";
    // Registers: runs named P0..P(n-1) of one type become `.reg .t P<n>`.
    for (size_t i = 0; i < f.registers.size();) {
      const std::string& name = names.registers[i];
      size_t run = 0;
      if (name.size() > 1 && name.back() == '0' &&
          !(name[name.size() - 2] >= '0' && name[name.size() - 2] <= '9')) {
        const std::string prefix = name.substr(0, name.size() - 1);
        while (i + run < f.registers.size() && f.registers[i + run].type == f.registers[i].type &&
               names.registers[i + run] == prefix + std::to_string(run)) {
          ++run;
        }
        if (run > 1) {
          out_ += "\t.reg ." + std::string(TypeName(f.registers[i].type)) + " " + prefix + "<" +
                  std::to_string(run) + ">;\n";
          i += run;
          continue;
        }
      }
      out_ += "\t.reg ." + std::string(TypeName(f.registers[i].type)) + " " + name + ";\n";
      ++i;
    }
    for (size_t i = 0; i < f.locals.size(); ++i) {
      out_ += "\t";
      VariableDecl(f.locals[i], &names.locals[i]);
      out_ += ";\n";
    }
    std::vector<const Label*> labels;
    for (const Label& l : f.labels) labels.push_back(&l);
    std::stable_sort(labels.begin(), labels.end(),
                     [](const Label* a, const Label* b) { return a->target < b->target; });
    size_t next_label = 0;
    for (size_t i = 0; i <= f.body.size(); ++i) {
      while (next_label < labels.size() && labels[next_label]->target == i) {
        out_ += labels[next_label++]->name + ":\n";
      }
      if (i == f.body.size()) break;
      out_ += "\t";
      InstructionText(f, f.body[i]);
      out_ += "\n";
    }
    out_ += "}\n";
    names_ = nullptr;
  }

  std::string SymbolName(const Function& f, const Symbol& s) {
    switch (s.kind) {
      case Symbol::Kind::kGlobal:
        return module_.globals[s.index].name;
      case Symbol::Kind::kParam:
        return f.params[s.index].name;
      case Symbol::Kind::kReturn:
        return f.returns[s.index].name;
      case Symbol::Kind::kLocal:
        return names_->locals[s.index];
      case Symbol::Kind::kFunction:
        return module_.functions[s.index].name;
      case Symbol::Kind::kNone:
        break;
    }
    return "?";
  }

  void OperandText(const Function& f, const Operand& op) {
    switch (op.kind) {
      case OperandKind::kRegister:
        if (op.negated) out_ += "!";
        out_ += names_->registers[op.reg];
        return;
      case OperandKind::kRegisterPair:
        out_ += names_->registers[op.reg] + "|" + names_->registers[op.reg2];
        return;
      case OperandKind::kSink:
        out_ += "_";
        return;
      case OperandKind::kSpecial:
        out_ += SpecialRegisterName(op.sreg);
        if (SpecialRegisterHasComponent(op.sreg))
          out_ += "." + std::string(1, "xyz"[op.component % 3]);
        return;
      case OperandKind::kImmediate:
        out_ += ImmediateText(op.imm_kind, op.imm_bits);
        return;
      case OperandKind::kAddress:
        out_ += "[";
        if (op.base == AddressBase::kRegister) {
          out_ += names_->registers[op.reg] + OffsetText(op.offset);
        } else if (op.base == AddressBase::kSymbol) {
          out_ += SymbolName(f, op.symbol) + OffsetText(op.offset);
        } else {
          out_ += std::to_string(op.offset);
        }
        out_ += "]";
        return;
      case OperandKind::kSymbol:
        out_ += SymbolName(f, op.symbol) + OffsetText(op.offset);
        return;
      case OperandKind::kLabel:
        out_ += f.labels[op.label].name;
        return;
      case OperandKind::kVector:
        out_ += "{";
        for (size_t i = 0; i < op.elements.size(); ++i) {
          if (i != 0) out_ += ", ";
          OperandText(f, op.elements[i]);
        }
        out_ += "}";
        return;
      case OperandKind::kNone:
        return;
    }
  }

  void InstructionText(const Function& f, const ptx::Instruction& inst) {
    if (inst.guard.present()) {
      out_ += inst.guard.negated ? "@!" : "@";
      out_ += names_->registers[inst.guard.reg] + " ";
    }
    out_ += InstructionMnemonic(inst);
    if (inst.opcode == Opcode::kCall) {
      out_ += " ";
      if (inst.call_results > 0) {
        out_ += "(";
        for (uint32_t i = 0; i < inst.call_results; ++i) {
          if (i != 0) out_ += ", ";
          OperandText(f, inst.operands[i]);
        }
        out_ += "), ";
      }
      out_ += module_.functions[inst.callee].name + ", (";
      for (size_t i = inst.call_results; i < inst.operands.size(); ++i) {
        if (i != inst.call_results) out_ += ", ";
        OperandText(f, inst.operands[i]);
      }
      out_ += ");";
      return;
    }
    for (size_t i = 0; i < inst.operands.size(); ++i) {
      out_ += i == 0 ? " " : ", ";
      OperandText(f, inst.operands[i]);
    }
    out_ += ";";
  }

  const ptx::Module& module_;
  const Names* names_ = nullptr;
  std::string out_;
};

}  // namespace

std::string PrintModule(const Module& module) { return Printer(module).PrintAll(); }

std::string PrintInstruction(const Module& module, const Function& function,
                             const Instruction& inst) {
  return Printer(module).PrintOne(function, inst);
}

}  // namespace gpuvm::ptx
