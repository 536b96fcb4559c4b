#include "runtime/fatbin/fatbin.h"

#include <lz4.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include "base/hex.h"

namespace gpuvm::runtime::fatbin {
namespace {

// Little-endian loads from a span the caller has bounds-checked.
uint16_t Load16(std::span<const uint8_t> b, size_t at) {
  return uint16_t(b[at] | (b[at + 1] << 8));
}
uint32_t Load32(std::span<const uint8_t> b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t Load64(std::span<const uint8_t> b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

// Entry header offsets (fatbin.h).
constexpr size_t kEntryCompressedSize = 16;
constexpr size_t kEntryMinor = 24;
constexpr size_t kEntryMajor = 26;
constexpr size_t kEntryArch = 28;
constexpr size_t kEntryFlags = 40;
constexpr size_t kEntryUncompressed = 56;

Result<Entry> ParseEntry(std::span<const uint8_t> body, uint64_t at) {
  std::span<const uint8_t> rest = body.subspan(at);
  if (rest.size() < kEntryMinHeaderBytes) {
    return Status::InvalidArgument("fat binary entry at " + Hex(at) + " is truncated");
  }
  Entry e;
  uint16_t kind = Load16(rest, 0);
  if (kind != uint16_t(EntryKind::kPtx) && kind != uint16_t(EntryKind::kElf)) {
    return Status::InvalidArgument("fat binary entry at " + Hex(at) + " has unknown kind " +
                                   std::to_string(kind));
  }
  e.kind = EntryKind(kind);
  e.version = Load16(rest, 2);
  e.header_bytes = Load32(rest, 4);
  uint64_t payload_bytes = Load64(rest, 8);
  if (e.header_bytes < kEntryMinHeaderBytes || e.header_bytes % 8 != 0 ||
      e.header_bytes > rest.size()) {
    return Status::InvalidArgument("fat binary entry at " + Hex(at) + " has a bad header size " +
                                   std::to_string(e.header_bytes));
  }
  if (payload_bytes > rest.size() - e.header_bytes) {
    return Status::InvalidArgument("fat binary entry at " + Hex(at) + " claims " +
                                   std::to_string(payload_bytes) +
                                   " payload bytes past the container");
  }
  e.compressed_bytes = Load32(rest, kEntryCompressedSize);
  e.minor = Load16(rest, kEntryMinor);
  e.major = Load16(rest, kEntryMajor);
  e.arch = Load32(rest, kEntryArch);
  e.flags = Load64(rest, kEntryFlags);
  e.uncompressed_bytes = Load64(rest, kEntryUncompressed);
  e.offset = at;
  e.payload = rest.subspan(e.header_bytes, payload_bytes);
  return e;
}

}  // namespace

Result<Wrapper> ParseWrapper(std::span<const uint8_t> bytes) {
  if (bytes.size() < kWrapperBytes)
    return Status::InvalidArgument("fat binary wrapper is truncated");
  if (Load32(bytes, 0) != kWrapperMagic) {
    return Status::InvalidArgument("not a fat binary wrapper (magic " + Hex(Load32(bytes, 0)) +
                                   ")");
  }
  Wrapper w;
  w.version = Load32(bytes, 4);
  if (w.version != 1 && w.version != 2) {
    return Status::Unimplemented("fat binary wrapper version " + std::to_string(w.version));
  }
  w.data = Load64(bytes, 8);
  w.filename_or_fatbins = Load64(bytes, 16);
  if (w.data == 0) return Status::InvalidArgument("fat binary wrapper has no data");
  return w;
}

Result<uint64_t> ContainerSize(std::span<const uint8_t> header, const FatbinLimits& limits) {
  if (header.size() < kContainerHeaderBytes) {
    return Status::InvalidArgument("fat binary container header is truncated");
  }
  if (Load32(header, 0) != kContainerMagic) {
    return Status::InvalidArgument("not a fat binary container (magic " + Hex(Load32(header, 0)) +
                                   ")");
  }
  uint16_t version = Load16(header, 4);
  uint16_t header_bytes = Load16(header, 6);
  uint64_t fat_size = Load64(header, 8);
  if (version != 1) {
    return Status::Unimplemented("fat binary container version " + std::to_string(version));
  }
  if (header_bytes < kContainerHeaderBytes || header_bytes % 8 != 0) {
    return Status::InvalidArgument("fat binary container has a bad header size " +
                                   std::to_string(header_bytes));
  }
  if (fat_size > limits.max_container_bytes ||
      header_bytes + fat_size > limits.max_container_bytes) {
    return Status::ResourceExhausted("fat binary container of " + std::to_string(fat_size) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_container_bytes));
  }
  return header_bytes + fat_size;
}

Result<Container> ParseContainer(std::span<const uint8_t> bytes, const FatbinLimits& limits) {
  GPUVM_ASSIGN_OR_RETURN(uint64_t total, ContainerSize(bytes, limits));
  if (total > bytes.size()) {
    return Status::InvalidArgument("fat binary container claims " + std::to_string(total) +
                                   " bytes but only " + std::to_string(bytes.size()) +
                                   " are present");
  }
  Container c;
  c.version = Load16(bytes, 4);
  c.total_bytes = total;
  uint16_t header_bytes = Load16(bytes, 6);
  std::span<const uint8_t> body = bytes.subspan(0, total);
  uint64_t at = header_bytes;
  while (at < total) {
    if (c.entries.size() >= limits.max_entries) {
      return Status::ResourceExhausted("fat binary container has more than " +
                                       std::to_string(limits.max_entries) + " entries");
    }
    GPUVM_ASSIGN_OR_RETURN(Entry e, ParseEntry(body, at));
    at += e.header_bytes + e.payload.size();  // both bounded by `total` in ParseEntry
    c.entries.push_back(e);
  }
  return c;
}

Result<std::vector<Container>> ParseContainers(std::span<const uint8_t> bytes,
                                               const FatbinLimits& limits) {
  std::vector<Container> out;
  uint64_t at = 0;
  while (at < bytes.size()) {
    // Sections align containers to 8 bytes; skip zero padding in between.
    if (bytes[at] == 0) {
      ++at;
      continue;
    }
    GPUVM_ASSIGN_OR_RETURN(Container c, ParseContainer(bytes.subspan(at), limits));
    at += c.total_bytes;
    out.push_back(std::move(c));
    if (out.size() > limits.max_entries) {
      return Status::ResourceExhausted("too many fat binary containers");
    }
  }
  if (out.empty()) return Status::InvalidArgument("no fat binary container found");
  return out;
}

Result<std::string> ExtractPtx(const Entry& entry, const FatbinLimits& limits) {
  if (entry.kind != EntryKind::kPtx) return Status::InvalidArgument("fat binary entry is not PTX");
  if (entry.is_zstd() && entry.is_lz4()) {
    return Status::InvalidArgument("fat binary entry claims both ZSTD and LZ4 compression");
  }
  std::string text;
  if (entry.is_zstd() || entry.is_lz4()) {
    // The compressed stream is `compressed_bytes` long; the payload may carry padding after it.
    uint64_t stream_bytes = entry.compressed_bytes ? entry.compressed_bytes : entry.payload.size();
    if (stream_bytes > entry.payload.size()) {
      return Status::InvalidArgument("compressed size " + std::to_string(stream_bytes) +
                                     " exceeds the entry's payload of " +
                                     std::to_string(entry.payload.size()));
    }
    std::span<const uint8_t> stream = entry.payload.subspan(0, stream_bytes);
    uint64_t expected = entry.uncompressed_bytes;
    if (entry.is_zstd()) {
      unsigned long long frame = ZSTD_getFrameContentSize(stream.data(), stream.size());
      if (frame == ZSTD_CONTENTSIZE_ERROR) {
        return Status::InvalidArgument("PTX entry is not a ZSTD frame");
      }
      if (frame != ZSTD_CONTENTSIZE_UNKNOWN) {
        if (expected != 0 && expected != frame) {
          return Status::InvalidArgument("PTX entry header says " + std::to_string(expected) +
                                         " bytes, the ZSTD frame " + std::to_string(frame));
        }
        expected = frame;
      }
    }
    if (expected == 0) {
      return Status::InvalidArgument("compressed PTX entry does not state its uncompressed size");
    }
    if (expected > limits.max_uncompressed_bytes) {
      return Status::ResourceExhausted("PTX entry of " + std::to_string(expected) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(limits.max_uncompressed_bytes));
    }
    text.resize(expected);
    if (entry.is_zstd()) {
      size_t got = ZSTD_decompress(text.data(), text.size(), stream.data(), stream.size());
      if (ZSTD_isError(got)) {
        return Status::InvalidArgument(std::string("corrupt ZSTD PTX entry: ") +
                                       ZSTD_getErrorName(got));
      }
      if (got != expected) {
        return Status::InvalidArgument("ZSTD PTX entry decompressed to " + std::to_string(got) +
                                       " bytes, expected " + std::to_string(expected));
      }
    } else {
      if (stream.size() > uint64_t(INT32_MAX) || expected > uint64_t(INT32_MAX)) {
        return Status::ResourceExhausted("LZ4 PTX entry too large");
      }
      int got = LZ4_decompress_safe(reinterpret_cast<const char*>(stream.data()), text.data(),
                                    int(stream.size()), int(expected));
      if (got < 0 || uint64_t(got) != expected) {
        return Status::InvalidArgument("corrupt LZ4 PTX entry");
      }
    }
  } else {
    if (entry.payload.size() > limits.max_uncompressed_bytes) {
      return Status::ResourceExhausted("PTX entry of " + std::to_string(entry.payload.size()) +
                                       " bytes exceeds the limit");
    }
    text.assign(reinterpret_cast<const char*>(entry.payload.data()), entry.payload.size());
  }
  // Text ends at the first NUL (padding); a PTX module never contains one.
  size_t nul = text.find('\0');
  if (nul != std::string::npos) text.resize(nul);
  return text;
}

const Entry* SelectPtx(const Container& container, uint32_t target_arch) {
  const Entry* best_below = nullptr;
  const Entry* best_above = nullptr;
  for (const Entry& e : container.entries) {
    if (e.kind != EntryKind::kPtx) continue;
    if (e.arch <= target_arch) {
      if (!best_below || e.arch > best_below->arch) best_below = &e;
    } else if (!best_above || e.arch < best_above->arch) {
      best_above = &e;
    }
  }
  return best_below ? best_below : best_above;
}

const Entry* SelectPtx(const std::vector<Container>& containers, uint32_t target_arch) {
  const Entry* best = nullptr;
  for (const Container& c : containers) {
    const Entry* e = SelectPtx(c, target_arch);
    if (!e) continue;
    bool e_below = e->arch <= target_arch;
    bool best_below = best && best->arch <= target_arch;
    if (!best || (e_below && !best_below) ||
        (e_below == best_below && (e_below ? e->arch > best->arch : e->arch < best->arch))) {
      best = e;
    }
  }
  return best;
}

}  // namespace gpuvm::runtime::fatbin
