#include "gpu/isa/module.h"

#include <cstring>

#include "gpu/isa/encoding.h"

namespace gpuvm::isa {
namespace {

// Layout (all little-endian; docs/ISA.md "Module image"):
//   header (64): magic, u16 version, u16 header_bytes, u32 total_bytes, u32 kernel_count,
//                u32 global_count, u32 const_bytes, u32 kernels_offset, u32 globals_offset,
//                u32 const_offset, reserved zero to 0x40
//   kernel entry (32): u32 name_offset, u32 name_bytes, u32 image_offset (8-aligned), u32
//   image_bytes,
//                      u32 param_count, u32 params_offset, u64 reserved
//   param entry (12): u32 offset, u32 size, u32 align
//   global entry (40): u32 name_offset, u32 name_bytes, u64 size, u32 align, u32 init_offset,
//                      u32 init_bytes, u32 reloc_count, u32 relocs_offset, u32 reserved
//   relocation entry (24): u32 offset, u32 size, u32 target, u32 reserved, i64 addend
constexpr uint32_t kKernelEntryBytes = 32;
constexpr uint32_t kParamEntryBytes = 12;
constexpr uint32_t kGlobalEntryBytes = 40;
constexpr uint32_t kRelocEntryBytes = 24;

class Writer {
 public:
  explicit Writer(size_t reserve) { bytes_.resize(reserve); }
  uint32_t Append(const void* data, size_t n, size_t align = 1) {
    Align(align);
    uint32_t at = static_cast<uint32_t>(bytes_.size());
    bytes_.resize(bytes_.size() + n);
    if (n) memcpy(bytes_.data() + at, data, n);
    return at;
  }
  uint32_t Reserve(size_t n, size_t align = 8) {
    Align(align);
    uint32_t at = static_cast<uint32_t>(bytes_.size());
    bytes_.resize(bytes_.size() + n);
    return at;
  }
  template <typename T>
  void Put(uint32_t at, T v) {
    memcpy(bytes_.data() + at, &v, sizeof v);
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  void Align(size_t align) {
    while (bytes_.size() % align) bytes_.push_back(0);
  }
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  bool Get(uint64_t at, T* v) const {
    if (at > b_.size() || b_.size() - at < sizeof(T)) return false;
    memcpy(v, b_.data() + at, sizeof(T));
    return true;
  }
  bool Range(uint64_t at, uint64_t n) const { return at <= b_.size() && b_.size() - at >= n; }
  std::span<const uint8_t> Slice(uint64_t at, uint64_t n) const { return b_.subspan(at, n); }

 private:
  std::span<const uint8_t> b_;
};

Status Bad(const std::string& what) { return Status::InvalidArgument("module image: " + what); }

}  // namespace

const ModuleKernel* Module::FindKernel(std::string_view name) const {
  for (const ModuleKernel& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

Result<std::vector<uint8_t>> EncodeModule(const Module& m) {
  if (m.kernels.size() > kMaxModuleKernels || m.globals.size() > kMaxModuleGlobals ||
      m.const_image.size() > kMaxConstImageBytes) {
    return Bad("too many kernels/globals or constant bytes");
  }
  Writer w(kModuleHeaderBytes);
  const uint32_t kernels_at = w.Reserve(m.kernels.size() * kKernelEntryBytes);
  const uint32_t globals_at = w.Reserve(m.globals.size() * kGlobalEntryBytes);
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const ModuleKernel& k = m.kernels[i];
    GPUVM_RETURN_IF_ERROR(DecodeKernel(k.image).status().WithContext("kernel '" + k.name + "'"));
    const uint32_t e = kernels_at + static_cast<uint32_t>(i) * kKernelEntryBytes;
    w.Put<uint32_t>(e + 0, w.Append(k.name.data(), k.name.size()));
    w.Put<uint32_t>(e + 4, static_cast<uint32_t>(k.name.size()));
    w.Put<uint32_t>(e + 8, w.Append(k.image.data(), k.image.size(), 8));
    w.Put<uint32_t>(e + 12, static_cast<uint32_t>(k.image.size()));
    w.Put<uint32_t>(e + 16, static_cast<uint32_t>(k.params.size()));
    const uint32_t params_at = w.Reserve(k.params.size() * kParamEntryBytes, 4);
    w.Put<uint32_t>(e + 20, params_at);
    for (size_t p = 0; p < k.params.size(); ++p) {
      const uint32_t pe = params_at + static_cast<uint32_t>(p) * kParamEntryBytes;
      w.Put<uint32_t>(pe + 0, k.params[p].offset);
      w.Put<uint32_t>(pe + 4, k.params[p].size);
      w.Put<uint32_t>(pe + 8, k.params[p].align);
    }
  }
  for (size_t i = 0; i < m.globals.size(); ++i) {
    const ModuleGlobal& g = m.globals[i];
    const uint32_t e = globals_at + static_cast<uint32_t>(i) * kGlobalEntryBytes;
    w.Put<uint32_t>(e + 0, w.Append(g.name.data(), g.name.size()));
    w.Put<uint32_t>(e + 4, static_cast<uint32_t>(g.name.size()));
    w.Put<uint64_t>(e + 8, g.size);
    w.Put<uint32_t>(e + 16, g.align);
    w.Put<uint32_t>(e + 20, w.Append(g.init.data(), g.init.size()));
    w.Put<uint32_t>(e + 24, static_cast<uint32_t>(g.init.size()));
    w.Put<uint32_t>(e + 28, static_cast<uint32_t>(g.relocations.size()));
    const uint32_t relocs_at = w.Reserve(g.relocations.size() * kRelocEntryBytes);
    w.Put<uint32_t>(e + 32, relocs_at);
    for (size_t r = 0; r < g.relocations.size(); ++r) {
      const ModuleRelocation& rel = g.relocations[r];
      const uint32_t re = relocs_at + static_cast<uint32_t>(r) * kRelocEntryBytes;
      w.Put<uint32_t>(re + 0, rel.offset);
      w.Put<uint32_t>(re + 4, rel.size);
      w.Put<uint32_t>(re + 8, rel.target);
      w.Put<int64_t>(re + 16, rel.addend);
    }
  }
  const uint32_t const_at = w.Append(m.const_image.data(), m.const_image.size(), 8);
  if (w.size() > 0xffffffffu) return Bad("larger than 4 GiB");
  w.Put<uint32_t>(0x00, kModuleMagic);
  w.Put<uint16_t>(0x04, kVersion);
  w.Put<uint16_t>(0x06, static_cast<uint16_t>(kModuleHeaderBytes));
  w.Put<uint32_t>(0x08, static_cast<uint32_t>(w.size()));
  w.Put<uint32_t>(0x0c, static_cast<uint32_t>(m.kernels.size()));
  w.Put<uint32_t>(0x10, static_cast<uint32_t>(m.globals.size()));
  w.Put<uint32_t>(0x14, static_cast<uint32_t>(m.const_image.size()));
  w.Put<uint32_t>(0x18, kernels_at);
  w.Put<uint32_t>(0x1c, globals_at);
  w.Put<uint32_t>(0x20, const_at);
  std::vector<uint8_t> out = w.Take();
  // The decoder is the specification: an encoded module always decodes.
  GPUVM_RETURN_IF_ERROR(DecodeModule(out).status());
  return out;
}

Result<Module> DecodeModule(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  uint32_t magic = 0, total = 0, nk = 0, ng = 0, const_bytes = 0, kat = 0, gat = 0, cat = 0;
  uint16_t version = 0, header_bytes = 0;
  if (!r.Get(0x00, &magic) || !r.Get(0x04, &version) || !r.Get(0x06, &header_bytes) ||
      !r.Get(0x08, &total) || !r.Get(0x0c, &nk) || !r.Get(0x10, &ng) ||
      !r.Get(0x14, &const_bytes) || !r.Get(0x18, &kat) || !r.Get(0x1c, &gat) ||
      !r.Get(0x20, &cat) || bytes.size() < kModuleHeaderBytes) {
    return Bad("shorter than its header");
  }
  if (magic != kModuleMagic) return Bad("bad magic");
  if (version != kVersion || header_bytes != kModuleHeaderBytes)
    return Bad("unsupported version or header");
  if (total != bytes.size()) return Bad("size field does not match the image");
  for (uint32_t i = 0x24; i < kModuleHeaderBytes; ++i) {
    if (bytes[i] != 0) return Bad("reserved header bytes are not zero");
  }
  if (nk > kMaxModuleKernels || ng > kMaxModuleGlobals || const_bytes > kMaxConstImageBytes) {
    return Bad("too many kernels/globals or constant bytes");
  }
  if (!r.Range(kat, uint64_t{nk} * kKernelEntryBytes) ||
      !r.Range(gat, uint64_t{ng} * kGlobalEntryBytes) || !r.Range(cat, const_bytes)) {
    return Bad("a table lies outside the image");
  }
  Module m;
  auto name_at = [&](uint32_t off, uint32_t n, std::string* out) {
    if (n > 4096 || !r.Range(off, n)) return false;
    std::span<const uint8_t> s = r.Slice(off, n);
    out->assign(s.begin(), s.end());
    return true;
  };
  m.kernels.resize(nk);
  for (uint32_t i = 0; i < nk; ++i) {
    const uint64_t e = kat + uint64_t{i} * kKernelEntryBytes;
    uint32_t name_off = 0, name_n = 0, img_off = 0, img_n = 0, pc = 0, pat = 0;
    uint64_t reserved = 0;
    r.Get(e + 0, &name_off);
    r.Get(e + 4, &name_n);
    r.Get(e + 8, &img_off);
    r.Get(e + 12, &img_n);
    r.Get(e + 16, &pc);
    r.Get(e + 20, &pat);
    r.Get(e + 24, &reserved);
    ModuleKernel& k = m.kernels[i];
    if (!name_at(name_off, name_n, &k.name)) return Bad("kernel name out of bounds");
    if (reserved != 0) return Bad("reserved kernel entry bytes");
    if (img_off % 8 != 0 || !r.Range(img_off, img_n)) return Bad("kernel image out of bounds");
    if (pc > 1024 || !r.Range(pat, uint64_t{pc} * kParamEntryBytes))
      return Bad("parameter table out of bounds");
    k.image.assign(bytes.begin() + img_off, bytes.begin() + img_off + img_n);
    GPUVM_RETURN_IF_ERROR(DecodeKernel(k.image).status().WithContext("kernel '" + k.name + "'"));
    for (uint32_t p = 0; p < pc; ++p) {
      ModuleParam param;
      r.Get(pat + p * kParamEntryBytes + 0, &param.offset);
      r.Get(pat + p * kParamEntryBytes + 4, &param.size);
      r.Get(pat + p * kParamEntryBytes + 8, &param.align);
      if (uint64_t{param.offset} + param.size > kMaxParamBytes)
        return Bad("parameter outside bank 0");
      k.params.push_back(param);
    }
  }
  m.globals.resize(ng);
  for (uint32_t i = 0; i < ng; ++i) {
    const uint64_t e = gat + uint64_t{i} * kGlobalEntryBytes;
    uint32_t name_off = 0, name_n = 0, init_off = 0, init_n = 0, rc = 0, rat = 0, reserved = 0;
    ModuleGlobal& g = m.globals[i];
    r.Get(e + 0, &name_off);
    r.Get(e + 4, &name_n);
    r.Get(e + 8, &g.size);
    r.Get(e + 16, &g.align);
    r.Get(e + 20, &init_off);
    r.Get(e + 24, &init_n);
    r.Get(e + 28, &rc);
    r.Get(e + 32, &rat);
    r.Get(e + 36, &reserved);
    if (!name_at(name_off, name_n, &g.name)) return Bad("global name out of bounds");
    if (reserved != 0) return Bad("reserved global entry bytes");
    if (g.align == 0 || (g.align & (g.align - 1)) != 0 || g.align > 4096)
      return Bad("global alignment");
    if (init_n > g.size || !r.Range(init_off, init_n))
      return Bad("global initializer out of bounds");
    if (rc > (1u << 20) || !r.Range(rat, uint64_t{rc} * kRelocEntryBytes))
      return Bad("relocations out of bounds");
    g.init.assign(bytes.begin() + init_off, bytes.begin() + init_off + init_n);
    for (uint32_t k = 0; k < rc; ++k) {
      ModuleRelocation rel;
      uint32_t res = 0;
      r.Get(rat + k * kRelocEntryBytes + 0, &rel.offset);
      r.Get(rat + k * kRelocEntryBytes + 4, &rel.size);
      r.Get(rat + k * kRelocEntryBytes + 8, &rel.target);
      r.Get(rat + k * kRelocEntryBytes + 12, &res);
      r.Get(rat + k * kRelocEntryBytes + 16, &rel.addend);
      if (res != 0 || (rel.size != 4 && rel.size != 8) || rel.target >= ng ||
          uint64_t{rel.offset} + rel.size > g.size) {
        return Bad("bad relocation in global '" + g.name + "'");
      }
      g.relocations.push_back(rel);
    }
  }
  m.const_image.assign(bytes.begin() + cat, bytes.begin() + cat + const_bytes);
  return m;
}

}  // namespace gpuvm::isa
