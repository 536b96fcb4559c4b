// The kernel corpus (kernel_corpus.h): kernel arguments, the verification of a case's final
// buffers, the registry of cases by name, and the embedded PTX. The cases themselves are in
// kernel_corpus_cases.cc and kernel_corpus_feature_cases.cc.
//
// Threading: the registry and the embedded PTX are immutable after first use (thread-safe statics).
#include "bench/kernels/kernel_corpus.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>

#include "bench/kernels/case_builder.h"
#include "bench/kernels/reference.h"

namespace gpuvm::kernels {
namespace internal {
struct EmbeddedPtx {
  const char* name;
  const char* text;
};
extern const EmbeddedPtx kEmbeddedPtx[];
extern const size_t kEmbeddedPtxCount;
}  // namespace internal

// ------------------------------------------------------------------------------------------------
// Arg

Arg Arg::Pointer(uint32_t buffer, int64_t offset) {
  Arg a;
  a.kind = Kind::kPointer;
  a.buffer = buffer;
  a.offset = offset;
  return a;
}
Arg Arg::PointerLow32(uint32_t buffer, int64_t offset) {
  Arg a = Pointer(buffer, offset);
  a.kind = Kind::kPointerLow32;
  return a;
}
Arg Arg::PointerHigh32(uint32_t buffer, int64_t offset) {
  Arg a = Pointer(buffer, offset);
  a.kind = Kind::kPointerHigh32;
  return a;
}
namespace {
template <typename T>
std::vector<uint8_t> RawBytes(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}
}  // namespace
Arg Arg::U32(uint32_t v) { return Bytes(RawBytes(v), 4); }
Arg Arg::S32(int32_t v) { return Bytes(RawBytes(v), 4); }
Arg Arg::F32(float v) { return Bytes(RawBytes(v), 4); }
Arg Arg::U64(uint64_t v) { return Bytes(RawBytes(v), 8); }
Arg Arg::Bytes(std::vector<uint8_t> bytes, uint32_t align) {
  Arg a;
  a.kind = Kind::kValue;
  a.bytes = std::move(bytes);
  a.align = align;
  return a;
}

uint32_t Arg::Size() const {
  switch (kind) {
    case Kind::kPointer:
      return 8;
    case Kind::kPointerLow32:
    case Kind::kPointerHigh32:
      return 4;
    case Kind::kValue:
      return static_cast<uint32_t>(bytes.size());
  }
  return 0;
}

uint32_t Arg::Align() const {
  if (kind != Kind::kValue) return Size();
  return align != 0 ? align : static_cast<uint32_t>(bytes.size());
}

void Arg::WriteTo(uint8_t* out, uint64_t buffer_address) const {
  const uint64_t address = buffer_address + static_cast<uint64_t>(offset);  // modulo 2^64
  switch (kind) {
    case Kind::kPointer:
      std::memcpy(out, &address, 8);
      return;
    case Kind::kPointerLow32: {
      const uint32_t low = static_cast<uint32_t>(address);
      std::memcpy(out, &low, 4);
      return;
    }
    case Kind::kPointerHigh32: {
      const uint32_t high = static_cast<uint32_t>(address >> 32);
      std::memcpy(out, &high, 4);
      return;
    }
    case Kind::kValue:
      if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
      return;
  }
}

// ------------------------------------------------------------------------------------------------
// Verification

namespace {

template <typename T>
T Load(const std::vector<uint8_t>& bytes, size_t index) {
  T v;
  std::memcpy(&v, bytes.data() + index * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
std::string CompareFloats(const Buffer& b, const std::vector<uint8_t>& got) {
  const size_t n = b.expected.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    const T g = Load<T>(got, i), w = Load<T>(b.expected, i);
    const Tolerance t = b.tolerances.empty() ? Tolerance{} : b.tolerances[i % b.tolerances.size()];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (t.abs == 0 && t.rel == 0) {
      ok = std::memcmp(&g, &w, sizeof(T)) == 0;
    } else {
      ok = std::fabs(static_cast<double>(g) - static_cast<double>(w)) <=
           t.abs + t.rel * std::fabs(static_cast<double>(w));
    }
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %zu: got %.17g, want %.17g (abs %.3g rel %.3g)", i,
                    static_cast<double>(g), static_cast<double>(w), t.abs, t.rel);
      return buf;
    }
  }
  return "";
}

std::string CompareExact(const Buffer& b, const std::vector<uint8_t>& got) {
  for (size_t i = 0; i + 4 <= b.expected.size(); i += 4) {
    uint32_t g, w;
    std::memcpy(&g, got.data() + i, 4);
    std::memcpy(&w, b.expected.data() + i, 4);
    if (g != w) {
      char buf[120];
      std::snprintf(buf, sizeof buf, "word %zu: got 0x%08x (%d), want 0x%08x (%d)", i / 4, g,
                    static_cast<int>(g), w, static_cast<int>(w));
      return buf;
    }
  }
  for (size_t i = b.expected.size() & ~size_t{3}; i < b.expected.size(); ++i) {
    if (got[i] != b.expected[i]) {
      return "byte " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(b.expected[i]);
    }
  }
  return "";
}

}  // namespace

Status Case::Verify(const std::vector<std::vector<uint8_t>>& final_contents) const {
  if (final_contents.size() != buffers.size()) {
    return Status::InvalidArgument(name + ": expected " + std::to_string(buffers.size()) +
                                   " buffers, got " + std::to_string(final_contents.size()));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    const std::vector<uint8_t>& got = final_contents[i];
    if (got.size() != b.initial.size()) {
      return Status::InvalidArgument(name + ": buffer '" + b.name + "' has " +
                                     std::to_string(got.size()) + " bytes, expected " +
                                     std::to_string(b.initial.size()));
    }
    std::string problem;
    switch (b.check) {
      case Check::kNone:
        break;
      case Check::kExact:
        problem = CompareExact(b, got);
        break;
      case Check::kF32:
        problem = CompareFloats<float>(b, got);
        break;
      case Check::kF64:
        problem = CompareFloats<double>(b, got);
        break;
      case Check::kCustom:
        problem = b.custom(got);
        break;
    }
    if (!problem.empty()) {
      return Status::DataLoss(name + ": buffer '" + b.name + "' " + problem);
    }
  }
  return Status::Ok();
}

namespace corpus_internal {

using Maker = void (*)(Case*, Size, Rng&);

const std::vector<std::pair<std::string, Maker>>& Makers() {
  static const auto* makers = new std::vector<std::pair<std::string, Maker>>{
      {"vector_add", [](Case* c, Size s, Rng& r) { VectorAddCase(c, s, r); }},
      {"madd", [](Case* c, Size s, Rng& r) { MaddCase(c, s, r, false); }},
      {"fmadd", [](Case* c, Size s, Rng& r) { MaddCase(c, s, r, true); }},
      {"mmul", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, false, false); }},
      {"mmul_tiled", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, false, true); }},
      {"fmmul", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, true, false); }},
      {"fmmul_tiled", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, true, true); }},
      {"reduce_sum", [](Case* c, Size s, Rng& r) { ReduceCase(c, s, r, false); }},
      {"reduce_sum_f32", [](Case* c, Size s, Rng& r) { ReduceCase(c, s, r, true); }},
      {"histogram_shared", [](Case* c, Size s, Rng& r) { HistogramCase(c, s, r, true); }},
      {"histogram_global", [](Case* c, Size s, Rng& r) { HistogramCase(c, s, r, false); }},
      {"loop", [](Case* c, Size s, Rng&) { LoopCase(c, s); }},
      {"backprop", [](Case* c, Size s, Rng& r) { BackpropCase(c, s, r); }},
      {"hotspot", [](Case* c, Size s, Rng& r) { HotspotCase(c, s, r); }},
      {"lud", [](Case* c, Size s, Rng& r) { LudCase(c, s, r); }},
      {"nn_distance", [](Case* c, Size s, Rng& r) { NnCase(c, s, r, false); }},
      {"nn_argmin", [](Case* c, Size s, Rng& r) { NnCase(c, s, r, true); }},
      {"srad", [](Case* c, Size s, Rng& r) { SradCase(c, s, r); }},
      {"nested_divergence", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 0); }},
      {"early_exit", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 1); }},
      {"barrier_loop", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 2); }},
      {"atomics_global", [](Case* c, Size s, Rng& r) { AtomicsGlobalCase(c, s, r); }},
      {"atomics_shared", [](Case* c, Size s, Rng& r) { AtomicsSharedCase(c, s, r); }},
      {"atomics_red", [](Case* c, Size s, Rng& r) { AtomicsRedCase(c, s, r); }},
      {"addr64_gather", [](Case* c, Size s, Rng& r) { Addr64Case(c, s, r, false); }},
      {"addr64_split", [](Case* c, Size s, Rng& r) { Addr64Case(c, s, r, true); }},
      {"calls", [](Case* c, Size s, Rng& r) { CallsCase(c, s, r, false); }},
      {"calls_recursive", [](Case* c, Size s, Rng& r) { CallsCase(c, s, r, true); }},
      {"f64_math", [](Case* c, Size s, Rng& r) { F64Case(c, s, r); }},
      {"warp_reduce", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 0); }},
      {"warp_shuffle", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 1); }},
      {"warp_vote", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 2); }},
      {"sreg", [](Case* c, Size s, Rng&) { SregCase(c, s); }},
      {"local_array", [](Case* c, Size s, Rng& r) { LocalArrayCase(c, s, r); }},
      {"math_f32", [](Case* c, Size s, Rng& r) { MathF32Case(c, s, r); }},
      {"cvt", [](Case* c, Size s, Rng& r) { CvtCase(c, s, r); }},
      {"bitops", [](Case* c, Size s, Rng& r) { BitopsCase(c, s, r); }},
  };
  return *makers;
}

}  // namespace corpus_internal

using corpus_internal::Makers;
using corpus_internal::Rng;

const std::vector<std::string>& CaseNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const auto& [name, maker] : Makers()) v->push_back(name);
    return v;
  }();
  return *names;
}

Result<Case> MakeCase(std::string_view name, Size size, uint64_t seed) {
  for (const auto& [case_name, maker] : Makers()) {
    if (case_name != name) continue;
    Case c;
    c.name = case_name;
    Rng rng(seed);
    maker(&c, size, rng);
    if (c.ptx.empty())
      return Status::Internal("case " + c.name + ": " + c.ptx_file + " is not embedded");
    return c;
  }
  return Status::NotFound("no kernel corpus case named '" + std::string(name) + "'");
}

const std::vector<std::string>& PtxFiles() {
  static const auto* files = [] {
    auto* v = new std::vector<std::string>();
    for (size_t i = 0; i < internal::kEmbeddedPtxCount; ++i)
      v->push_back(internal::kEmbeddedPtx[i].name);
    return v;
  }();
  return *files;
}

std::string_view PtxSource(std::string_view file) {
  for (size_t i = 0; i < internal::kEmbeddedPtxCount; ++i) {
    if (file == internal::kEmbeddedPtx[i].name) return internal::kEmbeddedPtx[i].text;
  }
  return {};
}

}  // namespace gpuvm::kernels
