#include "ipc/codec.h"

#include <cstring>
#include <string>

#include "base/enum_names.h"
#include "base/vm_name.h"

namespace gpuvm::ipc {
namespace {

// --- little-endian field access
// -------------------------------------------------------------------------

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Zeros(size_t n) { out_.insert(out_.end(), n, 0); }
  void Name(const std::string& s) {
    out_.insert(out_.end(), s.begin(), s.end());
    Zeros(kNameSize - s.size());
  }
  void Text(const std::string& s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void Bytes(const std::vector<uint8_t>& b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void Token(const VmToken& t) { out_.insert(out_.end(), t.begin(), t.end()); }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads a payload whose length was already checked to be exact, so getters cannot run out.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  uint8_t U8() { return b_[pos_++]; }
  uint16_t U16() { return static_cast<uint16_t>(Le(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  // True when the next n bytes are all zero (reserved fields).
  bool Zeros(size_t n) {
    bool zero = true;
    for (size_t i = 0; i < n; ++i) zero &= b_[pos_ + i] == 0;
    pos_ += n;
    return zero;
  }
  // A NUL-padded name: printable characters, then only NULs (so the encoding is canonical).
  bool Name(std::string* out) {
    std::span<const uint8_t> field = b_.subspan(pos_, kNameSize);
    pos_ += kNameSize;
    size_t n = 0;
    while (n < kNameSize && field[n] != 0) ++n;
    if (n == kNameSize) return false;  // needs a terminator
    for (size_t i = 0; i < n; ++i) {
      if (field[i] < 0x20 || field[i] > 0x7e) return false;
    }
    for (size_t i = n; i < kNameSize; ++i) {
      if (field[i] != 0) return false;
    }
    out->assign(reinterpret_cast<const char*>(field.data()), n);
    return true;
  }
  std::vector<uint8_t> Bytes(size_t n) {
    std::vector<uint8_t> v(b_.begin() + pos_, b_.begin() + pos_ + n);
    pos_ += n;
    return v;
  }
  VmToken Token() {
    VmToken t;
    std::memcpy(t.data(), b_.data() + pos_, t.size());
    pos_ += t.size();
    return t;
  }
  std::string Text(size_t n) {
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  uint64_t Le(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{b_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

// --- per-type facts
// -------------------------------------------------------------------------------------

enum class Kind { kRequest, kReply, kNotification, kReplyOrNotification };

struct TypeInfo {
  MessageType type;
  Kind kind;
  size_t payload;  // exact payload bytes (ERROR: the fixed part before its text)
};

constexpr TypeInfo kTypes[] = {
    {MessageType::kHello, Kind::kRequest, 40},
    {MessageType::kHelloAck, Kind::kReply, 8},
    {MessageType::kVmConfig, Kind::kRequest, 88},
    {MessageType::kVmAccept, Kind::kReply, 16},
    {MessageType::kGuestMemory, Kind::kRequest, 16},
    {MessageType::kGuestMemoryAck, Kind::kReply, 0},
    {MessageType::kFastLane, Kind::kRequest, 8},
    {MessageType::kFastLaneAck, Kind::kReply, 0},
    {MessageType::kAuth, Kind::kRequest, kVmTokenSize},
    {MessageType::kAuthAck, Kind::kReply, 0},
    {MessageType::kMmioRead, Kind::kRequest, 16},
    {MessageType::kMmioReadReply, Kind::kReply, 8},
    {MessageType::kMmioWrite, Kind::kRequest, 24},
    {MessageType::kMmioWriteAck, Kind::kReply, 0},
    {MessageType::kInterrupt, Kind::kNotification, 8},
    {MessageType::kBarMap, Kind::kRequest, 32},
    {MessageType::kBarUnmap, Kind::kRequest, 24},
    {MessageType::kBarMapAck, Kind::kReply, 0},
    {MessageType::kError, Kind::kReplyOrNotification, 8},
    {MessageType::kTeardown, Kind::kRequest, 8},
    {MessageType::kTeardownAck, Kind::kReply, 0},
    {MessageType::kPing, Kind::kRequest, 8},
    {MessageType::kPong, Kind::kReply, 8},
    {MessageType::kMmioWriteBlock, Kind::kRequest, 16},  // + data
    {MessageType::kMmioReadBlock, Kind::kRequest, 16},
    {MessageType::kMmioReadBlockReply, Kind::kReply, 8},  // + data
    {MessageType::kMmioWriteFill, Kind::kRequest, 32},
};

const TypeInfo* Info(uint16_t type) {
  for (const TypeInfo& t : kTypes) {
    if (static_cast<uint16_t>(t.type) == type) return &t;
  }
  return nullptr;
}

bool ValidBar(uint8_t bar) { return bar == 0 || bar == 1 || bar == 3; }
bool ValidSize(uint8_t size) { return size == 1 || size == 2 || size == 4 || size == 8; }
bool PowerOfTwoAtLeastPage(uint64_t v) { return v >= 4096 && (v & (v - 1)) == 0; }
bool PageAligned(uint64_t v) { return (v & 4095) == 0; }
bool Printable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

Status CheckAccess(Bar bar, uint8_t size, uint64_t offset) {
  if (!ValidBar(static_cast<uint8_t>(bar))) return Bad("no such BAR");
  if (!ValidSize(size)) return Bad("access size must be 1, 2, 4 or 8");
  if (offset > kMaxBarExtent - size) return Bad("access beyond any BAR");
  // Registers: BAR0 accesses are naturally aligned. BAR1/BAR3 are memory apertures; a guest's
  // memcpy may write them unaligned, and the aggregator handles that.
  if (bar == Bar::kBar0 && offset % size != 0) return Bad("unaligned BAR0 access");
  return Status::Ok();
}

Status CheckBlock(Bar bar, uint8_t size, uint16_t count, uint64_t offset) {
  GPUVM_RETURN_IF_ERROR(CheckAccess(bar, size, offset));
  if (count == 0) return Bad("a block of no elements");
  const uint64_t bytes = uint64_t{count} * size;
  if (bytes > kMaxBlockBytes) return Bad("block larger than a message carries");
  if (offset > kMaxBarExtent - bytes) return Bad("block beyond any BAR");
  return Status::Ok();
}

Status CheckRange(Bar bar, uint64_t offset, uint64_t length) {
  if (!ValidBar(static_cast<uint8_t>(bar))) return Bad("no such BAR");
  if (length == 0 || !PageAligned(offset) || !PageAligned(length)) {
    return Bad("BAR range must be whole pages");
  }
  if (offset > kMaxBarExtent || length > kMaxBarExtent - offset) return Bad("BAR range too far");
  return Status::Ok();
}

constexpr EnumName<VgpuVariant> kVariantWords[] = {
    {VgpuVariant::kDefault, "default"},       {VgpuVariant::kFvNaive, "naive"},
    {VgpuVariant::kFvLazy, "lazy"},           {VgpuVariant::kFvBarRemap, "bar-remap"},
    {VgpuVariant::kFvOptimized, "optimized"}, {VgpuVariant::kPvNaive, "naive"},
    {VgpuVariant::kPvMulticall, "multicall"}, {VgpuVariant::kPvDrm, "pvdrm"},
};

bool IsFvVariant(VgpuVariant v) {
  return v >= VgpuVariant::kFvNaive && v <= VgpuVariant::kFvOptimized;
}
bool IsPvVariant(VgpuVariant v) {
  return v == VgpuVariant::kPvNaive || v == VgpuVariant::kPvMulticall || v == VgpuVariant::kPvDrm;
}

// VM_CONFIG's typed fields (version 6): each within its range and meaningful for the VM's mode.
Status CheckTypedConfig(const VmConfig& b) {
  if (static_cast<uint8_t>(b.variant) > static_cast<uint8_t>(VgpuVariant::kPvDrm)) {
    return Bad("unknown vGPU variant");
  }
  if (b.mode == VmMode::kPassThrough &&
      (b.variant != VgpuVariant::kDefault || b.vram_mib != 0 || b.channels != 0)) {
    return Bad("a pt VM has the whole GPU: no variant, VRAM size or channel count");
  }
  if (b.mode == VmMode::kFullVirtualization && b.variant != VgpuVariant::kDefault &&
      !IsFvVariant(b.variant)) {
    return Bad("an fv VM's variant must be naive, lazy, bar-remap or optimized");
  }
  if (b.mode == VmMode::kParaVirtualization && b.variant != VgpuVariant::kDefault &&
      !IsPvVariant(b.variant)) {
    return Bad("a pv VM's variant must be naive, multicall or pvdrm");
  }
  if (b.vram_mib > kMaxVramMib) return Bad("VRAM size past 1 TiB");
  if (b.channels > kMaxVmChannels) return Bad("more channels than the GPU has (128)");
  if (b.share_milli != kNoShare && b.share_milli > kMaxShareMilli) {
    return Bad("a share is 0 to 100 percent");
  }
  return Status::Ok();
}

}  // namespace

const char* VgpuVariantName(VgpuVariant variant) {
  return NameOf(kVariantWords, variant, "unknown");
}

Result<VgpuVariant> ParseVgpuVariant(VmMode mode, std::string_view word) {
  if (mode == VmMode::kFullVirtualization) {
    if (word == "naive") return VgpuVariant::kFvNaive;
    if (word == "lazy") return VgpuVariant::kFvLazy;
    if (word == "bar-remap" || word == "remap") return VgpuVariant::kFvBarRemap;
    if (word == "optimized" || word == "opt") return VgpuVariant::kFvOptimized;
    return Status::InvalidArgument("unknown fv variant '" + std::string(word) +
                                   "' (naive, lazy, bar-remap, optimized)");
  }
  if (mode == VmMode::kParaVirtualization) {
    if (word == "naive") return VgpuVariant::kPvNaive;
    if (word == "multicall" || word == "mc") return VgpuVariant::kPvMulticall;
    if (word == "pvdrm") return VgpuVariant::kPvDrm;
    return Status::InvalidArgument("unknown pv variant '" + std::string(word) +
                                   "' (naive, multicall, pvdrm)");
  }
  return Status::InvalidArgument("a pt VM has no variant (got '" + std::string(word) + "')");
}

std::string FormatVmToken(const VmToken& token) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * token.size());
  for (uint8_t byte : token) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

Result<VmToken> ParseVmToken(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.size() != 2 * kVmTokenSize) {
    return Status::InvalidArgument("a VM token is " + std::to_string(2 * kVmTokenSize) +
                                   " hex digits, not " + std::to_string(text.size()) +
                                   " characters");
  }
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  VmToken token;
  for (size_t i = 0; i < token.size(); ++i) {
    const int high = digit(text[2 * i]);
    const int low = digit(text[2 * i + 1]);
    if (high < 0 || low < 0) return Status::InvalidArgument("a VM token has only hex digits");
    token[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return token;
}

MessageType TypeOf(const Body& body) {
  return std::visit(
      [](const auto& b) -> MessageType {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Hello>) return MessageType::kHello;
        if constexpr (std::is_same_v<T, HelloAck>) return MessageType::kHelloAck;
        if constexpr (std::is_same_v<T, VmConfig>) return MessageType::kVmConfig;
        if constexpr (std::is_same_v<T, VmAccept>) return MessageType::kVmAccept;
        if constexpr (std::is_same_v<T, GuestMemory>) return MessageType::kGuestMemory;
        if constexpr (std::is_same_v<T, GuestMemoryAck>) return MessageType::kGuestMemoryAck;
        if constexpr (std::is_same_v<T, FastLaneOffer>) return MessageType::kFastLane;
        if constexpr (std::is_same_v<T, FastLaneAck>) return MessageType::kFastLaneAck;
        if constexpr (std::is_same_v<T, MmioRead>) return MessageType::kMmioRead;
        if constexpr (std::is_same_v<T, MmioReadReply>) return MessageType::kMmioReadReply;
        if constexpr (std::is_same_v<T, MmioWrite>) return MessageType::kMmioWrite;
        if constexpr (std::is_same_v<T, MmioWriteAck>) return MessageType::kMmioWriteAck;
        if constexpr (std::is_same_v<T, Interrupt>) return MessageType::kInterrupt;
        if constexpr (std::is_same_v<T, BarMap>) return MessageType::kBarMap;
        if constexpr (std::is_same_v<T, BarUnmap>) return MessageType::kBarUnmap;
        if constexpr (std::is_same_v<T, BarMapAck>) return MessageType::kBarMapAck;
        if constexpr (std::is_same_v<T, Error>) return MessageType::kError;
        if constexpr (std::is_same_v<T, Teardown>) return MessageType::kTeardown;
        if constexpr (std::is_same_v<T, TeardownAck>) return MessageType::kTeardownAck;
        if constexpr (std::is_same_v<T, Ping>) return MessageType::kPing;
        if constexpr (std::is_same_v<T, Pong>) return MessageType::kPong;
        if constexpr (std::is_same_v<T, MmioWriteBlock>) return MessageType::kMmioWriteBlock;
        if constexpr (std::is_same_v<T, MmioReadBlock>) return MessageType::kMmioReadBlock;
        if constexpr (std::is_same_v<T, MmioReadBlockReply>) {
          return MessageType::kMmioReadBlockReply;
        }
        if constexpr (std::is_same_v<T, MmioWriteFill>) return MessageType::kMmioWriteFill;
        if constexpr (std::is_same_v<T, Auth>) return MessageType::kAuth;
        if constexpr (std::is_same_v<T, AuthAck>) return MessageType::kAuthAck;
      },
      body);
}

std::string_view MessageTypeName(MessageType type) {
  static constexpr EnumName<MessageType> kNames[] = {
      {MessageType::kHello, "HELLO"},
      {MessageType::kHelloAck, "HELLO_ACK"},
      {MessageType::kVmConfig, "VM_CONFIG"},
      {MessageType::kVmAccept, "VM_ACCEPT"},
      {MessageType::kGuestMemory, "GUEST_MEMORY"},
      {MessageType::kGuestMemoryAck, "GUEST_MEMORY_ACK"},
      {MessageType::kFastLane, "FAST_LANE"},
      {MessageType::kFastLaneAck, "FAST_LANE_ACK"},
      {MessageType::kMmioRead, "MMIO_READ"},
      {MessageType::kMmioReadReply, "MMIO_READ_REPLY"},
      {MessageType::kMmioWrite, "MMIO_WRITE"},
      {MessageType::kMmioWriteAck, "MMIO_WRITE_ACK"},
      {MessageType::kInterrupt, "INTERRUPT"},
      {MessageType::kBarMap, "BAR_MAP"},
      {MessageType::kBarUnmap, "BAR_UNMAP"},
      {MessageType::kBarMapAck, "BAR_MAP_ACK"},
      {MessageType::kError, "ERROR"},
      {MessageType::kTeardown, "TEARDOWN"},
      {MessageType::kTeardownAck, "TEARDOWN_ACK"},
      {MessageType::kPing, "PING"},
      {MessageType::kPong, "PONG"},
      {MessageType::kMmioWriteBlock, "MMIO_WRITE_BLOCK"},
      {MessageType::kMmioReadBlock, "MMIO_READ_BLOCK"},
      {MessageType::kMmioReadBlockReply, "MMIO_READ_BLOCK_REPLY"},
      {MessageType::kMmioWriteFill, "MMIO_WRITE_FILL"},
      {MessageType::kAuth, "AUTH"},
      {MessageType::kAuthAck, "AUTH_ACK"}};
  return NameOf(kNames, type, "?");
}

size_t DescriptorCount(const Body& body) {
  if (const auto* m = std::get_if<GuestMemory>(&body)) {
    return m->kind == GuestMemoryKind::kLocalMemfd ? 1 : 0;
  }
  if (std::holds_alternative<FastLaneOffer>(body)) return 3;
  return std::holds_alternative<BarMap>(body) ? 1 : 0;
}

Status Validate(const Message& message) {
  const TypeInfo* info = Info(static_cast<uint16_t>(TypeOf(message.body)));
  if (info == nullptr) return Status::Internal("message type missing from the type table");
  switch (info->kind) {
    case Kind::kRequest:
    case Kind::kReply:
      if (message.seq == 0) return Bad("requests and replies need a non-zero sequence number");
      break;
    case Kind::kNotification:
      if (message.seq != 0) return Bad("notifications carry sequence number 0");
      break;
    case Kind::kReplyOrNotification:
      break;
  }
  return std::visit(
      [](const auto& b) -> Status {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Hello>) {
          if (b.min_version == 0 || b.min_version > b.max_version) return Bad("bad version range");
          if (b.software.size() >= kNameSize || !Printable(b.software))
            return Bad("bad software name");
        } else if constexpr (std::is_same_v<T, HelloAck>) {
          if (b.version == 0) return Bad("version 0 does not exist");
        } else if constexpr (std::is_same_v<T, VmConfig>) {
          if (b.mode != VmMode::kPassThrough && b.mode != VmMode::kFullVirtualization &&
              b.mode != VmMode::kParaVirtualization) {
            return Bad("unknown VM mode");
          }
          if (b.backend != Backend::kLocal && b.backend != Backend::kXen)
            return Bad("unknown backend");
          if (b.vcpus == 0 || b.vcpus > 128) return Bad("vCPU count out of range");
          if (b.guest_ram_bytes == 0 || !PageAligned(b.guest_ram_bytes)) {
            return Bad("guest RAM must be whole pages");
          }
          if (!PowerOfTwoAtLeastPage(b.bar0_size) || !PowerOfTwoAtLeastPage(b.bar1_size) ||
              !PowerOfTwoAtLeastPage(b.bar3_size) || b.bar0_size > kMaxBarExtent ||
              b.bar1_size > kMaxBarExtent || b.bar3_size > kMaxBarExtent) {
            return Bad("BAR sizes must be powers of two from 4 KiB to 1 TiB");
          }
          if (b.name.size() >= kNameSize || !Printable(b.name)) return Bad("bad VM name");
          if (Status name = CheckVmName(b.name); !name.ok()) return Bad(name.message());
          if (Status typed = CheckTypedConfig(b); !typed.ok()) return typed;
        } else if constexpr (std::is_same_v<T, VmAccept>) {
          if (b.flags & ~(kAcceptWantsGuestMemory | kAcceptFastLane)) {
            return Bad("unknown accept flags");
          }
        } else if constexpr (std::is_same_v<T, FastLaneOffer>) {
          if (b.version != 1) return Bad("unknown fast lane version");
        } else if constexpr (std::is_same_v<T, GuestMemory>) {
          if (b.kind != GuestMemoryKind::kLocalMemfd && b.kind != GuestMemoryKind::kXenDomain) {
            return Bad("unknown guest memory kind");
          }
          if (b.bytes == 0 || !PageAligned(b.bytes)) return Bad("guest memory must be whole pages");
        } else if constexpr (std::is_same_v<T, MmioRead>) {
          return CheckAccess(b.bar, b.size, b.offset);
        } else if constexpr (std::is_same_v<T, MmioWrite>) {
          GPUVM_RETURN_IF_ERROR(CheckAccess(b.bar, b.size, b.offset));
          if (b.size < 8 && (b.value >> (8 * b.size)) != 0)
            return Bad("write value wider than size");
        } else if constexpr (std::is_same_v<T, MmioWriteBlock>) {
          GPUVM_RETURN_IF_ERROR(CheckBlock(b.bar, b.size, b.count, b.offset));
          if (b.data.size() != size_t{b.count} * b.size) return Bad("block data of the wrong size");
        } else if constexpr (std::is_same_v<T, MmioReadBlock>) {
          return CheckBlock(b.bar, b.size, b.count, b.offset);
        } else if constexpr (std::is_same_v<T, MmioReadBlockReply>) {
          if (b.data.empty() || b.data.size() > kMaxBlockBytes) return Bad("bad block reply size");
        } else if constexpr (std::is_same_v<T, MmioWriteFill>) {
          GPUVM_RETURN_IF_ERROR(CheckAccess(b.bar, b.size, b.offset));
          if (b.count == 0 || b.count > kMaxFillCount) return Bad("fill count out of range");
          if (b.offset > kMaxBarExtent - uint64_t{b.count} * b.size)
            return Bad("fill beyond any BAR");
          if (b.size < 8 && (b.value >> (8 * b.size)) != 0)
            return Bad("fill value wider than size");
        } else if constexpr (std::is_same_v<T, BarMap>) {
          GPUVM_RETURN_IF_ERROR(CheckRange(b.bar, b.offset, b.length));
          if (!PageAligned(b.backing_offset)) return Bad("backing offset must be page aligned");
        } else if constexpr (std::is_same_v<T, BarUnmap>) {
          return CheckRange(b.bar, b.offset, b.length);
        } else if constexpr (std::is_same_v<T, Error>) {
          if (b.code == StatusCode::kOk ||
              static_cast<uint32_t>(b.code) > static_cast<uint32_t>(StatusCode::kInternal)) {
            return Bad("error code out of range");
          }
          if (b.text.size() > kMaxErrorText || !Printable(b.text)) return Bad("bad error text");
        } else if constexpr (std::is_same_v<T, Teardown>) {
          if (static_cast<uint32_t>(b.reason) >
              static_cast<uint32_t>(TeardownReason::kAggregatorExit)) {
            return Bad("unknown teardown reason");
          }
        }
        return Status::Ok();
      },
      message.body);
}

Result<std::vector<uint8_t>> Encode(const Message& message) {
  GPUVM_RETURN_IF_ERROR(Validate(message));
  Writer w;
  const MessageType type = TypeOf(message.body);
  w.U32(kMagic);
  w.U16(static_cast<uint16_t>(type));
  w.U16(0);  // flags
  w.U32(message.seq);
  w.U32(0);  // length, patched below
  std::visit(
      [&w](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, Hello>) {
          w.U16(b.min_version);
          w.U16(b.max_version);
          w.U32(0);
          w.Name(b.software);
        } else if constexpr (std::is_same_v<T, HelloAck>) {
          w.U16(b.version);
          w.Zeros(6);
        } else if constexpr (std::is_same_v<T, VmConfig>) {
          w.U16(b.domid);
          w.U8(static_cast<uint8_t>(b.mode));
          w.U8(static_cast<uint8_t>(b.backend));
          w.U32(b.vcpus);
          w.U64(b.guest_ram_bytes);
          w.U64(b.bar0_size);
          w.U64(b.bar1_size);
          w.U64(b.bar3_size);
          w.Name(b.name);
          w.U8(static_cast<uint8_t>(b.variant));
          w.U8(0);
          w.U16(b.channels);
          w.U32(b.vram_mib);
          w.U32(b.share_milli);
          w.U32(0);
        } else if constexpr (std::is_same_v<T, VmAccept>) {
          w.U32(b.vm_id);
          w.U32(b.flags);
          w.U64(b.vram_bytes);
        } else if constexpr (std::is_same_v<T, GuestMemory>) {
          w.U8(static_cast<uint8_t>(b.kind));
          w.Zeros(7);
          w.U64(b.bytes);
        } else if constexpr (std::is_same_v<T, FastLaneOffer>) {
          w.U32(b.version);
          w.U32(0);
        } else if constexpr (std::is_same_v<T, MmioRead> || std::is_same_v<T, MmioWrite>) {
          w.U8(static_cast<uint8_t>(b.bar));
          w.U8(b.size);
          w.U16(0);
          w.U32(b.vcpu);
          w.U64(b.offset);
          if constexpr (std::is_same_v<T, MmioWrite>) w.U64(b.value);
        } else if constexpr (std::is_same_v<T, MmioReadReply>) {
          w.U64(b.value);
        } else if constexpr (std::is_same_v<T, Interrupt>) {
          w.U8(b.asserted ? 1 : 0);
          w.Zeros(7);
        } else if constexpr (std::is_same_v<T, BarMap> || std::is_same_v<T, BarUnmap>) {
          w.U8(static_cast<uint8_t>(b.bar));
          w.Zeros(7);
          w.U64(b.offset);
          w.U64(b.length);
          if constexpr (std::is_same_v<T, BarMap>) w.U64(b.backing_offset);
        } else if constexpr (std::is_same_v<T, Error>) {
          w.U32(static_cast<uint32_t>(b.code));
          w.U16(static_cast<uint16_t>(b.text.size()));
          w.U16(0);
          w.Text(b.text);
        } else if constexpr (std::is_same_v<T, Teardown>) {
          w.U32(static_cast<uint32_t>(b.reason));
          w.U32(0);
        } else if constexpr (std::is_same_v<T, Ping> || std::is_same_v<T, Pong>) {
          w.U64(b.nonce);
        } else if constexpr (std::is_same_v<T, MmioWriteBlock> ||
                             std::is_same_v<T, MmioReadBlock>) {
          w.U8(static_cast<uint8_t>(b.bar));
          w.U8(b.size);
          w.U16(b.count);
          w.U32(b.vcpu);
          w.U64(b.offset);
          if constexpr (std::is_same_v<T, MmioWriteBlock>) w.Bytes(b.data);
        } else if constexpr (std::is_same_v<T, MmioReadBlockReply>) {
          w.U16(static_cast<uint16_t>(b.data.size()));
          w.Zeros(6);
          w.Bytes(b.data);
        } else if constexpr (std::is_same_v<T, Auth>) {
          w.Token(b.token);
        } else if constexpr (std::is_same_v<T, MmioWriteFill>) {
          w.U8(static_cast<uint8_t>(b.bar));
          w.U8(b.size);
          w.U16(0);
          w.U32(b.vcpu);
          w.U64(b.offset);
          w.U32(b.count);
          w.U32(0);
          w.U64(b.value);
        }
      },
      message.body);
  std::vector<uint8_t>& bytes = w.bytes();
  const uint32_t length = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) bytes[12 + i] = static_cast<uint8_t>(length >> (8 * i));
  return std::move(bytes);
}

Result<Message> Decode(std::span<const uint8_t> bytes, size_t descriptors) {
  auto bad = [](const std::string& what) { return Status::DataLoss("ipc: " + what); };
  if (bytes.size() < kHeaderSize) return bad("message shorter than its header");
  if (bytes.size() > kMaxMessageSize) return bad("message longer than any valid one");
  Reader header(bytes.first(kHeaderSize));
  if (header.U32() != kMagic) return bad("bad magic");
  const uint16_t raw_type = header.U16();
  const uint16_t flags = header.U16();
  Message message;
  message.seq = header.U32();
  const uint32_t length = header.U32();
  if (flags != 0) return bad("unknown flags");
  if (length != bytes.size()) return bad("length field disagrees with the packet");
  const TypeInfo* info = Info(raw_type);
  if (info == nullptr) return bad("unknown message type " + std::to_string(raw_type));
  std::span<const uint8_t> payload = bytes.subspan(kHeaderSize);
  const bool variable = info->type == MessageType::kError ||
                        info->type == MessageType::kMmioWriteBlock ||
                        info->type == MessageType::kMmioReadBlockReply;
  if (variable ? payload.size() < info->payload : payload.size() != info->payload) {
    return bad(std::string(MessageTypeName(info->type)) + " has the wrong payload length");
  }
  Reader r(payload);
  bool reserved_zero = true;
  bool names_ok = true;
  switch (info->type) {
    case MessageType::kHello: {
      Hello b;
      b.min_version = r.U16();
      b.max_version = r.U16();
      reserved_zero &= r.Zeros(4);
      names_ok &= r.Name(&b.software);
      message.body = b;
      break;
    }
    case MessageType::kHelloAck: {
      HelloAck b;
      b.version = r.U16();
      reserved_zero &= r.Zeros(6);
      message.body = b;
      break;
    }
    case MessageType::kVmConfig: {
      VmConfig b;
      b.domid = r.U16();
      b.mode = static_cast<VmMode>(r.U8());
      b.backend = static_cast<Backend>(r.U8());
      b.vcpus = r.U32();
      b.guest_ram_bytes = r.U64();
      b.bar0_size = r.U64();
      b.bar1_size = r.U64();
      b.bar3_size = r.U64();
      names_ok &= r.Name(&b.name);
      b.variant = static_cast<VgpuVariant>(r.U8());
      reserved_zero &= r.Zeros(1);
      b.channels = r.U16();
      b.vram_mib = r.U32();
      b.share_milli = r.U32();
      reserved_zero &= r.Zeros(4);
      message.body = b;
      break;
    }
    case MessageType::kVmAccept: {
      VmAccept b;
      b.vm_id = r.U32();
      b.flags = r.U32();
      b.vram_bytes = r.U64();
      message.body = b;
      break;
    }
    case MessageType::kGuestMemory: {
      GuestMemory b;
      b.kind = static_cast<GuestMemoryKind>(r.U8());
      reserved_zero &= r.Zeros(7);
      b.bytes = r.U64();
      message.body = b;
      break;
    }
    case MessageType::kGuestMemoryAck:
      message.body = GuestMemoryAck{};
      break;
    case MessageType::kFastLane: {
      FastLaneOffer b;
      b.version = r.U32();
      reserved_zero &= r.Zeros(4);
      message.body = b;
      break;
    }
    case MessageType::kFastLaneAck:
      message.body = FastLaneAck{};
      break;
    case MessageType::kAuth:
      message.body = Auth{r.Token()};
      break;
    case MessageType::kAuthAck:
      message.body = AuthAck{};
      break;
    case MessageType::kMmioRead:
    case MessageType::kMmioWrite: {
      const Bar bar = static_cast<Bar>(r.U8());
      const uint8_t size = r.U8();
      reserved_zero &= r.Zeros(2);
      const uint32_t vcpu = r.U32();
      const uint64_t offset = r.U64();
      if (info->type == MessageType::kMmioRead) {
        message.body = MmioRead{bar, size, vcpu, offset};
      } else {
        message.body = MmioWrite{bar, size, vcpu, offset, r.U64()};
      }
      break;
    }
    case MessageType::kMmioReadReply:
      message.body = MmioReadReply{r.U64()};
      break;
    case MessageType::kMmioWriteAck:
      message.body = MmioWriteAck{};
      break;
    case MessageType::kInterrupt: {
      const uint8_t level = r.U8();
      reserved_zero &= r.Zeros(7);
      if (level > 1) return bad("interrupt level must be 0 or 1");
      message.body = Interrupt{level == 1};
      break;
    }
    case MessageType::kBarMap:
    case MessageType::kBarUnmap: {
      const Bar bar = static_cast<Bar>(r.U8());
      reserved_zero &= r.Zeros(7);
      const uint64_t offset = r.U64();
      const uint64_t length = r.U64();
      if (info->type == MessageType::kBarMap) {
        message.body = BarMap{bar, offset, length, r.U64()};
      } else {
        message.body = BarUnmap{bar, offset, length};
      }
      break;
    }
    case MessageType::kBarMapAck:
      message.body = BarMapAck{};
      break;
    case MessageType::kError: {
      Error b;
      const uint32_t code = r.U32();
      const uint16_t text_length = r.U16();
      reserved_zero &= r.Zeros(2);
      if (payload.size() != info->payload + text_length) return bad("error text length mismatch");
      if (code > static_cast<uint32_t>(StatusCode::kInternal))
        return bad("error code out of range");
      b.code = static_cast<StatusCode>(code);
      b.text = r.Text(text_length);
      message.body = b;
      break;
    }
    case MessageType::kTeardown: {
      const uint32_t reason = r.U32();
      reserved_zero &= r.Zeros(4);
      if (reason > static_cast<uint32_t>(TeardownReason::kAggregatorExit)) {
        return bad("unknown teardown reason");
      }
      message.body = Teardown{static_cast<TeardownReason>(reason)};
      break;
    }
    case MessageType::kTeardownAck:
      message.body = TeardownAck{};
      break;
    case MessageType::kPing:
      message.body = Ping{r.U64()};
      break;
    case MessageType::kPong:
      message.body = Pong{r.U64()};
      break;
    case MessageType::kMmioWriteBlock:
    case MessageType::kMmioReadBlock: {
      const Bar bar = static_cast<Bar>(r.U8());
      const uint8_t size = r.U8();
      const uint16_t count = r.U16();
      const uint32_t vcpu = r.U32();
      const uint64_t offset = r.U64();
      if (info->type == MessageType::kMmioReadBlock) {
        message.body = MmioReadBlock{bar, size, count, vcpu, offset};
        break;
      }
      // The data must be exactly count * size bytes (checked before it is read).
      if (payload.size() != info->payload + size_t{count} * size) {
        return bad("MMIO_WRITE_BLOCK data length disagrees with its count");
      }
      message.body =
          MmioWriteBlock{bar, size, count, vcpu, offset, r.Bytes(payload.size() - info->payload)};
      break;
    }
    case MessageType::kMmioWriteFill: {
      MmioWriteFill b;
      b.bar = static_cast<Bar>(r.U8());
      b.size = r.U8();
      reserved_zero &= r.Zeros(2);
      b.vcpu = r.U32();
      b.offset = r.U64();
      b.count = r.U32();
      reserved_zero &= r.Zeros(4);
      b.value = r.U64();
      message.body = b;
      break;
    }
    case MessageType::kMmioReadBlockReply: {
      const uint16_t data_length = r.U16();
      reserved_zero &= r.Zeros(6);
      if (payload.size() != info->payload + data_length) return bad("block reply length mismatch");
      message.body = MmioReadBlockReply{r.Bytes(data_length)};
      break;
    }
  }
  if (!reserved_zero) return bad("reserved bytes are not zero");
  if (!names_ok) return bad("name field is not NUL-padded printable ASCII");
  if (Status valid = Validate(message); !valid.ok()) return bad(valid.message());
  if (descriptors != DescriptorCount(message.body)) {
    return bad(std::string(MessageTypeName(info->type)) + " arrived with " +
               std::to_string(descriptors) + " descriptors");
  }
  return message;
}

}  // namespace gpuvm::ipc
