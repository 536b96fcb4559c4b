// PVDRM's codec (docs/PVDRM.md): typed requests and responses, and the only code that turns wire
// structs (wire.h) into them. Both ends link it: the backend decodes what the frontend put in the
// ring, the frontend decodes the backend's responses — each on a private copy (RING_COPY_*), and
// neither trusts the other: a decoder accepts only the one canonical encoding of a value (every
// reserved, output and trailing byte zero; counts within bounds and consistent), so that
// Encode(Decode(bytes)) == bytes for every accepted input (the fuzz target checks it).
//
// Threading: pure functions over values.
#ifndef GPUVM_PVDRM_FRONTEND_PROTOCOL_CODEC_H_
#define GPUVM_PVDRM_FRONTEND_PROTOCOL_CODEC_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "pvdrm-frontend/protocol/wire.h"

namespace gpuvm::pvdrm {

// "GEM_NEW", or nullopt for a number that is no Op.
std::optional<Op> OpFromWire(uint16_t raw);
std::string_view OpName(Op op);

// A validated page list: nr_pages pages whose grant references sit in the `indirect` pages.
struct PageList {
  uint32_t nr_pages = 0;
  std::vector<grant_ref_t> indirect;  // ceil(nr_pages / kRefsPerIndirectPage) references
};
// The number of indirect pages `pages` grant references need.
constexpr uint32_t IndirectPagesFor(uint32_t pages) {
  return (pages + kRefsPerIndirectPage - 1) / kRefsPerIndirectPage;
}

// Request bodies, one per Op. `arg` is the ioctl's struct, inputs only (outputs zero).
struct FileOpen {
  static constexpr Op kOp = Op::kFileOpen;
  PageList area;  // the file's arrays area (1..kMaxAreaPages), or none
};
struct FileClose {
  static constexpr Op kOp = Op::kFileClose;
};
struct GetParam {
  static constexpr Op kOp = Op::kGetParam;
  drm_nouveau_getparam arg{};
};
struct ChannelAlloc {
  static constexpr Op kOp = Op::kChannelAlloc;
  drm_nouveau_channel_alloc arg{};  // fb_ctxdma_handle, tt_ctxdma_handle
};
struct ChannelFree {
  static constexpr Op kOp = Op::kChannelFree;
  drm_nouveau_channel_free arg{};
};
struct GrobjAlloc {
  static constexpr Op kOp = Op::kGrobjAlloc;
  drm_nouveau_grobj_alloc arg{};
};
struct NotifierobjAlloc {
  static constexpr Op kOp = Op::kNotifierobjAlloc;
  drm_nouveau_notifierobj_alloc arg{};  // channel, handle, size
};
struct GpuobjFree {
  static constexpr Op kOp = Op::kGpuobjFree;
  drm_nouveau_gpuobj_free arg{};
};
struct GemNew {
  static constexpr Op kOp = Op::kGemNew;
  drm_nouveau_gem_new arg{};  // info.size, info.domain, info.tile_*, channel_hint, align
  PageList pages;             // none, or exactly the object's pages
};
struct GemInfo {
  static constexpr Op kOp = Op::kGemInfo;
  drm_nouveau_gem_info arg{};  // handle
};
struct GemClose {
  static constexpr Op kOp = Op::kGemClose;
  drm_gem_close arg{};
};
struct GemPushbuf {
  static constexpr Op kOp = Op::kGemPushbuf;
  drm_nouveau_gem_pushbuf arg{};  // channel and the three counts
  PageList data;                  // the arrays, PushbufLayout; none: in the file's area
  // Whether the arrays are in the file's area, at byte arg.buffers.
  bool InArea() const;
};
struct GemCpuPrep {
  static constexpr Op kOp = Op::kGemCpuPrep;
  drm_nouveau_gem_cpu_prep arg{};
};
struct GemCpuFini {
  static constexpr Op kOp = Op::kGemCpuFini;
  drm_nouveau_gem_cpu_fini arg{};
};

using RequestBody = std::variant<FileOpen, FileClose, GetParam, ChannelAlloc, ChannelFree,
                                 GrobjAlloc, NotifierobjAlloc, GpuobjFree, GemNew, GemInfo,
                                 GemClose, GemPushbuf, GemCpuPrep, GemCpuFini>;

struct Request {
  uint64_t id = 0;
  uint32_t file = 0;
  RequestBody body;
  Op op() const;
};

// Response bodies: what the ioctl writes back, by op (none for ops that write nothing, and for
// every error).
using ResponseBody =
    std::variant<std::monostate, drm_nouveau_getparam, drm_nouveau_channel_alloc,
                 drm_nouveau_notifierobj_alloc, drm_nouveau_gem_info, drm_nouveau_gem_pushbuf>;

struct Response {
  uint64_t id = 0;
  Op op = Op::kFileOpen;
  int32_t status = 0;  // 0 or -errno (-4095..-1)
  ResponseBody body;
};
inline constexpr int32_t kMinStatus = -4095;

// A response carrying only an error (status < 0).
Response ErrorResponse(uint64_t id, Op op, int32_t status);

// Writes every byte of `out` (no stale bytes reach the peer). The caller builds only valid values;
// an invalid one is still encoded as given and its peer refuses it.
void EncodeRequest(const Request& request, pvdrm_request& out);
void EncodeResponse(const Response& response, pvdrm_response& out);

// A request the decoder refused: what the backend answers (the header's id and op as sent, so the
// frontend can match the error to its call).
struct RequestError {
  uint64_t id = 0;
  uint16_t raw_op = 0;
  int32_t status = 0;  // -ENOTTY: unknown op; -EINVAL: malformed
  std::string message;
};
// Decodes a private copy of a request. Checks everything that needs no state: known op, file != 0,
// reserved and output fields zero, counts within bounds and consistent, page lists canonical.
std::variant<Request, RequestError> DecodeRequest(const pvdrm_request& copy);

// Decodes a private copy of a response to a request of op `expected` (the caller found the id
// among its outstanding requests). DataLoss for anything else than the canonical encoding.
Result<Response> DecodeResponse(const pvdrm_response& copy, Op expected);

// Where a pushbuf's arrays sit in its data pages (wire.h, pvdrm_gem_pushbuf).
struct PushbufLayout {
  size_t relocs_offset = 0;  // the bos start at 0
  size_t push_offset = 0;
  size_t bytes = 0;
  uint32_t pages = 0;
};
// Counts must be within NOUVEAU_GEM_MAX_BUFFERS/RELOCS/PUSH (DecodeRequest checks them).
PushbufLayout LayoutPushbuf(uint32_t nr_buffers, uint32_t nr_relocs, uint32_t nr_push);

struct PushbufArrays {
  std::vector<drm_nouveau_gem_pushbuf_bo> buffers;
  std::vector<drm_nouveau_gem_pushbuf_reloc> relocs;
  std::vector<drm_nouveau_gem_pushbuf_push> push;
};
// Copies the arrays of a decoded pushbuf out of its mapped data pages (at least LayoutPushbuf's
// bytes) and checks their indices: every push's and reloc's bo index below nr_buffers, push pads
// zero. InvalidArgument otherwise.
Result<PushbufArrays> CopyPushbufArrays(const drm_nouveau_gem_pushbuf& pushbuf,
                                        std::span<const uint8_t> data);
// Writes the arrays into data pages (the frontend's side): LayoutPushbuf's bytes.
void WritePushbufArrays(const PushbufArrays& arrays, std::span<uint8_t> data);

// The grant references of a page list's pages, out of a private copy of its indirect pages
// (list.indirect.size() pages, in order).
std::vector<grant_ref_t> RefsOfIndirectPages(const PageList& list,
                                             std::span<const uint8_t> indirect_pages);

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_PROTOCOL_CODEC_H_
