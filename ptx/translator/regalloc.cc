#include "ptx/translator/regalloc.h"

#include <algorithm>
#include <bitset>
#include <cstdlib>

#include "base/align.h"
#include "gpu/isa/opcode_table.h"

namespace gpuvm::ptx::translator {
namespace {

using isa::Opcode;

// A set of vreg ids.
class BitSet {
 public:
  explicit BitSet(size_t n = 0) : words_((n + 63) / 64, 0) {}
  void Set(uint32_t i) { words_[i >> 6] |= uint64_t{1} << (i & 63); }
  void Clear(uint32_t i) { words_[i >> 6] &= ~(uint64_t{1} << (i & 63)); }
  bool Test(uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  // this |= other; returns whether anything changed.
  bool Union(const BitSet& o) {
    bool changed = false;
    for (size_t i = 0; i < words_.size(); ++i) {
      uint64_t w = words_[i] | o.words_[i];
      changed |= w != words_[i];
      words_[i] = w;
    }
    return changed;
  }
  template <typename F>
  void ForEach(F f) const {
    for (size_t i = 0; i < words_.size(); ++i) {
      for (uint64_t w = words_[i]; w; w &= w - 1)
        f(static_cast<uint32_t>(i * 64 + __builtin_ctzll(w)));
    }
  }

 private:
  std::vector<uint64_t> words_;
};

const isa::OpcodeInfo& Info(Opcode op) {
  // The translator emits table opcodes only; a nullptr here is a translator bug.
  const isa::OpcodeInfo* info = isa::FindOpcode(op);
  if (info == nullptr) abort();
  return *info;
}

bool IsTerminator(const VInst& v) { return Info(v.in.op).Has(isa::kEndsKernel) && v.guard == kPT; }

// Operations whose only effect is their register destination (removable when it is dead).
bool IsPure(Opcode op) { return Info(op).IsPure(); }

class Allocator {
 public:
  Allocator(const VCode& vc, const isa::KernelHeader& header, const std::string& where)
      : vc_(vc), header_(header), where_(where), n_(static_cast<uint32_t>(vc.code.size())) {}

  Result<isa::Kernel> Run(AllocationStats* stats) {
    if (n_ == 0) return Status::Internal(where_ + ": no code");
    bool calls = false;
    for (const VInst& v : vc_.code) calls |= v.in.op == Opcode::kCall;
    std::vector<uint64_t> save_bytes(vc_.region_fixed.size(), 0);
    if (calls) {
      first_row_ = 1;  // row 0 is the link register
      GPUVM_RETURN_IF_ERROR(ResolveTargets());
      BuildBlocks();
      Liveness();
      InsertSaves(&save_bytes);
      Reset();
    }
    // Frame sizes are known now: patch the offsets that depend on them.
    std::vector<uint64_t> frame(vc_.region_fixed.size());
    for (size_t r = 0; r < frame.size(); ++r)
      frame[r] = AlignUp(vc_.region_fixed[r] + save_bytes[r], 16);
    for (VInst& v : vc_.code) {
      if (v.frame_region >= 0 && static_cast<size_t>(v.frame_region) < frame.size() &&
          v.in.op != Opcode::kCall) {
        v.in.imm += frame[v.frame_region];
        v.in.has_imm = v.in.imm != 0 || v.in.op == Opcode::kAdd || v.in.op == Opcode::kSub;
      }
    }
    uint64_t local = calls ? frame[0] + vc_.stack_bytes : AlignUp(vc_.region_fixed[0], 8);
    local = std::max<uint64_t>(local, header_.local_bytes);
    if (local > isa::kMaxLocalBytes) {
      if (!calls) {
        return Status::ResourceExhausted(where_ + ": local memory beyond " +
                                         std::to_string(isa::kMaxLocalBytes) + " bytes per thread");
      }
      local = isa::kMaxLocalBytes;  // a smaller call stack; overflowing it faults cleanly
      if (frame[0] + 256 > local) {
        return Status::ResourceExhausted(where_ + ": no room for a call stack in local memory");
      }
    }
    header_.local_bytes = static_cast<uint32_t>(local);
    GPUVM_RETURN_IF_ERROR(ResolveTargets());
    BuildBlocks();
    Liveness();
    Intervals();
    GPUVM_RETURN_IF_ERROR(Assign());
    return Emit(stats);
  }

 private:
  void Reset() {
    n_ = static_cast<uint32_t>(vc_.code.size());
    target_.clear();
    starts_.clear();
    ends_.clear();
    block_of_.clear();
    succ_.clear();
    live_in_.clear();
    live_out_.clear();
  }

  // The vregs live just before instruction j (walks j's block backwards from its live-out set).
  BitSet LiveBefore(uint32_t j) const {
    const uint32_t b = block_of_[j];
    BitSet live = live_out_[b];
    for (uint32_t i = ends_[b]; i-- > j;) {
      const VInst& v = vc_.code[i];
      Defs(v, [&](uint32_t r) {
        if (!PartialDef(v)) live.Clear(r);
      });
      Uses(v, [&](uint32_t r) { live.Set(r); });
    }
    return live;
  }

  // Caller-saves: around every call (the sequence `add sp; call; sub sp` the translator emits), the
  // values live across it are stored to the caller's frame before and loaded back after, each with
  // its own width, so every lane saves exactly its own values even when the warp is diverged.
  void InsertSaves(std::vector<uint64_t>* save_bytes) {
    std::vector<std::vector<VInst>> before(n_), after(n_);
    for (uint32_t i = 0; i < n_; ++i) {
      const VInst& call = vc_.code[i];
      if (call.in.op != Opcode::kCall) continue;
      const int32_t region = call.frame_region;
      if (i == 0 || i + 1 >= n_ || region < 0)
        continue;  // not the translator's sequence (cannot happen)
      BitSet live = LiveBefore(i + 1);
      live.Clear(vc_.sp);
      uint64_t offset = 0;
      std::vector<VInst>& saves = before[i - 1];
      std::vector<VInst>& loads = after[i + 1];
      const uint64_t base = vc_.region_fixed[region];
      live.ForEach([&](uint32_t r) {
        const VKind kind = vc_.vregs[r].kind;
        const bool wide = kind == VKind::kReg64;
        offset = AlignUp(offset, wide ? 8 : 4);
        const uint64_t at = base + offset;
        offset += wide ? 8 : 4;
        auto mem = [&](Opcode op, uint32_t value, isa::Type t) {
          VInst m;
          m.in.op = op;
          m.in.type = t;
          m.in.mod = static_cast<uint8_t>(isa::Space::kLocal);
          m.a = vc_.sp;
          m.in.has_imm = at != 0;
          m.in.imm = at;
          m.line = call.line;
          if (op == Opcode::kSt) {
            m.b = value;
          } else {
            m.d = value;
          }
          return m;
        };
        if (kind != VKind::kPred) {
          const isa::Type t = wide ? isa::Type::kU64 : isa::Type::kU32;
          saves.push_back(mem(Opcode::kSt, r, t));
          loads.push_back(mem(Opcode::kLd, r, t));
          return;
        }
        // A predicate travels as 0/1 in a temporary register.
        const uint32_t one = vc_.NewVReg(VKind::kReg32, true);
        const uint32_t bit = vc_.NewVReg(VKind::kReg32, true);
        VInst mov;
        mov.in.op = Opcode::kMov;
        mov.in.type = isa::Type::kU32;
        mov.in.has_imm = true;
        mov.in.imm = 1;
        mov.d = one;
        saves.push_back(mov);
        VInst sel;
        sel.in.op = Opcode::kSel;
        sel.in.type = isa::Type::kU32;
        sel.d = bit;
        sel.a = one;
        sel.c = r;
        sel.in.has_imm = true;
        sel.in.imm = 0;
        saves.push_back(sel);
        saves.push_back(mem(Opcode::kSt, bit, isa::Type::kU32));
        const uint32_t back = vc_.NewVReg(VKind::kReg32, true);
        loads.push_back(mem(Opcode::kLd, back, isa::Type::kU32));
        VInst setp;
        setp.in.op = Opcode::kSetp;
        setp.in.type = isa::Type::kU32;
        setp.in.mod = static_cast<uint8_t>(isa::Compare::kNe);
        setp.d = r;
        setp.a = back;
        setp.in.has_imm = true;
        setp.in.imm = 0;
        loads.push_back(setp);
      });
      (*save_bytes)[region] = std::max((*save_bytes)[region], offset);
    }
    // Rebuild: saves go before the instruction they precede (labels there run them too); loads
    // after.
    std::vector<VInst> code;
    std::vector<uint32_t> index(n_ + 1);
    for (uint32_t i = 0; i < n_; ++i) {
      index[i] = static_cast<uint32_t>(code.size());
      for (VInst& v : before[i]) code.push_back(v);
      code.push_back(vc_.code[i]);
      for (VInst& v : after[i]) code.push_back(v);
    }
    index[n_] = static_cast<uint32_t>(code.size());
    for (uint32_t& pos : vc_.label_pos) {
      if (pos != kNoV) pos = index[pos];
    }
    vc_.code = std::move(code);
  }

  bool PartialDef(const VInst& v) const {
    return v.guard != kPT && IsVReg(v.d) && !vc_.vregs[v.d].temp;
  }
  // A pair load (isa::kModPair) defines b as well as d.
  static bool PairLoad(const VInst& v) {
    return v.in.op == Opcode::kLd && (v.in.mod & isa::kModPair) != 0;
  }
  template <typename F>
  void Uses(const VInst& v, F f) const {
    const bool pair_load = PairLoad(v);
    for (uint32_t s : {v.a, pair_load ? kNoV : v.b, v.c, v.m, v.guard}) {
      if (IsVReg(s)) f(s);
    }
    if (PartialDef(v)) f(v.d);
    if (pair_load && v.guard != kPT && IsVReg(v.b) && !vc_.vregs[v.b].temp) f(v.b);
    if (v.guard != kPT && IsVReg(v.shfl_pred)) f(v.shfl_pred);
  }
  template <typename F>
  void Defs(const VInst& v, F f) const {
    if (IsVReg(v.d)) f(v.d);
    if (PairLoad(v) && IsVReg(v.b)) f(v.b);
    if (IsVReg(v.shfl_pred)) f(v.shfl_pred);
  }

  Status ResolveTargets() {
    target_.assign(n_, kNoV);
    for (uint32_t i = 0; i < n_; ++i) {
      const VInst& v = vc_.code[i];
      if (!Info(v.in.op).HasTarget()) continue;
      if (v.label >= vc_.label_pos.size() || vc_.label_pos[v.label] >= n_) {
        return Status::Internal(where_ + ": branch to an unbound label");
      }
      target_[i] = vc_.label_pos[v.label];
    }
    if (!IsTerminator(vc_.code.back()))
      return Status::Internal(where_ + ": code does not end in exit");
    return Status::Ok();
  }

  void BuildBlocks() {
    std::vector<bool> leader(n_ + 1, false);
    leader[0] = true;
    for (uint32_t i = 0; i < n_; ++i) {
      const VInst& v = vc_.code[i];
      if (v.in.op == Opcode::kBra) {
        leader[target_[i]] = true;
        leader[i + 1] = true;
      } else if (v.in.op == Opcode::kCall) {
        leader[target_[i]] = true;  // a function entry (reached only through calls: no CFG edge)
      } else if (IsTerminator(v)) {
        leader[i + 1] = true;
      }
    }
    block_of_.assign(n_, 0);
    for (uint32_t i = 0; i < n_; ++i) {
      if (leader[i]) starts_.push_back(i);
      block_of_[i] = static_cast<uint32_t>(starts_.size() - 1);
    }
    const uint32_t nb = static_cast<uint32_t>(starts_.size());
    ends_.resize(nb);
    succ_.resize(nb);
    for (uint32_t b = 0; b < nb; ++b) {
      ends_[b] = b + 1 < nb ? starts_[b + 1] : n_;
      const uint32_t last = ends_[b] - 1;
      const VInst& v = vc_.code[last];
      if (v.in.op == Opcode::kBra) succ_[b].push_back(block_of_[target_[last]]);
      if (!IsTerminator(v) && last + 1 < n_) succ_[b].push_back(block_of_[last + 1]);
    }
  }

  void Liveness() {
    const uint32_t nb = static_cast<uint32_t>(starts_.size());
    const size_t nv = vc_.vregs.size();
    std::vector<BitSet> use(nb, BitSet(nv)), def(nb, BitSet(nv));
    live_in_.assign(nb, BitSet(nv));
    live_out_.assign(nb, BitSet(nv));
    for (uint32_t b = 0; b < nb; ++b) {
      for (uint32_t i = starts_[b]; i < ends_[b]; ++i) {
        const VInst& v = vc_.code[i];
        Uses(v, [&](uint32_t r) {
          if (!def[b].Test(r)) use[b].Set(r);
        });
        Defs(v, [&](uint32_t r) { def[b].Set(r); });
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t b = nb; b-- > 0;) {
        for (uint32_t s : succ_[b]) live_out_[b].Union(live_in_[s]);
        BitSet in = use[b];
        // in |= out - def
        BitSet out_minus = live_out_[b];
        def[b].ForEach([&](uint32_t r) { out_minus.Clear(r); });
        in.Union(out_minus);
        changed |= live_in_[b].Union(in);
      }
    }
  }

  // Positions: 2i = instruction i reads, 2i+1 = instruction i writes.
  void Extend(uint32_t v, uint32_t pos) {
    start_[v] = std::min(start_[v], pos);
    end_[v] = std::max(end_[v], pos);
  }

  void Intervals() {
    const size_t nv = vc_.vregs.size();
    start_.assign(nv, UINT32_MAX);
    end_.assign(nv, 0);
    uses_.assign(nv, 0);
    for (uint32_t b = 0; b < starts_.size(); ++b) {
      BitSet live = live_out_[b];
      for (uint32_t i = ends_[b]; i-- > starts_[b];) {
        const VInst& v = vc_.code[i];
        live.ForEach([&](uint32_t r) { Extend(r, 2 * i + 1); });
        Defs(v, [&](uint32_t r) {
          Extend(r, 2 * i + 1);
          live.Clear(r);
        });
        Uses(v, [&](uint32_t r) {
          live.Set(r);
          ++uses_[r];
        });
        live.ForEach([&](uint32_t r) { Extend(r, 2 * i); });
      }
    }
    // Coalescing hints: d = a copies whose source dies at the copy.
    hint_.assign(nv, kNoV);
    for (uint32_t i = 0; i < n_; ++i) {
      const VInst& v = vc_.code[i];
      if (v.in.op == Opcode::kMov && !v.in.has_imm && v.guard == kPT && IsVReg(v.d) &&
          IsVReg(v.a) && vc_.vregs[v.d].kind == vc_.vregs[v.a].kind) {
        hint_[v.d] = v.a;
      }
    }
  }

  Status Assign() {
    const size_t nv = vc_.vregs.size();
    slot_.assign(nv, kNoV);
    std::vector<uint32_t> order;
    for (uint32_t v = 0; v < nv; ++v) {
      if (start_[v] == UINT32_MAX) continue;  // never appears
      if (vc_.vregs[v].kind != VKind::kPred && uses_[v] == 0) {
        slot_[v] = kRZ;  // written, never read: the write goes to the sink
        continue;
      }
      order.push_back(v);
    }
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      return start_[x] != start_[y] ? start_[x] < start_[y] : x < y;
    });
    std::bitset<isa::kMaxRegisters> rows_busy;
    std::bitset<isa::kMaxPredicates> preds_busy;
    std::vector<uint32_t> active;  // allocated vregs whose interval may still be open
    for (uint32_t v : order) {
      // Expire intervals that ended before this one starts.
      for (size_t k = 0; k < active.size();) {
        uint32_t w = active[k];
        if (end_[w] < start_[v]) {
          Release(w, rows_busy, preds_busy);
          active[k] = active.back();
          active.pop_back();
        } else {
          ++k;
        }
      }
      const VKind kind = vc_.vregs[v].kind;
      uint32_t chosen = kNoV;
      const uint32_t h = hint_[v];
      if (h != kNoV && slot_[h] != kNoV && slot_[h] != kRZ && end_[h] + 1 == start_[v] &&
          vc_.vregs[h].kind == kind && Free(kind, slot_[h], rows_busy, preds_busy)) {
        chosen = slot_[h];
      }
      if (chosen == kNoV) {
        if (kind == VKind::kPred) {
          for (uint32_t p = 0; p < isa::kMaxPredicates; ++p) {
            if (!preds_busy.test(p)) {
              chosen = p;
              break;
            }
          }
        } else {
          const uint32_t rows = kind == VKind::kReg64 ? 2 : 1;
          for (uint32_t r = first_row_; r + rows <= isa::kMaxRegisters; ++r) {
            if (Free(kind, r, rows_busy, preds_busy)) {
              chosen = r;
              break;
            }
          }
        }
      }
      if (chosen == kNoV) {
        const uint32_t at = std::min<uint32_t>(start_[v] / 2, n_ - 1);
        return Status::ResourceExhausted(
            "line " + std::to_string(vc_.code[at].line) + ": " + where_ + ": more than " +
            (kind == VKind::kPred ? std::to_string(isa::kMaxPredicates) + " predicates"
                                  : std::to_string(isa::kMaxRegisters) + " 32-bit registers") +
            " live at once (spilling is not supported)");
      }
      slot_[v] = chosen;
      if (kind == VKind::kPred) {
        preds_busy.set(chosen);
        max_pred_ = std::max(max_pred_, chosen + 1);
      } else {
        const uint32_t rows = kind == VKind::kReg64 ? 2 : 1;
        for (uint32_t k = 0; k < rows; ++k) rows_busy.set(chosen + k);
        max_row_ = std::max(max_row_, chosen + rows);
      }
      active.push_back(v);
    }
    return Status::Ok();
  }

  bool Free(VKind kind, uint32_t slot, const std::bitset<isa::kMaxRegisters>& rows,
            const std::bitset<isa::kMaxPredicates>& preds) const {
    if (kind == VKind::kPred) return slot < isa::kMaxPredicates && !preds.test(slot);
    const uint32_t n = kind == VKind::kReg64 ? 2 : 1;
    if (slot + n > isa::kMaxRegisters) return false;
    for (uint32_t k = 0; k < n; ++k) {
      if (rows.test(slot + k)) return false;
    }
    return true;
  }
  void Release(uint32_t v, std::bitset<isa::kMaxRegisters>& rows,
               std::bitset<isa::kMaxPredicates>& preds) const {
    const VKind kind = vc_.vregs[v].kind;
    if (kind == VKind::kPred) {
      preds.reset(slot_[v]);
      return;
    }
    const uint32_t n = kind == VKind::kReg64 ? 2 : 1;
    for (uint32_t k = 0; k < n; ++k) rows.reset(slot_[v] + k);
  }

  uint8_t Field(uint32_t s, bool pred) const {
    if (s == kNoV) return 0;
    if (s == kRZ) return isa::kRegZero;
    if (s == kLink) return 0;  // row 0 is reserved for the link register
    if (s == kPT) return isa::kPredTrue;
    uint32_t mapped = slot_[s];
    if (mapped == kRZ) return isa::kRegZero;
    (void)pred;
    return static_cast<uint8_t>(mapped);
  }

  Result<isa::Kernel> Emit(AllocationStats* stats) {
    isa::Kernel kernel;
    kernel.header = header_;
    kernel.header.reg_count = static_cast<uint16_t>(std::max(max_row_, first_row_));
    kernel.header.pred_count = static_cast<uint8_t>(max_pred_);
    std::vector<isa::Instruction> out(n_);
    std::vector<bool> keep(n_, true);
    uint32_t removed_moves = 0;
    for (uint32_t i = 0; i < n_; ++i) {
      const VInst& v = vc_.code[i];
      isa::Instruction in = v.in;
      const bool d_pred = IsVReg(v.d) && vc_.vregs[v.d].kind == VKind::kPred;
      if (v.d != kNoV) in.d = Field(v.d, d_pred);
      if (v.a != kNoV) in.a = Field(v.a, false);
      if (v.b != kNoV) in.b = Field(v.b, false);
      if (v.c != kNoV) in.c = Field(v.c, false);
      if (v.m != kNoV) in.mod = Field(v.m, false);
      in.guard = Field(v.guard, true);
      if (Info(in.op).HasTarget()) in.has_imm = true;  // target in the extension word
      if (in.op == Opcode::kShfl) {
        const uint64_t p = v.shfl_pred == kNoV ? isa::kPredTrue : Field(v.shfl_pred, true);
        in.imm = (in.imm & ~(uint64_t{0x3f} << 48)) | (p << 48);
      }
      out[i] = in;
      const bool dead = IsVReg(v.d) && slot_[v.d] == kRZ;
      if (dead && IsPure(in.op)) {
        keep[i] = false;
      } else if (in.op == Opcode::kMov && !in.has_imm && in.guard == isa::kPredTrue &&
                 in.d == in.a) {
        keep[i] = false;
        ++removed_moves;
      }
    }
    // New indices; a removed instruction's index maps to the next kept one (branch targets follow).
    std::vector<uint32_t> index(n_ + 1);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_; ++i) {
      index[i] = k;
      if (keep[i]) ++k;
    }
    index[n_] = k;
    for (uint32_t i = 0; i < n_; ++i) {
      if (!keep[i]) continue;
      isa::Instruction in = out[i];
      if (Info(in.op).HasTarget()) in.target = index[target_[i]];
      kernel.code.push_back(in);
    }
    for (size_t i = 0; i < kernel.code.size(); ++i) {
      Status s = isa::ValidateInstruction(kernel.code[i], kernel.header);
      if (!s.ok()) {
        return Status::Internal(where_ + ": translator produced an invalid instruction " +
                                std::to_string(i) + ": " + s.message());
      }
    }
    if (stats) {
      stats->rows = max_row_;
      stats->predicates = max_pred_;
      stats->moves_removed = removed_moves;
      stats->instructions = static_cast<uint32_t>(kernel.code.size());
    }
    return kernel;
  }

  VCode vc_;  // a copy: saves around calls are inserted into it
  isa::KernelHeader header_;
  const std::string where_;
  uint32_t n_;
  uint32_t first_row_ = 0;
  std::vector<uint32_t> target_;
  std::vector<uint32_t> starts_, ends_, block_of_;
  std::vector<std::vector<uint32_t>> succ_;
  std::vector<BitSet> live_in_, live_out_;
  std::vector<uint32_t> start_, end_, uses_, hint_, slot_;
  uint32_t max_row_ = 0;
  uint32_t max_pred_ = 0;
};

}  // namespace

Result<isa::Kernel> AllocateRegisters(const VCode& vcode, const isa::KernelHeader& header,
                                      const std::string& where, AllocationStats* stats) {
  return Allocator(vcode, header, where).Run(stats);
}

}  // namespace gpuvm::ptx::translator
