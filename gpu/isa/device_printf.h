// Device-side printf: the contract between the GVISA `vprintf` instruction (run by the compute
// engine, gpu/sim/compute/device_printf.h), the JIT that emits it for PTX calls of `vprintf`
// (ptx/translator/lower_calls.cc) and the driver that owns the FIFO and prints its records
// (runtime/core/printf_fifo.h). docs/JIT.md "Device printf" is the prose version.
//
// A CUDA kernel's printf is a call of the extern PTX function vprintf(format, args): `format` a
// generic pointer to the format string, `args` a generic pointer to a packed buffer holding every
// argument at its natural alignment (int/unsigned/char/short as 4 bytes, long/long long/pointers
// and double as 8; float is promoted to double). The instruction writes one self-describing
// record per calling thread into a FIFO in device memory; the driver copies the FIFO back at its
// sync points and formats the records on the host. The FIFO and everything in it is written by
// kernels, so the host trusts none of it: every length is checked before use.
//
// FIFO (device memory, one per CUDA context, allocated by the driver; kernels find its address in
// the hidden module global kPrintfFifoGlobal):
//   0   u32 magic kPrintfFifoMagic     (written by the driver)
//   4   u32 version kPrintfFifoVersion (written by the driver)
//   8   u64 capacity: bytes of the record area (written by the driver)
//   16  u64 used: bytes of records written; a thread reserves its record with a compare-and-swap,
//       so used never passes capacity
//   24  u64 dropped: records that did not fit; once one did not fit, `used` is set to capacity so
//       that later output is dropped too (CUDA: when the FIFO is full, further output is lost)
//   32  the record area, `capacity` bytes
//
// Record (at an 8-byte aligned offset of the record area; one per vprintf call of one thread):
//   0   u32 bytes: the whole record, this header included; a multiple of 8
//   4   u32 format_bytes: length of the format string (without its NUL)
//   8   u32 arg_count: argument slots that follow (every '*' width or precision is one)
//   12  u32 reserved, 0
//   16  the format string, zero-padded to a multiple of 8
//   then one slot per argument, in order:
//       numbers and pointers: 8 bytes, the value in the low 4 (int-sized) or all 8 bytes;
//       %s: u32 length (kPrintfNullString for a NULL pointer), u32 0, then the string's bytes
//           (at most kPrintfMaxStringBytes, longer strings are cut), zero-padded to a multiple
//           of 8.
//
// The format walk (ParsePrintfSpec) is shared by the instruction, which needs it only to size the
// arguments, and the host formatter, so both agree on what each conversion takes.
//
// Threading: constants and pure functions.
#ifndef GPUVM_GPU_ISA_DEVICE_PRINTF_H_
#define GPUVM_GPU_ISA_DEVICE_PRINTF_H_

#include <cstdint>
#include <string_view>

namespace gpuvm::isa {

// The name of the hidden .global variable (8 bytes) holding the FIFO's device address in a module
// whose kernels call vprintf. '.' cannot appear in a PTX identifier, so no PTX variable collides.
inline constexpr std::string_view kPrintfFifoGlobal = "gpuvm.printf_fifo";

inline constexpr uint32_t kPrintfFifoMagic = 0x46505647;  // "GVPF" as little-endian bytes
inline constexpr uint32_t kPrintfFifoVersion = 1;
inline constexpr uint32_t kPrintfFifoHeaderBytes = 32;
inline constexpr uint32_t kPrintfFifoCapacityOffset = 8;
inline constexpr uint32_t kPrintfFifoUsedOffset = 16;
inline constexpr uint32_t kPrintfFifoDroppedOffset = 24;
inline constexpr uint32_t kPrintfRecordHeaderBytes = 16;
inline constexpr uint32_t kPrintfNullString = 0xffffffffu;

// Bounds a thread's call must keep (our choice). A format whose NUL is not within
// kPrintfMaxFormatBytes, or that needs more than kPrintfMaxArgs argument slots, makes vprintf
// return kPrintfInternalError and print nothing; %s strings are cut at kPrintfMaxStringBytes.
inline constexpr uint32_t kPrintfMaxFormatBytes = 4096;
inline constexpr uint32_t kPrintfMaxArgs = 64;
inline constexpr uint32_t kPrintfMaxStringBytes = 4096;
// Literal widths and precisions above this are not a conversion (printed as written); '*' values
// are clamped to it. It bounds the host's output per conversion.
inline constexpr int32_t kPrintfMaxWidth = 4096;

// vprintf's return values besides the number of argument slots it consumed (CUDA's).
inline constexpr int32_t kPrintfNullFormat = -1;
inline constexpr int32_t kPrintfInternalError = -2;

// The argument a conversion itself takes.
enum class PrintfValue : uint8_t {
  kNone,     // %% (or an invalid spec): nothing
  kInt32,    // d i o u x X c without a 64-bit length; also every '*'
  kInt64,    // d i o u x X with l ll j z t
  kDouble,   // f F e E g G a A (float is promoted by the caller)
  kPointer,  // p
  kString,   // s: a generic pointer to a NUL-terminated string
};

// Bytes (and alignment) of a value in the packed argument buffer: 4 for kInt32, 8 for the others
// (0 for kNone).
uint32_t PrintfValueBytes(PrintfValue v);

inline constexpr int32_t kPrintfNoNumber = -1;  // no width / precision given
inline constexpr int32_t kPrintfStar = -2;      // '*': taken from an int argument

// One conversion specification, %[flags][width][.precision][length]conversion.
struct PrintfSpec {
  // Characters of the format the spec covers, from its '%'. An invalid spec covers only the '%',
  // which is printed as is; the characters after it are then ordinary text.
  uint32_t length = 1;
  bool valid = false;
  char conversion = 0;  // d i o u x X c f F e E g G a A s p, or '%'
  char flags[6] = {};   // the distinct flags of "-+ #0", NUL-terminated, in first-seen order
  int32_t width = kPrintfNoNumber;  // >= 0, kPrintfNoNumber or kPrintfStar
  int32_t precision = kPrintfNoNumber;
  // The length modifier as written: "", "hh", "h", "l", "ll", "j", "z", "t" or "L".
  char length_modifier[3] = {};
  PrintfValue value = PrintfValue::kNone;

  // Argument slots the spec consumes: a '*' width, a '*' precision, then its value.
  uint32_t ArgSlots() const {
    return (width == kPrintfStar) + (precision == kPrintfStar) + (value != PrintfValue::kNone);
  }
};

// Parses the spec at format[pos], which must be '%'. Never reads outside `format`. Invalid: an
// unknown conversion (%n among them: it would write through a pointer), a length modifier the
// conversion does not take (%hf, %ls, %lc, %Lx ...), a width or precision above kPrintfMaxWidth,
// or the end of the format inside the spec.
PrintfSpec ParsePrintfSpec(std::string_view format, size_t pos);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_DEVICE_PRINTF_H_
