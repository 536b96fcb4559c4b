// The reader of nvcc's fat binaries: the wrapper nvcc's host code hands to __cudaRegisterFatBinary,
// the fat binary container it points at, the entries inside (PTX text, NVIDIA ELF cubins), and the
// decompression of compressed entries (ZSTD since CUDA 13, LZ4 before). The runtime only ever runs
// PTX (it JIT-compiles it for the software GPU, as a real driver would for a GPU newer than the
// cubins), so the reader's job ends at "the PTX text of the best entry".
//
// Layout (facts found on nvcc 13.0 output; docs/RUNTIME.md "Fat binaries" has the byte tables):
//   wrapper   {u32 magic 0x466243b1, u32 version (1 or 2), u64 data, u64 filename_or_fatbins}
//   container {u32 magic 0xba55ed50, u16 version 1, u16 header_size, u64 fat_size} then entries
//   entry     {u16 kind (1 PTX, 2 ELF), u16 version, u32 header_size, u64 payload_size,
//              u32 compressed_size @16, u16 minor @24, u16 major @26, u32 arch @28, u64 flags @40,
//              u64 uncompressed_size @56; CUDA 13's 80-byte PTX headers add a u64 @64 of unknown
//              meaning (72 seen)} then the payload
// Flags 0x8000 = ZSTD-compressed, 0x2000 = LZ4-compressed (older toolchains, per public reverse
// engineering; not seen on this machine's nvcc).
//
// Fat binaries are untrusted input: every size and offset is checked against the bytes actually
// given and against FatbinLimits before use; bad input yields kInvalidArgument (malformed),
// kUnimplemented (well-formed but not something we can use) or kResourceExhausted (a limit), never
// a crash.
//
// Threading: pure functions over caller-owned bytes; call from any thread.
#ifndef GPUVM_RUNTIME_FATBIN_FATBIN_H_
#define GPUVM_RUNTIME_FATBIN_FATBIN_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuvm::runtime::fatbin {

inline constexpr uint32_t kWrapperMagic = 0x466243b1;
inline constexpr uint32_t kContainerMagic = 0xba55ed50;
inline constexpr uint32_t kWrapperBytes = 24;
inline constexpr uint32_t kContainerHeaderBytes = 16;
inline constexpr uint32_t kEntryMinHeaderBytes = 64;

inline constexpr uint64_t kFlagCompressedLz4 = 0x2000;
inline constexpr uint64_t kFlagCompressedZstd = 0x8000;

enum class EntryKind : uint16_t { kPtx = 1, kElf = 2 };

struct FatbinLimits {
  uint64_t max_container_bytes = 256ull << 20;  // one container, headers included
  uint32_t max_entries = 4096;
  uint64_t max_uncompressed_bytes = 64ull << 20;  // one entry after decompression
};

// The wrapper struct nvcc emits in .nvFatBinSegment (__fatDeviceText), decoded.
struct Wrapper {
  uint32_t version = 0;
  uint64_t data = 0;                 // address of the container
  uint64_t filename_or_fatbins = 0;  // version 2: the prelinked fatbin list; otherwise unused
};

// One entry of a container. `payload` views the container's bytes (it is only valid while they
// are).
struct Entry {
  EntryKind kind = EntryKind::kPtx;
  uint16_t version = 0;
  uint32_t header_bytes = 0;
  uint32_t arch = 0;              // sm_XY / compute_XY as XY
  uint16_t major = 0, minor = 0;  // PTX ISA version for PTX entries
  uint64_t flags = 0;
  uint32_t compressed_bytes = 0;     // 0 when not compressed
  uint64_t uncompressed_bytes = 0;   // as the header states (0 when not given)
  uint64_t offset = 0;               // of the entry header within the container
  std::span<const uint8_t> payload;  // as stored (possibly compressed, possibly padded)

  bool is_zstd() const { return (flags & kFlagCompressedZstd) != 0; }
  bool is_lz4() const { return (flags & kFlagCompressedLz4) != 0; }
};

struct Container {
  uint16_t version = 0;
  uint64_t total_bytes = 0;  // header + fat_size
  std::vector<Entry> entries;
};

// Decodes a wrapper from its 24 bytes. Errors: kInvalidArgument (short, wrong magic),
// kUnimplemented (a version other than 1 or 2).
Result<Wrapper> ParseWrapper(std::span<const uint8_t> bytes);

// The total size (header + fat_size) a container claims, from its first 16 bytes; checked against
// the limits. Lets a caller holding only a pointer (the ABI passes no length) bound what it reads.
Result<uint64_t> ContainerSize(std::span<const uint8_t> header, const FatbinLimits& limits = {});

// Parses one container occupying the start of `bytes` (trailing bytes are ignored).
Result<Container> ParseContainer(std::span<const uint8_t> bytes, const FatbinLimits& limits = {});

// Parses every container in `bytes` laid end to end (a .nv_fatbin section), skipping zero padding
// between them. At least one is required.
Result<std::vector<Container>> ParseContainers(std::span<const uint8_t> bytes,
                                               const FatbinLimits& limits = {});

// The PTX text of a PTX entry: decompressed if needed, with leading blank padding kept (it is valid
// PTX whitespace) and trailing NULs removed. Errors: kInvalidArgument (not a PTX entry, corrupt
// compressed data, sizes that disagree), kResourceExhausted (larger than the limit).
Result<std::string> ExtractPtx(const Entry& entry, const FatbinLimits& limits = {});

// Picks the PTX entry to JIT for a device whose PTX target is `target_arch` (e.g. 75): the highest
// arch <= target_arch, else (no such entry) the lowest arch above it. nullptr when there is no PTX.
const Entry* SelectPtx(const Container& container, uint32_t target_arch);
const Entry* SelectPtx(const std::vector<Container>& containers, uint32_t target_arch);

}  // namespace gpuvm::runtime::fatbin

#endif  // GPUVM_RUNTIME_FATBIN_FATBIN_H_
