// The host side of device printf: turns the records a kernel's vprintf calls wrote into a context's
// printf FIFO (record format: gpu/isa/device_printf.h) into the text the program prints.
//
// The records come from device memory a kernel could write anything into, so nothing in them is
// trusted: every length is checked against the bytes given and the limits of device_printf.h, the
// format is walked with the same parser the instruction used (ParsePrintfSpec), each conversion is
// formatted on its own by snprintf with a spec built here (never the device's text) and an argument
// of the type that spec takes, flags and precisions C leaves undefined for a conversion are
// dropped, and %n does not exist. The first record that fails a check ends the formatting (records
// have no resynchronisation marker); what came before it is kept.
//
// Threading: a pure function.
#ifndef GPUVM_RUNTIME_CORE_PRINTF_FORMAT_H_
#define GPUVM_RUNTIME_CORE_PRINTF_FORMAT_H_

#include <cstdint>
#include <span>
#include <string>

namespace gpuvm::runtime {

struct PrintfText {
  std::string text;      // the formatted output of the good records, in order
  uint64_t records = 0;  // records formatted
  // Empty, or why the record at `bad_offset` was refused (formatting stopped there).
  std::string error;
  uint64_t bad_offset = 0;
};

// Formats the records in `area`, the used part of a FIFO's record area (FIFO offset 32 onwards).
PrintfText FormatPrintfRecords(std::span<const uint8_t> area);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_PRINTF_FORMAT_H_
