// The kernel corpus as ready-to-run cases: for each kernel (bench/kernels/*.cu, compiled to the
// committed .ptx, embedded in this library), the buffers to create with their initial contents, the
// launches to issue in order (grid, block, dynamic shared memory, arguments), and the expected
// contents of every output buffer afterwards, computed by the CPU reference (reference.h). The
// compute-engine tests and the benchmark suite run a case on the software GPU and call Case::Verify
// on what they read back.
//
// How to run a case:
//   1. Load `ptx` (the module text) through the JIT.
//   2. For each buffer, allocate `initial.size()` bytes of GPU memory (aligned to 256) and copy
//   `initial`.
//   3. For each launch in order: find `kernel` in the module; build its parameter buffer from
//   `args` in
//      order, each at the next offset aligned to its own alignment (Arg::Align(), as the PTX .param
//      list declares it); launch with `grid`, `block`, `dynamic_shared` bytes of extern shared
//      memory.
//   4. Read every buffer back and pass them all, in order, to Verify.
//
// Tolerances (Buffer::tolerances): results of integer kernels and of IEEE-exact float operations
// (add, mul, fma.rn, div.rn, sqrt.rn, cvt) must match bit for bit, because the reference mirrors
// the order and fusion of nvcc's PTX. Only kernels with approximate instructions or long float
// pipelines get a tolerance: |got - want| <= abs + rel * |want|, listed where the case is built
// (kernel_corpus.cc) and in docs/PTX.md.
//
// Threading: MakeCase and the accessors are thread-safe; a Case is a value.
#ifndef GPUVM_BENCH_KERNELS_KERNEL_CORPUS_H_
#define GPUVM_BENCH_KERNELS_KERNEL_CORPUS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuvm::kernels {

// One kernel parameter.
struct Arg {
  enum class Kind : uint8_t {
    kPointer,        // 8 bytes: the GPU address of buffers[buffer] + offset (modulo 2^64)
    kPointerLow32,   // 4 bytes: low half of that address
    kPointerHigh32,  // 4 bytes: high half of that address
    kValue,          // `bytes` as they are (a scalar or a struct passed by value)
  };
  Kind kind = Kind::kValue;
  uint32_t buffer = 0;
  int64_t offset = 0;
  std::vector<uint8_t> bytes;
  uint32_t align = 0;  // kValue: the parameter's alignment (0 = its size)

  static Arg Pointer(uint32_t buffer, int64_t offset = 0);
  static Arg PointerLow32(uint32_t buffer, int64_t offset = 0);
  static Arg PointerHigh32(uint32_t buffer, int64_t offset = 0);
  static Arg U32(uint32_t v);
  static Arg S32(int32_t v);
  static Arg F32(float v);
  static Arg U64(uint64_t v);
  static Arg Bytes(std::vector<uint8_t> bytes, uint32_t align);

  uint32_t Size() const;
  uint32_t Align() const;
  // Writes the argument's Size() bytes to `out`: for the pointer kinds `buffer_address` (the GPU
  // address of buffers[buffer]) plus `offset`, whole or one half; for kValue `bytes`.
  void WriteTo(uint8_t* out, uint64_t buffer_address) const;
};

struct Launch {
  std::string kernel;  // the .entry name in the module
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t dynamic_shared = 0;  // bytes for `extern __shared__` arrays
  std::vector<Arg> args;
};

// A launch's parameter buffer (step 3 above), with the case's buffers at `buffer_addresses`.
template <typename Address>
std::vector<uint8_t> PackArgs(const Launch& launch, const std::vector<Address>& buffer_addresses) {
  std::vector<uint8_t> packed;
  for (const Arg& arg : launch.args) {
    const size_t at = (packed.size() + arg.Align() - 1) / arg.Align() * arg.Align();
    packed.resize(at + arg.Size());
    arg.WriteTo(&packed[at], arg.kind == Arg::Kind::kValue
                                 ? 0
                                 : static_cast<uint64_t>(buffer_addresses[arg.buffer]));
  }
  return packed;
}

// How a buffer's final contents are checked.
enum class Check : uint8_t {
  kNone,    // an input or scratch buffer: not checked
  kExact,   // byte for byte against `expected`
  kF32,     // as floats against `expected`, with `tolerances`
  kF64,     // as doubles against `expected`, with `tolerances`
  kCustom,  // by `custom` (results that depend on the order of atomics, or on the machine)
};

struct Tolerance {
  double abs = 0;
  double rel = 0;
};

struct Buffer {
  std::string name;
  std::vector<uint8_t> initial;   // size == the buffer's size
  std::vector<uint8_t> expected;  // kExact/kF32/kF64: the contents after the last launch
  Check check = Check::kNone;
  // kF32/kF64: applied cyclically by element index (one entry = the same for every element; k
  // entries = element i uses tolerances[i % k], for outputs that interleave k different results per
  // item).
  std::vector<Tolerance> tolerances;
  // kCustom: "" when `got` is right, otherwise what is wrong.
  std::function<std::string(const std::vector<uint8_t>& got)> custom;
};

struct Case {
  std::string name;      // the case name (CaseNames())
  std::string ptx_file;  // "fmmul.ptx"
  std::string_view ptx;  // the module text (static storage)
  std::vector<Buffer> buffers;
  std::vector<Launch> launches;
  uint64_t threads = 0;  // total threads over all launches (for thread-instruction rates)

  // Checks the read-back buffers (same order and sizes as `buffers`). The error names the case, the
  // buffer and the first wrong element with got/want.
  Status Verify(const std::vector<std::vector<uint8_t>>& final_contents) const;
};

// Problem size: kTest keeps a case to well under a second on a software GPU; kBench is what the
// benchmark suite times.
enum class Size : uint8_t { kTest, kBench };

// Every case, in a stable order: vector_add, madd, fmadd, mmul, mmul_tiled, fmmul, fmmul_tiled, ...
const std::vector<std::string>& CaseNames();

// Builds a case with inputs from a deterministic generator seeded by `seed`.
Result<Case> MakeCase(std::string_view name, Size size = Size::kTest, uint64_t seed = 1);

// The committed .ptx files, by file name ("vector_add.ptx"), and their text ("" if unknown).
const std::vector<std::string>& PtxFiles();
std::string_view PtxSource(std::string_view file);

}  // namespace gpuvm::kernels

#endif  // GPUVM_BENCH_KERNELS_KERNEL_CORPUS_H_
