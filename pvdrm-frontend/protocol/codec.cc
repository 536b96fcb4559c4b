#include "pvdrm-frontend/protocol/codec.h"

#include <algorithm>
#include <cerrno>
#include <string>

namespace gpuvm::pvdrm {
namespace {

constexpr Op kAllOps[] = {
    Op::kFileOpen,    Op::kFileClose,  Op::kGemClose,         Op::kGetParam,   Op::kChannelAlloc,
    Op::kChannelFree, Op::kGrobjAlloc, Op::kNotifierobjAlloc, Op::kGpuobjFree, Op::kGemNew,
    Op::kGemPushbuf,  Op::kGemCpuPrep, Op::kGemCpuFini,       Op::kGemInfo,
};

constexpr uint32_t kKnownGemDomains = NOUVEAU_GEM_DOMAIN_CPU | NOUVEAU_GEM_DOMAIN_VRAM |
                                      NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_MAPPABLE |
                                      NOUVEAU_GEM_DOMAIN_COHERENT;
constexpr uint32_t kKnownCpuPrepFlags = NOUVEAU_GEM_CPU_PREP_NOWAIT | NOUVEAU_GEM_CPU_PREP_WRITE;

bool AllZero(std::span<const uint8_t> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
}
template <typename T>
bool AllZero(const T& value) {
  return AllZero(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
}

// The op's struct out of a payload whose bytes after it must all be zero.
template <typename T>
bool Take(std::span<const uint8_t> payload, T& out) {
  static_assert(sizeof(T) <= kPayloadBytes);
  std::memcpy(&out, payload.data(), sizeof(T));
  return AllZero(payload.subspan(sizeof(T)));
}

template <typename T>
void Put(const T& value, uint8_t* payload) {
  std::memcpy(payload, &value, sizeof(T));
}

void EncodePageList(const PageList& list, pvdrm_page_list& out) {
  std::memset(&out, 0, sizeof(out));
  out.nr_pages = list.nr_pages;
  out.nr_indirect = static_cast<uint32_t>(list.indirect.size());
  for (size_t i = 0; i < list.indirect.size() && i < kMaxIndirectPages; ++i) {
    out.indirect[i] = list.indirect[i];
  }
}

// Empty on success, else why the list is not canonical.
std::string DecodePageList(const pvdrm_page_list& in, PageList& out) {
  if (in.nr_pages > kMaxListedPages) {
    return "page list of " + std::to_string(in.nr_pages) + " pages (at most " +
           std::to_string(kMaxListedPages) + ")";
  }
  if (in.nr_indirect != IndirectPagesFor(in.nr_pages)) {
    return "page list of " + std::to_string(in.nr_pages) + " pages in " +
           std::to_string(in.nr_indirect) + " indirect pages (needs " +
           std::to_string(IndirectPagesFor(in.nr_pages)) + ")";
  }
  for (uint32_t i = in.nr_indirect; i < kMaxIndirectPages; ++i) {
    if (in.indirect[i] != 0) return "unused indirect page slot " + std::to_string(i) + " not zero";
  }
  out.nr_pages = in.nr_pages;
  out.indirect.assign(in.indirect, in.indirect + in.nr_indirect);
  return {};
}

struct Decoded {
  RequestBody body;
  std::string error;  // empty: accepted
};

Decoded Refuse(std::string why) { return {FileOpen{}, std::move(why)}; }

Decoded DecodeBody(Op op, std::span<const uint8_t> p) {
  const std::string trailing = "bytes after the op's struct not zero";
  switch (op) {
    case Op::kFileOpen: {
      pvdrm_file_open wire;
      if (!Take(p, wire)) return Refuse(trailing);
      FileOpen b;
      if (std::string e = DecodePageList(wire.area, b.area); !e.empty()) return Refuse(e);
      if (b.area.nr_pages > kMaxAreaPages) {
        return Refuse("file_open area of " + std::to_string(b.area.nr_pages) + " pages (at most " +
                      std::to_string(kMaxAreaPages) + ")");
      }
      return {b, {}};
    }
    case Op::kFileClose:
      if (!AllZero(p)) return Refuse("payload of " + std::string(OpName(op)) + " not zero");
      return {FileClose{}, {}};
    case Op::kGetParam: {
      GetParam b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.value != 0) return Refuse("getparam value (an output) not zero");
      return {b, {}};
    }
    case Op::kChannelAlloc: {
      ChannelAlloc b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      drm_nouveau_channel_alloc outputs = b.arg;
      outputs.fb_ctxdma_handle = outputs.tt_ctxdma_handle = 0;
      if (!AllZero(outputs)) return Refuse("channel_alloc outputs not zero");
      return {b, {}};
    }
    case Op::kChannelFree: {
      ChannelFree b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.channel < 0) return Refuse("negative channel");
      return {b, {}};
    }
    case Op::kGrobjAlloc: {
      GrobjAlloc b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.channel < 0) return Refuse("negative channel");
      return {b, {}};
    }
    case Op::kNotifierobjAlloc: {
      NotifierobjAlloc b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.offset != 0) return Refuse("notifierobj offset (an output) not zero");
      if (b.arg.size == 0) return Refuse("notifierobj of size 0");
      return {b, {}};
    }
    case Op::kGpuobjFree: {
      GpuobjFree b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.channel < 0) return Refuse("negative channel");
      return {b, {}};
    }
    case Op::kGemNew: {
      pvdrm_gem_new wire;
      if (!Take(p, wire)) return Refuse(trailing);
      GemNew b;
      b.arg = wire.gem;
      const drm_nouveau_gem_info& info = b.arg.info;
      if (info.handle != 0 || info.offset != 0 || info.map_handle != 0) {
        return Refuse("gem_new handle/offset/map_handle (outputs) not zero");
      }
      if (info.size == 0) return Refuse("gem_new of size 0");
      if (info.domain == 0 || (info.domain & ~kKnownGemDomains) != 0) {
        return Refuse("gem_new domain " + std::to_string(info.domain) + " has no or unknown bits");
      }
      if (std::string e = DecodePageList(wire.pages, b.pages); !e.empty()) return Refuse(e);
      if (b.pages.nr_pages != 0) {
        if (info.size > kMaxGemFrames * kPageBytes) {
          return Refuse("gem_new with pages larger than " +
                        std::to_string(kMaxGemFrames * kPageBytes) + " bytes");
        }
        const uint64_t frames = (info.size + kPageBytes - 1) / kPageBytes;
        const uint64_t want = (frames + kFramesPerListPage - 1) / kFramesPerListPage;
        if (b.pages.nr_pages != want) {
          return Refuse("gem_new of " + std::to_string(info.size) + " bytes with " +
                        std::to_string(b.pages.nr_pages) + " frame-list pages (needs " +
                        std::to_string(want) + ")");
        }
      }
      return {b, {}};
    }
    case Op::kGemInfo: {
      GemInfo b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      drm_nouveau_gem_info outputs = b.arg;
      outputs.handle = 0;
      if (!AllZero(outputs)) return Refuse("gem_info outputs not zero");
      return {b, {}};
    }
    case Op::kGemClose: {
      GemClose b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if (b.arg.pad != 0) return Refuse("gem_close pad not zero");
      return {b, {}};
    }
    case Op::kGemPushbuf: {
      pvdrm_gem_pushbuf wire;
      if (!Take(p, wire)) return Refuse(trailing);
      GemPushbuf b;
      b.arg = wire.pushbuf;
      const drm_nouveau_gem_pushbuf& a = b.arg;
      if (a.relocs != 0 || a.push != 0) {
        return Refuse("pushbuf relocs/push pointers not zero (the arrays travel in granted pages)");
      }
      if (a.suffix0 != 0 || a.suffix1 != 0 || a.vram_available != 0 || a.gart_available != 0) {
        return Refuse("pushbuf outputs not zero");
      }
      if (a.nr_buffers > NOUVEAU_GEM_MAX_BUFFERS || a.nr_relocs > NOUVEAU_GEM_MAX_RELOCS ||
          a.nr_push > NOUVEAU_GEM_MAX_PUSH) {
        return Refuse("pushbuf counts " + std::to_string(a.nr_buffers) + "/" +
                      std::to_string(a.nr_relocs) + "/" + std::to_string(a.nr_push) +
                      " past nouveau's limits");
      }
      if (std::string e = DecodePageList(wire.data, b.data); !e.empty()) return Refuse(e);
      const PushbufLayout layout = LayoutPushbuf(a.nr_buffers, a.nr_relocs, a.nr_push);
      if (b.InArea()) {
        // In the file's area (which the connection checks the arrays fit).
        if (a.buffers % 8 != 0 || a.buffers > uint64_t{kMaxAreaPages} * kPageBytes - layout.bytes) {
          return Refuse("pushbuf arrays of " + std::to_string(layout.bytes) +
                        " bytes at area offset " + std::to_string(a.buffers) +
                        " (a multiple of 8 inside " + std::to_string(kMaxAreaPages) + " pages)");
        }
        return {b, {}};
      }
      if (a.buffers != 0) {
        return Refuse("pushbuf buffers pointer not zero with the arrays in data pages");
      }
      if (b.data.nr_pages != layout.pages) {
        return Refuse("pushbuf arrays of " + std::to_string(layout.bytes) + " bytes in " +
                      std::to_string(b.data.nr_pages) + " pages (needs " +
                      std::to_string(layout.pages) + ")");
      }
      return {b, {}};
    }
    case Op::kGemCpuPrep: {
      GemCpuPrep b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      if ((b.arg.flags & ~kKnownCpuPrepFlags) != 0) return Refuse("cpu_prep unknown flags");
      return {b, {}};
    }
    case Op::kGemCpuFini: {
      GemCpuFini b;
      if (!Take(p, b.arg)) return Refuse(trailing);
      return {b, {}};
    }
  }
  return Refuse("unknown op");
}

// Which body a successful response to `op` carries.
enum class ResultKind { kNone, kGetParam, kChannelAlloc, kNotifierobj, kGemInfo, kPushbuf };
ResultKind ResultKindOf(Op op) {
  switch (op) {
    case Op::kGetParam:
      return ResultKind::kGetParam;
    case Op::kChannelAlloc:
      return ResultKind::kChannelAlloc;
    case Op::kNotifierobjAlloc:
      return ResultKind::kNotifierobj;
    case Op::kGemNew:
    case Op::kGemInfo:
      return ResultKind::kGemInfo;
    case Op::kGemPushbuf:
      return ResultKind::kPushbuf;
    default:
      return ResultKind::kNone;
  }
}

}  // namespace

std::optional<Op> OpFromWire(uint16_t raw) {
  for (Op op : kAllOps) {
    if (static_cast<uint16_t>(op) == raw) return op;
  }
  return std::nullopt;
}

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kFileOpen:
      return "FILE_OPEN";
    case Op::kFileClose:
      return "FILE_CLOSE";
    case Op::kGemClose:
      return "GEM_CLOSE";
    case Op::kGetParam:
      return "GETPARAM";
    case Op::kChannelAlloc:
      return "CHANNEL_ALLOC";
    case Op::kChannelFree:
      return "CHANNEL_FREE";
    case Op::kGrobjAlloc:
      return "GROBJ_ALLOC";
    case Op::kNotifierobjAlloc:
      return "NOTIFIEROBJ_ALLOC";
    case Op::kGpuobjFree:
      return "GPUOBJ_FREE";
    case Op::kGemNew:
      return "GEM_NEW";
    case Op::kGemPushbuf:
      return "GEM_PUSHBUF";
    case Op::kGemCpuPrep:
      return "GEM_CPU_PREP";
    case Op::kGemCpuFini:
      return "GEM_CPU_FINI";
    case Op::kGemInfo:
      return "GEM_INFO";
  }
  return "?";
}

bool GemPushbuf::InArea() const {
  return data.nr_pages == 0 && LayoutPushbuf(arg.nr_buffers, arg.nr_relocs, arg.nr_push).bytes > 0;
}

Op Request::op() const {
  return std::visit([](const auto& b) { return std::decay_t<decltype(b)>::kOp; }, body);
}

Response ErrorResponse(uint64_t id, Op op, int32_t status) {
  Response r;
  r.id = id;
  r.op = op;
  r.status = status;
  return r;
}

void EncodeRequest(const Request& request, pvdrm_request& out) {
  std::memset(&out, 0, sizeof(out));
  out.id = request.id;
  out.file = request.file;
  out.op = static_cast<uint16_t>(request.op());
  uint8_t* payload = out.u.bytes;
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, FileOpen>) {
          pvdrm_file_open wire{};
          EncodePageList(b.area, wire.area);
          Put(wire, payload);
        } else if constexpr (std::is_same_v<T, GemNew>) {
          pvdrm_gem_new wire{};
          wire.gem = b.arg;
          EncodePageList(b.pages, wire.pages);
          Put(wire, payload);
        } else if constexpr (std::is_same_v<T, GemPushbuf>) {
          pvdrm_gem_pushbuf wire{};
          wire.pushbuf = b.arg;
          EncodePageList(b.data, wire.data);
          Put(wire, payload);
        } else if constexpr (!std::is_same_v<T, FileOpen> && !std::is_same_v<T, FileClose>) {
          Put(b.arg, payload);
        }
      },
      request.body);
}

void EncodeResponse(const Response& response, pvdrm_response& out) {
  std::memset(&out, 0, sizeof(out));
  out.id = response.id;
  out.status = response.status;
  out.op = static_cast<uint16_t>(response.op);
  std::visit(
      [&](const auto& b) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(b)>, std::monostate>) {
          Put(b, out.u.bytes);
        }
      },
      response.body);
}

std::variant<Request, RequestError> DecodeRequest(const pvdrm_request& copy) {
  RequestError error{copy.id, copy.op, -EINVAL, {}};
  const std::optional<Op> op = OpFromWire(copy.op);
  if (!op) {
    error.status = -ENOTTY;
    error.message = "unknown op " + std::to_string(copy.op);
    return error;
  }
  const std::string name(OpName(*op));
  if (copy.reserved != 0) {
    error.message = name + ": reserved header field not zero";
    return error;
  }
  if (copy.file == 0) {
    error.message = name + ": file 0";
    return error;
  }
  Decoded decoded = DecodeBody(*op, std::span<const uint8_t>(copy.u.bytes, kPayloadBytes));
  if (!decoded.error.empty()) {
    error.message = name + ": " + decoded.error;
    return error;
  }
  return Request{copy.id, copy.file, std::move(decoded.body)};
}

Result<Response> DecodeResponse(const pvdrm_response& copy, Op expected) {
  const std::string what =
      "response " + std::to_string(copy.id) + " to " + std::string(OpName(expected)) + ": ";
  if (copy.op != static_cast<uint16_t>(expected)) {
    return Status::DataLoss(what + "carries op " + std::to_string(copy.op));
  }
  if (copy.reserved != 0) return Status::DataLoss(what + "reserved field not zero");
  if (copy.status > 0 || copy.status < kMinStatus) {
    return Status::DataLoss(what + "status " + std::to_string(copy.status) +
                            " is neither 0 nor a negative errno");
  }
  Response r;
  r.id = copy.id;
  r.op = expected;
  r.status = copy.status;
  const std::span<const uint8_t> p(copy.u.bytes, kPayloadBytes);
  const ResultKind kind = copy.status == 0 ? ResultKindOf(expected) : ResultKind::kNone;
  bool canonical = true;
  switch (kind) {
    case ResultKind::kNone:
      canonical = AllZero(p);
      break;
    case ResultKind::kGetParam: {
      drm_nouveau_getparam v;
      canonical = Take(p, v);
      r.body = v;
      break;
    }
    case ResultKind::kChannelAlloc: {
      drm_nouveau_channel_alloc v;
      canonical = Take(p, v);
      if (canonical && (v.channel < 0 || v.nr_subchan > 8)) {
        return Status::DataLoss(what + "impossible channel or subchannel count");
      }
      r.body = v;
      break;
    }
    case ResultKind::kNotifierobj: {
      drm_nouveau_notifierobj_alloc v;
      canonical = Take(p, v);
      r.body = v;
      break;
    }
    case ResultKind::kGemInfo: {
      drm_nouveau_gem_info v;
      canonical = Take(p, v);
      r.body = v;
      break;
    }
    case ResultKind::kPushbuf: {
      drm_nouveau_gem_pushbuf v;
      canonical = Take(p, v);
      if (canonical && (v.buffers != 0 || v.relocs != 0 || v.push != 0)) {
        return Status::DataLoss(what + "pushbuf pointers not zero");
      }
      r.body = v;
      break;
    }
  }
  if (!canonical) return Status::DataLoss(what + "payload bytes past the result not zero");
  return r;
}

PushbufLayout LayoutPushbuf(uint32_t nr_buffers, uint32_t nr_relocs, uint32_t nr_push) {
  PushbufLayout l;
  l.relocs_offset = size_t{nr_buffers} * sizeof(drm_nouveau_gem_pushbuf_bo);
  l.push_offset =
      (l.relocs_offset + size_t{nr_relocs} * sizeof(drm_nouveau_gem_pushbuf_reloc) + 7) &
      ~size_t{7};
  l.bytes = l.push_offset + size_t{nr_push} * sizeof(drm_nouveau_gem_pushbuf_push);
  l.pages = static_cast<uint32_t>((l.bytes + kPageBytes - 1) / kPageBytes);
  return l;
}

Result<PushbufArrays> CopyPushbufArrays(const drm_nouveau_gem_pushbuf& pushbuf,
                                        std::span<const uint8_t> data) {
  const PushbufLayout l = LayoutPushbuf(pushbuf.nr_buffers, pushbuf.nr_relocs, pushbuf.nr_push);
  if (data.size() < l.bytes) {
    return Status::InvalidArgument("pushbuf data of " + std::to_string(data.size()) +
                                   " bytes, needs " + std::to_string(l.bytes));
  }
  PushbufArrays a;
  a.buffers.resize(pushbuf.nr_buffers);
  a.relocs.resize(pushbuf.nr_relocs);
  a.push.resize(pushbuf.nr_push);
  if (!a.buffers.empty()) {
    std::memcpy(a.buffers.data(), data.data(), a.buffers.size() * sizeof(a.buffers[0]));
  }
  if (!a.relocs.empty()) {
    std::memcpy(a.relocs.data(), data.data() + l.relocs_offset,
                a.relocs.size() * sizeof(a.relocs[0]));
  }
  if (!a.push.empty()) {
    std::memcpy(a.push.data(), data.data() + l.push_offset, a.push.size() * sizeof(a.push[0]));
  }
  for (size_t i = 0; i < a.push.size(); ++i) {
    if (a.push[i].bo_index >= pushbuf.nr_buffers || a.push[i].pad != 0) {
      return Status::InvalidArgument("push " + std::to_string(i) + " names bo " +
                                     std::to_string(a.push[i].bo_index) + " of " +
                                     std::to_string(pushbuf.nr_buffers) + " (or its pad is set)");
    }
  }
  for (size_t i = 0; i < a.relocs.size(); ++i) {
    if (a.relocs[i].bo_index >= pushbuf.nr_buffers ||
        a.relocs[i].reloc_bo_index >= pushbuf.nr_buffers) {
      return Status::InvalidArgument("reloc " + std::to_string(i) + " names a bo past " +
                                     std::to_string(pushbuf.nr_buffers));
    }
  }
  return a;
}

void WritePushbufArrays(const PushbufArrays& arrays, std::span<uint8_t> data) {
  const PushbufLayout l = LayoutPushbuf(static_cast<uint32_t>(arrays.buffers.size()),
                                        static_cast<uint32_t>(arrays.relocs.size()),
                                        static_cast<uint32_t>(arrays.push.size()));
  if (l.bytes == 0 || data.size() < l.bytes) return;
  std::memset(data.data(), 0, l.bytes);
  if (!arrays.buffers.empty()) {
    std::memcpy(data.data(), arrays.buffers.data(),
                arrays.buffers.size() * sizeof(arrays.buffers[0]));
  }
  if (!arrays.relocs.empty()) {
    std::memcpy(data.data() + l.relocs_offset, arrays.relocs.data(),
                arrays.relocs.size() * sizeof(arrays.relocs[0]));
  }
  if (!arrays.push.empty()) {
    std::memcpy(data.data() + l.push_offset, arrays.push.data(),
                arrays.push.size() * sizeof(arrays.push[0]));
  }
}

std::vector<grant_ref_t> RefsOfIndirectPages(const PageList& list,
                                             std::span<const uint8_t> indirect_pages) {
  const size_t count = std::min<size_t>(list.nr_pages, indirect_pages.size() / sizeof(grant_ref_t));
  std::vector<grant_ref_t> refs(count);
  if (count != 0) std::memcpy(refs.data(), indirect_pages.data(), count * sizeof(grant_ref_t));
  return refs;
}

}  // namespace gpuvm::pvdrm
