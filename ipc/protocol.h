// The device model <-> aggregator protocol, version 5: message types and their fields. The wire
// format, validation rules and conversation are specified in docs/IPC.md; this header is its
// constants, and codec.h is the only code that turns bytes into these structs (and back).
//
// One unix SOCK_SEQPACKET connection per VM: gpuvm-dm connects to gpuvm-aggregator. Every message
// is one packet: a 16-byte header and a fixed-layout little-endian payload. Descriptors travel by
// SCM_RIGHTS with the two messages that need one (GUEST_MEMORY from a local VM, BAR_MAP).
//
// Threading: plain values.
#ifndef GPUVM_IPC_PROTOCOL_H_
#define GPUVM_IPC_PROTOCOL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace gpuvm::ipc {

inline constexpr uint32_t kMagic = 0x4d445647;  // bytes "GVDM"
// Version 2 adds the block MMIO messages (MMIO_WRITE_BLOCK, MMIO_READ_BLOCK and its reply);
// version 3 lets a block carry a whole page (kMaxBlockBytes) instead of 480 bytes; version 4 adds
// MMIO_WRITE_FILL (a rep stos: one value stored into up to kMaxFillCount consecutive elements);
// version 5 adds AUTH: a device model proves with the VM's one-time token that the launcher or the
// toolstack started it (docs/SECURITY.md) before VM_CONFIG. A peer offers a range in HELLO and the
// aggregator picks the highest both speak; both ends refuse anything below version 5, so a device
// model that cannot authenticate is told "no common protocol version" instead of being served;
// version 6 types the VM's configuration: VM_CONFIG carries the fv/pv variant, VRAM, channel count
// and GPU share as fields, and the name is only a name (versions 1-5 sent them inside the name as
// NAME@MODE,MiB,chN,shareP). Both ends refuse anything below version 6: an older device model
// would send options the aggregator no longer reads from names, so it is told so at HELLO;
// version 7 adds the pv variant pvdrm (a PVDRM backend's session: pv-multicall underneath, listed
// as pvdrm). Version 6 peers are still served; they never send it.
inline constexpr uint16_t kProtocolVersion = 7;
inline constexpr uint16_t kMinProtocolVersion = 6;
inline constexpr uint16_t kBlockProtocolVersion = 2;        // the first version with block messages
inline constexpr uint16_t kPageBlockProtocolVersion = 3;    // the first with page-sized blocks
inline constexpr uint16_t kFillProtocolVersion = 4;         // the first with MMIO_WRITE_FILL
inline constexpr uint16_t kAuthProtocolVersion = 5;         // the first with AUTH (required)
inline constexpr uint16_t kTypedConfigProtocolVersion = 6;  // the first with typed VM_CONFIG
inline constexpr uint16_t kPvdrmProtocolVersion = 7;        // the first with the variant pvdrm
inline constexpr size_t kHeaderSize = 16;
// A block message carrying a page: header, the fixed part (16 bytes), 4096 data bytes.
inline constexpr size_t kMaxMessageSize = 4096 + 32;
inline constexpr size_t kNameSize = 32;  // NUL-padded printable ASCII
inline constexpr size_t kMaxErrorText = 256;
// The data of one block message: what is left of a maximal packet after the header and the fixed
// part (16 bytes).
inline constexpr size_t kMaxBlockBytes = kMaxMessageSize - kHeaderSize - 16;
// What a block may carry in a version 2 session (a peer that speaks no more keeps 512-byte
// packets).
inline constexpr size_t kVersion2MaxBlockBytes = 512 - kHeaderSize - 16;
// The most elements one MMIO_WRITE_FILL stores: Xen's emulator clips a rep string instruction to
// 4096 repetitions per ioreq (hvmemul_linear_to_phys), so one guest rep stos needs at most one.
inline constexpr uint32_t kMaxFillCount = 4096;

enum class MessageType : uint16_t {
  kHello = 0x0001,           // dm -> agg, request
  kHelloAck = 0x0002,        // agg -> dm, reply
  kVmConfig = 0x0003,        // dm -> agg, request
  kVmAccept = 0x0004,        // agg -> dm, reply
  kGuestMemory = 0x0005,     // dm -> agg, request (+1 fd for a local VM)
  kGuestMemoryAck = 0x0006,  // agg -> dm, reply
  kFastLane = 0x0007,        // dm -> agg, request (+3 fds): MMIO moves to a shared-memory lane
  kFastLaneAck = 0x0008,     // agg -> dm, reply
  kAuth = 0x0009,            // dm -> agg, request (version 5): the VM's token
  kAuthAck = 0x000a,         // agg -> dm, reply
  kMmioRead = 0x0010,        // dm -> agg, request
  kMmioReadReply = 0x0011,   // agg -> dm, reply
  kMmioWrite = 0x0012,       // dm -> agg, request
  kMmioWriteAck = 0x0013,    // agg -> dm, reply (also to MMIO_WRITE_BLOCK)
  kMmioWriteBlock = 0x0014,  // dm -> agg, request (version 2): consecutive elements of a rep write
  kMmioReadBlock = 0x0015,   // dm -> agg, request (version 2): consecutive elements of a rep read
  kMmioReadBlockReply = 0x0016,  // agg -> dm, reply
  kMmioWriteFill = 0x0017,  // dm -> agg, request (version 4): one value into consecutive elements
  kInterrupt = 0x0020,      // agg -> dm, notification (seq 0)
  kBarMap = 0x0030,         // agg -> dm, request (+1 fd): map a BAR range straight to memory
  kBarUnmap = 0x0031,       // agg -> dm, request: trap that range again
  kBarMapAck = 0x0032,      // dm -> agg, reply to either
  kError = 0x00f0,          // either way: reply (seq of the request) or fatal notification (seq 0)
  kTeardown = 0x00f1,       // either way, request
  kTeardownAck = 0x00f2,    // reply
  kPing = 0x00f3,           // either way, request
  kPong = 0x00f4,           // reply
};

// The BARs of the virtual GPU, by PCI region index (BAR1 and BAR3 are 64-bit and take two slots).
enum class Bar : uint8_t { kBar0 = 0, kBar1 = 1, kBar3 = 3 };
enum class VmMode : uint8_t { kPassThrough = 1, kFullVirtualization = 2, kParaVirtualization = 3 };
enum class Backend : uint8_t { kLocal = 1, kXen = 2 };
// Which fv or pv flavour of the virtual GPU a VM wants (docs/FULL-VIRTUALIZATION.md,
// docs/PARAVIRT.md); kDefault: the aggregator's default (fv: its --fv-mode; pv: multicall). A pt
// VM sends kDefault; an fv VM one of the fv variants, a pv VM one of the pv ones.
enum class VgpuVariant : uint8_t {
  kDefault = 0,
  kFvNaive = 1,
  kFvLazy = 2,
  kFvBarRemap = 3,
  kFvOptimized = 4,
  kPvNaive = 5,
  kPvMulticall = 6,
  kPvDrm = 7,  // version 7: a PVDRM backend's session (page tables as multicalls)
};
// "naive", "lazy", "bar-remap", "optimized" (fv), "naive", "multicall", "pvdrm" (pv), "default".
const char* VgpuVariantName(VgpuVariant variant);
// Parses a variant word for `mode` (fv: naive, lazy, bar-remap|remap, optimized|opt; pv: naive,
// multicall|mc, pvdrm); InvalidArgument naming the words `mode` takes (pt takes none).
Result<VgpuVariant> ParseVgpuVariant(VmMode mode, std::string_view word);
// A share in VM_CONFIG: thousandths of a percent (0..100000), or none.
inline constexpr uint32_t kNoShare = 0xffffffffu;
inline constexpr uint32_t kMaxShareMilli = 100000;
inline constexpr uint32_t kMaxVramMib = 1u << 20;  // 1 TiB: no VM asks for more
inline constexpr uint16_t kMaxVmChannels = 128;    // the GPU's channels
enum class GuestMemoryKind : uint8_t { kLocalMemfd = 1, kXenDomain = 2 };
enum class TeardownReason : uint32_t {
  kNormal = 0,          // the VM shut down
  kGuestGone = 1,       // the VM process or domain died
  kProtocolError = 2,   // the peer broke the protocol
  kAggregatorExit = 3,  // the aggregator is shutting down
};

struct Hello {
  uint16_t min_version = kMinProtocolVersion;
  uint16_t max_version = kProtocolVersion;
  std::string software;  // e.g. "gpuvm-dm"; <= kNameSize - 1 printable ASCII
  friend bool operator==(const Hello&, const Hello&) = default;
};
struct HelloAck {
  uint16_t version = kProtocolVersion;
  friend bool operator==(const HelloAck&, const HelloAck&) = default;
};
// A VM's one-time token (docs/SECURITY.md): 32 random bytes the aggregator issues for one domain
// on its control socket (`vm-token DOMID`); the launcher or toolstack hands it to that VM's device
// model, which presents it in AUTH. Written as 64 lowercase hex digits outside the wire.
inline constexpr size_t kVmTokenSize = 32;
using VmToken = std::array<uint8_t, kVmTokenSize>;
// 64 lowercase hex digits.
std::string FormatVmToken(const VmToken& token);
// 64 hex digits (either case), optionally followed by one newline (a token file); anything else
// is InvalidArgument (the message never echoes the text: it may be a secret).
Result<VmToken> ParseVmToken(std::string_view text);

struct Auth {
  VmToken token{};
  friend bool operator==(const Auth&, const Auth&) = default;
};
struct AuthAck {
  friend bool operator==(const AuthAck&, const AuthAck&) = default;
};
struct VmConfig {
  uint16_t domid = 0;
  VmMode mode = VmMode::kPassThrough;
  Backend backend = Backend::kLocal;
  uint32_t vcpus = 1;            // 1..128
  uint64_t guest_ram_bytes = 0;  // whole pages, > 0
  uint64_t bar0_size = 0;        // powers of two >= 4 KiB
  uint64_t bar1_size = 0;
  uint64_t bar3_size = 0;
  std::string name;  // NAME only: 1..31 of [A-Za-z0-9._-] (base/vm_name.h)
  // Since version 6. fv and pv only (a pt VM sends kDefault and zeros): the variant, the VRAM the
  // VM sees in MiB (0: the aggregator's default; <= kMaxVramMib), its channel count (0: default;
  // <= kMaxVmChannels). Any mode: its GPU share in thousandths of a percent, or kNoShare (the
  // operator's --vm-share or the scheduler's default applies).
  VgpuVariant variant = VgpuVariant::kDefault;
  uint32_t vram_mib = 0;
  uint16_t channels = 0;
  uint32_t share_milli = kNoShare;
  friend bool operator==(const VmConfig&, const VmConfig&) = default;
};
struct VmAccept {
  uint32_t vm_id = 0;
  uint32_t flags = 0;       // kAcceptWantsGuestMemory | kAcceptFastLane
  uint64_t vram_bytes = 0;  // the VRAM this VM sees
  friend bool operator==(const VmAccept&, const VmAccept&) = default;
};
inline constexpr uint32_t kAcceptWantsGuestMemory = 1u << 0;
inline constexpr uint32_t kAcceptFastLane = 1u << 1;  // the aggregator takes FAST_LANE
struct GuestMemory {
  GuestMemoryKind kind = GuestMemoryKind::kLocalMemfd;
  uint64_t bytes = 0;  // whole pages, > 0; with kLocalMemfd the memfd rides along
  friend bool operator==(const GuestMemory&, const GuestMemory&) = default;
};
struct GuestMemoryAck {
  friend bool operator==(const GuestMemoryAck&, const GuestMemoryAck&) = default;
};
// Offers the shared-memory lane (fast_lane.h). Descriptors: the lane memfd, the aggregator's
// doorbell, the device model's doorbell.
struct FastLaneOffer {
  uint32_t version = 1;
  friend bool operator==(const FastLaneOffer&, const FastLaneOffer&) = default;
};
struct FastLaneAck {
  friend bool operator==(const FastLaneAck&, const FastLaneAck&) = default;
};
struct MmioRead {
  Bar bar = Bar::kBar0;
  uint8_t size = 4;  // 1, 2, 4, 8
  uint32_t vcpu = 0;
  uint64_t offset = 0;  // in the BAR; BAR0 accesses are naturally aligned
  friend bool operator==(const MmioRead&, const MmioRead&) = default;
};
struct MmioReadReply {
  uint64_t value = 0;
  friend bool operator==(const MmioReadReply&, const MmioReadReply&) = default;
};
struct MmioWrite {
  Bar bar = Bar::kBar0;
  uint8_t size = 4;
  uint32_t vcpu = 0;
  uint64_t offset = 0;
  uint64_t value = 0;  // no bits above 8 * size
  friend bool operator==(const MmioWrite&, const MmioWrite&) = default;
};
struct MmioWriteAck {
  friend bool operator==(const MmioWriteAck&, const MmioWriteAck&) = default;
};
// `count` consecutive elements of `size` bytes starting at `offset` (ascending), as one rep
// transfer of the guest: the same as that many MMIO_WRITEs / MMIO_READs in order. count * size <=
// kMaxBlockBytes (kVersion2MaxBlockBytes in a version 2 session); BAR0 elements naturally aligned.
// Version 2 and later.
struct MmioWriteBlock {
  Bar bar = Bar::kBar1;
  uint8_t size = 8;
  uint16_t count = 0;
  uint32_t vcpu = 0;
  uint64_t offset = 0;
  std::vector<uint8_t> data;  // count * size bytes, element i at i * size, little endian
  friend bool operator==(const MmioWriteBlock&, const MmioWriteBlock&) = default;
};
struct MmioReadBlock {
  Bar bar = Bar::kBar1;
  uint8_t size = 8;
  uint16_t count = 0;
  uint32_t vcpu = 0;
  uint64_t offset = 0;
  friend bool operator==(const MmioReadBlock&, const MmioReadBlock&) = default;
};
struct MmioReadBlockReply {
  std::vector<uint8_t> data;  // count * size bytes of the request (the requester checks)
  friend bool operator==(const MmioReadBlockReply&, const MmioReadBlockReply&) = default;
};
// A guest's rep stos: `value` stored into `count` consecutive elements of `size` bytes from
// `offset` upwards, the same as that many MMIO_WRITEs in order (answered MMIO_WRITE_ACK). 1 <=
// count <= kMaxFillCount; BAR0 elements naturally aligned; no value bits above 8 * size. Version 4
// and later.
struct MmioWriteFill {
  Bar bar = Bar::kBar1;
  uint8_t size = 8;
  uint32_t count = 0;
  uint32_t vcpu = 0;
  uint64_t offset = 0;
  uint64_t value = 0;
  friend bool operator==(const MmioWriteFill&, const MmioWriteFill&) = default;
};
struct Interrupt {
  bool asserted = false;  // the level of the device's interrupt line
  friend bool operator==(const Interrupt&, const Interrupt&) = default;
};
struct BarMap {
  Bar bar = Bar::kBar1;
  uint64_t offset = 0;          // page aligned
  uint64_t length = 0;          // whole pages, > 0
  uint64_t backing_offset = 0;  // page aligned, into the passed descriptor
  friend bool operator==(const BarMap&, const BarMap&) = default;
};
struct BarUnmap {
  Bar bar = Bar::kBar1;
  uint64_t offset = 0;
  uint64_t length = 0;
  friend bool operator==(const BarUnmap&, const BarUnmap&) = default;
};
struct BarMapAck {
  friend bool operator==(const BarMapAck&, const BarMapAck&) = default;
};
struct Error {
  StatusCode code = StatusCode::kInternal;  // never kOk
  std::string text;                         // <= kMaxErrorText printable ASCII
  friend bool operator==(const Error&, const Error&) = default;
};
struct Teardown {
  TeardownReason reason = TeardownReason::kNormal;
  friend bool operator==(const Teardown&, const Teardown&) = default;
};
struct TeardownAck {
  friend bool operator==(const TeardownAck&, const TeardownAck&) = default;
};
struct Ping {
  uint64_t nonce = 0;
  friend bool operator==(const Ping&, const Ping&) = default;
};
struct Pong {
  uint64_t nonce = 0;
  friend bool operator==(const Pong&, const Pong&) = default;
};

using Body =
    std::variant<Hello, HelloAck, VmConfig, VmAccept, GuestMemory, GuestMemoryAck, FastLaneOffer,
                 FastLaneAck, MmioRead, MmioReadReply, MmioWrite, MmioWriteAck, Interrupt, BarMap,
                 BarUnmap, BarMapAck, Error, Teardown, TeardownAck, Ping, Pong, MmioWriteBlock,
                 MmioReadBlock, MmioReadBlockReply, MmioWriteFill, Auth, AuthAck>;

struct Message {
  // Requests carry a non-zero sequence number of the sender's choosing; replies echo it;
  // notifications (INTERRUPT, a fatal ERROR) carry 0.
  uint32_t seq = 0;
  Body body;
  friend bool operator==(const Message&, const Message&) = default;
};

MessageType TypeOf(const Body& body);
std::string_view MessageTypeName(MessageType type);
// How many descriptors travel with a message of this body (0, 1, or 3 for FAST_LANE).
size_t DescriptorCount(const Body& body);

}  // namespace gpuvm::ipc

#endif  // GPUVM_IPC_PROTOCOL_H_
