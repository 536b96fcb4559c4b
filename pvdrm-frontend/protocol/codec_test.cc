#include "pvdrm-frontend/protocol/codec.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <vector>

namespace gpuvm::pvdrm {
namespace {

// One valid request of every op, with every input field set to something nonzero.
std::vector<Request> OneOfEach() {
  std::vector<Request> all;
  uint64_t id = 100;
  auto add = [&](RequestBody body) { all.push_back(Request{id++, 7, std::move(body)}); };
  FileOpen open;
  open.area.nr_pages = 16;
  open.area.indirect = {66};
  add(open);
  add(FileClose{});
  GetParam getparam;
  getparam.arg.param = NOUVEAU_GETPARAM_CHIPSET_ID;
  add(getparam);
  ChannelAlloc channel;
  channel.arg.fb_ctxdma_handle = 0xbeef0001;
  channel.arg.tt_ctxdma_handle = 0xbeef0002;
  add(channel);
  ChannelFree channel_free;
  channel_free.arg.channel = 3;
  add(channel_free);
  GrobjAlloc grobj;
  grobj.arg.channel = 3;
  grobj.arg.handle = 0xcafe;
  grobj.arg.oclass = 0x90c0;
  add(grobj);
  NotifierobjAlloc notifier;
  notifier.arg.channel = 3;
  notifier.arg.handle = 0xd00d;
  notifier.arg.size = 4096;
  add(notifier);
  GpuobjFree gpuobj_free;
  gpuobj_free.arg.channel = 3;
  gpuobj_free.arg.handle = 0xcafe;
  add(gpuobj_free);
  GemNew gem_new;
  gem_new.arg.info.size = 3 * kPageBytes + 1;
  gem_new.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_MAPPABLE;
  gem_new.arg.info.tile_mode = 1;
  gem_new.arg.info.tile_flags = 2;
  gem_new.arg.channel_hint = 3;
  gem_new.arg.align = 4096;
  gem_new.pages.nr_pages = 1;  // one frame-list page: 4 frames
  gem_new.pages.indirect = {77};
  add(gem_new);
  GemInfo gem_info;
  gem_info.arg.handle = 5;
  add(gem_info);
  GemClose gem_close;
  gem_close.arg.handle = 5;
  add(gem_close);
  GemPushbuf pushbuf;
  pushbuf.arg.channel = 3;
  pushbuf.arg.nr_buffers = 120;  // 4800 + 28 * 10 bytes: 2 pages with the push entries
  pushbuf.arg.nr_relocs = 10;
  pushbuf.arg.nr_push = 2;
  pushbuf.data.nr_pages = LayoutPushbuf(120, 10, 2).pages;
  pushbuf.data.indirect = {88};
  add(pushbuf);
  GemCpuPrep prep;
  prep.arg.handle = 5;
  prep.arg.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT | NOUVEAU_GEM_CPU_PREP_WRITE;
  add(prep);
  GemCpuFini fini;
  fini.arg.handle = 5;
  add(fini);
  return all;
}

pvdrm_request Encoded(const Request& request) {
  pvdrm_request wire;
  EncodeRequest(request, wire);
  return wire;
}

TEST(PvdrmCodec, EveryOpRoundTripsExactly) {
  const std::vector<Request> all = OneOfEach();
  EXPECT_EQ(all.size(), std::variant_size_v<RequestBody>);
  for (const Request& request : all) {
    SCOPED_TRACE(std::string(OpName(request.op())));
    const pvdrm_request wire = Encoded(request);
    auto decoded = DecodeRequest(wire);
    ASSERT_TRUE(std::holds_alternative<Request>(decoded))
        << std::get<RequestError>(decoded).message;
    const Request& back = std::get<Request>(decoded);
    EXPECT_EQ(back.id, request.id);
    EXPECT_EQ(back.file, request.file);
    EXPECT_EQ(back.op(), request.op());
    EXPECT_EQ(back.body.index(), request.body.index());
    const pvdrm_request again = Encoded(back);
    EXPECT_EQ(std::memcmp(&again, &wire, sizeof(wire)), 0);
    EXPECT_EQ(OpFromWire(wire.op), request.op());
  }
  const auto gem = std::get<GemNew>(std::get<Request>(DecodeRequest(Encoded(all[8]))).body);
  EXPECT_EQ(gem.arg.info.size, 3 * kPageBytes + 1);
  EXPECT_EQ(gem.pages.nr_pages, 1u);
  EXPECT_EQ(gem.pages.indirect, std::vector<grant_ref_t>{77});
}

// Each case breaks one valid request's wire form; the decoder must refuse it with `status`.
struct Breakage {
  const char* what;
  size_t op_index;  // into OneOfEach()
  std::function<void(pvdrm_request&)> corrupt;
  int32_t status = -EINVAL;
};

TEST(PvdrmCodec, RefusesEveryMalformedRequest) {
  const std::vector<Request> all = OneOfEach();
  const std::vector<Breakage> cases = {
      {"unknown op", 0, [](pvdrm_request& r) { r.op = 0x0203 + 0x1000; }, -ENOTTY},
      {"op 0", 0, [](pvdrm_request& r) { r.op = 0; }, -ENOTTY},
      {"nouveau op pvdrm does not carry (SETPARAM)", 0,
       [](pvdrm_request& r) { r.op = 0x0200 | DRM_NOUVEAU_SETPARAM; }, -ENOTTY},
      {"reserved header", 2, [](pvdrm_request& r) { r.reserved = 1; }},
      {"file 0", 2, [](pvdrm_request& r) { r.file = 0; }},
      {"file_open payload", 0, [](pvdrm_request& r) { r.u.bytes[50] = 1; }},
      {"file_open area too large", 0,
       [](pvdrm_request& r) { r.u.file_open.area.nr_pages = kMaxAreaPages + 1; }},
      {"file_open area without its indirect page", 0,
       [](pvdrm_request& r) { r.u.file_open.area.nr_indirect = 0; }},
      {"file_close payload", 1, [](pvdrm_request& r) { r.u.bytes[0] = 1; }},
      {"getparam value", 2, [](pvdrm_request& r) { r.u.getparam.value = 1; }},
      {"getparam trailing", 2, [](pvdrm_request& r) { r.u.bytes[16] = 1; }},
      {"channel_alloc channel", 3, [](pvdrm_request& r) { r.u.channel_alloc.channel = 1; }},
      {"channel_alloc subchan", 3,
       [](pvdrm_request& r) { r.u.channel_alloc.subchan[7].grclass = 1; }},
      {"channel_alloc nr_subchan", 3, [](pvdrm_request& r) { r.u.channel_alloc.nr_subchan = 1; }},
      {"channel_alloc trailing", 3, [](pvdrm_request& r) { r.u.bytes[103] = 1; }},
      {"channel_free negative", 4, [](pvdrm_request& r) { r.u.channel_free.channel = -1; }},
      {"channel_free trailing", 4, [](pvdrm_request& r) { r.u.bytes[4] = 1; }},
      {"grobj negative", 5, [](pvdrm_request& r) { r.u.grobj_alloc.channel = -5; }},
      {"grobj trailing", 5, [](pvdrm_request& r) { r.u.bytes[12] = 1; }},
      {"notifier offset", 6, [](pvdrm_request& r) { r.u.notifierobj_alloc.offset = 8; }},
      {"notifier size 0", 6, [](pvdrm_request& r) { r.u.notifierobj_alloc.size = 0; }},
      {"gpuobj_free negative", 7, [](pvdrm_request& r) { r.u.gpuobj_free.channel = -1; }},
      {"gpuobj_free trailing", 7, [](pvdrm_request& r) { r.u.bytes[8] = 1; }},
      {"gem_new handle", 8, [](pvdrm_request& r) { r.u.gem_new.gem.info.handle = 1; }},
      {"gem_new offset", 8, [](pvdrm_request& r) { r.u.gem_new.gem.info.offset = 1; }},
      {"gem_new map_handle", 8, [](pvdrm_request& r) { r.u.gem_new.gem.info.map_handle = 1; }},
      {"gem_new size 0", 8,
       [](pvdrm_request& r) {
         r.u.gem_new.gem.info.size = 0;
         r.u.gem_new.pages = {};
       }},
      {"gem_new no domain", 8, [](pvdrm_request& r) { r.u.gem_new.gem.info.domain = 0; }},
      {"gem_new unknown domain bit", 8,
       [](pvdrm_request& r) { r.u.gem_new.gem.info.domain |= 0x100; }},
      {"gem_new pages past the bound", 8,
       [](pvdrm_request& r) {
         r.u.gem_new.pages.nr_pages = kMaxListedPages + 1;
         r.u.gem_new.pages.nr_indirect = kMaxIndirectPages + 1;
       }},
      {"gem_new indirect count", 8, [](pvdrm_request& r) { r.u.gem_new.pages.nr_indirect = 2; }},
      {"gem_new unused indirect slot", 8,
       [](pvdrm_request& r) { r.u.gem_new.pages.indirect[5] = 9; }},
      {"gem_new frame-list pages do not match the size", 8,
       [](pvdrm_request& r) { r.u.gem_new.pages.nr_pages = 2; }},
      {"gem_new frame-list pages counted as frames", 8,
       [](pvdrm_request& r) { r.u.gem_new.pages.nr_pages = 4; }},
      {"gem_new with pages too large", 8,
       [](pvdrm_request& r) {
         r.u.gem_new.gem.info.size = (kMaxGemFrames + 1) * kPageBytes;
         r.u.gem_new.pages.nr_pages = kMaxListedPages;
         r.u.gem_new.pages.nr_indirect = kMaxIndirectPages;
       }},
      {"gem_new trailing", 8, [](pvdrm_request& r) { r.u.bytes[88] = 1; }},
      {"gem_info outputs", 9, [](pvdrm_request& r) { r.u.gem_info.size = 1; }},
      {"gem_close pad", 10, [](pvdrm_request& r) { r.u.gem_close.pad = 1; }},
      {"gem_close trailing", 10, [](pvdrm_request& r) { r.u.bytes[8] = 1; }},
      {"pushbuf buffers pointer", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.buffers = 0x1000; }},
      {"pushbuf area offset not a multiple of 8", 11,
       [](pvdrm_request& r) {
         r.u.gem_pushbuf.data = {};
         r.u.gem_pushbuf.pushbuf.buffers = 12;
       }},
      {"pushbuf arrays past any area", 11,
       [](pvdrm_request& r) {
         r.u.gem_pushbuf.data = {};
         r.u.gem_pushbuf.pushbuf.buffers = uint64_t{kMaxAreaPages} * kPageBytes - 8;
       }},
      {"pushbuf relocs pointer", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.relocs = 0x1000; }},
      {"pushbuf push pointer", 11, [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.push = 8; }},
      {"pushbuf suffix", 11, [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.suffix1 = 1; }},
      {"pushbuf vram_available", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.vram_available = 1; }},
      {"pushbuf too many buffers", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.nr_buffers = NOUVEAU_GEM_MAX_BUFFERS + 1; }},
      {"pushbuf too many relocs", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.nr_relocs = NOUVEAU_GEM_MAX_RELOCS + 1; }},
      {"pushbuf too many push", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.pushbuf.nr_push = NOUVEAU_GEM_MAX_PUSH + 1; }},
      {"pushbuf data pages do not match", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.data.nr_pages = 1; }},
      {"pushbuf data without indirect page", 11,
       [](pvdrm_request& r) { r.u.gem_pushbuf.data.nr_indirect = 0; }},
      {"cpu_prep unknown flag", 12, [](pvdrm_request& r) { r.u.gem_cpu_prep.flags |= 2; }},
      {"cpu_prep trailing", 12, [](pvdrm_request& r) { r.u.bytes[8] = 1; }},
      {"cpu_fini trailing", 13, [](pvdrm_request& r) { r.u.bytes[4] = 1; }},
  };
  for (const Breakage& c : cases) {
    SCOPED_TRACE(c.what);
    pvdrm_request wire = Encoded(all[c.op_index]);
    c.corrupt(wire);
    auto decoded = DecodeRequest(wire);
    ASSERT_TRUE(std::holds_alternative<RequestError>(decoded));
    const RequestError& error = std::get<RequestError>(decoded);
    EXPECT_EQ(error.status, c.status);
    EXPECT_EQ(error.id, wire.id);
    EXPECT_EQ(error.raw_op, wire.op);
    EXPECT_FALSE(error.message.empty());
  }
}

TEST(PvdrmCodec, GemObjectsWithoutPagesAndTheLargestListAreAccepted) {
  GemNew vram;
  vram.arg.info.size = uint64_t{1} << 30;  // VRAM: no guest pages, no bound here
  vram.arg.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
  EXPECT_TRUE(std::holds_alternative<Request>(DecodeRequest(Encoded({1, 1, vram}))));
  GemNew largest;
  largest.arg.info.size = kMaxGemFrames * kPageBytes;  // 32 GiB
  largest.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
  largest.pages.nr_pages = kMaxListedPages;
  largest.pages.indirect.assign(kMaxIndirectPages, 3);
  EXPECT_TRUE(std::holds_alternative<Request>(DecodeRequest(Encoded({1, 1, largest}))));
}

// GEM_PUSHBUF with its arrays in the file's area: no data pages, `buffers` the offset.
TEST(PvdrmCodec, PushbufArraysInTheFilesAreaRoundTrip) {
  GemPushbuf p;
  p.arg.channel = 2;
  p.arg.nr_buffers = 1;
  p.arg.nr_push = 1;
  p.arg.buffers = 2048;
  ASSERT_TRUE(p.InArea());
  auto decoded = DecodeRequest(Encoded({1, 1, p}));
  ASSERT_TRUE(std::holds_alternative<Request>(decoded)) << std::get<RequestError>(decoded).message;
  const auto& back = std::get<GemPushbuf>(std::get<Request>(decoded).body);
  EXPECT_TRUE(back.InArea());
  EXPECT_EQ(back.arg.buffers, 2048u);
  GemPushbuf empty;  // nothing to run: neither pages nor an area
  EXPECT_FALSE(empty.InArea());
}

TEST(PvdrmCodec, PushbufLayoutAtNouveausLimitsIsTwentyPages) {
  const PushbufLayout l =
      LayoutPushbuf(NOUVEAU_GEM_MAX_BUFFERS, NOUVEAU_GEM_MAX_RELOCS, NOUVEAU_GEM_MAX_PUSH);
  EXPECT_EQ(l.relocs_offset, 40960u);
  EXPECT_EQ(l.push_offset, 69632u);
  EXPECT_EQ(l.bytes, 81920u);
  EXPECT_EQ(l.pages, 20u);
  EXPECT_EQ(LayoutPushbuf(0, 0, 0).pages, 0u);
  EXPECT_EQ(LayoutPushbuf(1, 1, 0).push_offset, 72u);  // 40 + 28 = 68, aligned to 8
}

TEST(PvdrmCodec, PushbufArraysRoundTripAndIndicesAreChecked) {
  PushbufArrays arrays;
  arrays.buffers.resize(3);
  arrays.buffers[2].handle = 9;
  arrays.buffers[2].presumed.offset = 0x1234;
  arrays.relocs.resize(1);
  arrays.relocs[0].bo_index = 2;
  arrays.relocs[0].reloc_bo_index = 1;
  arrays.relocs[0].data = 77;
  arrays.push.resize(2);
  arrays.push[1].bo_index = 2;
  arrays.push[1].offset = 64;
  arrays.push[1].length = 128;
  drm_nouveau_gem_pushbuf pushbuf{};
  pushbuf.nr_buffers = 3;
  pushbuf.nr_relocs = 1;
  pushbuf.nr_push = 2;
  std::vector<uint8_t> data(kPageBytes, 0xee);
  WritePushbufArrays(arrays, data);
  Result<PushbufArrays> back = CopyPushbufArrays(pushbuf, data);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->buffers[2].handle, 9u);
  EXPECT_EQ(back->buffers[2].presumed.offset, 0x1234u);
  EXPECT_EQ(back->relocs[0].data, 77u);
  EXPECT_EQ(back->push[1].length, 128u);

  const PushbufLayout l = LayoutPushbuf(3, 1, 2);
  EXPECT_EQ(CopyPushbufArrays(pushbuf, std::span(data).first(l.bytes - 1)).status().code(),
            StatusCode::kInvalidArgument);
  auto push_at = [&](size_t i) {
    return reinterpret_cast<drm_nouveau_gem_pushbuf_push*>(data.data() + l.push_offset) + i;
  };
  push_at(1)->bo_index = 3;
  EXPECT_EQ(CopyPushbufArrays(pushbuf, data).status().code(), StatusCode::kInvalidArgument);
  push_at(1)->bo_index = 2;
  push_at(0)->pad = 1;
  EXPECT_EQ(CopyPushbufArrays(pushbuf, data).status().code(), StatusCode::kInvalidArgument);
  push_at(0)->pad = 0;
  reinterpret_cast<drm_nouveau_gem_pushbuf_reloc*>(data.data() + l.relocs_offset)->reloc_bo_index =
      3;
  EXPECT_EQ(CopyPushbufArrays(pushbuf, data).status().code(), StatusCode::kInvalidArgument);
}

TEST(PvdrmCodec, IndirectPagesGiveTheListedRefsInOrder) {
  PageList list;
  list.nr_pages = kRefsPerIndirectPage + 2;
  list.indirect = {1, 2};
  std::vector<uint8_t> pages(2 * kPageBytes);
  for (uint32_t i = 0; i < 2 * kRefsPerIndirectPage; ++i) {
    const grant_ref_t ref = 1000 + i;
    std::memcpy(pages.data() + i * 4, &ref, 4);
  }
  const std::vector<grant_ref_t> refs = RefsOfIndirectPages(list, pages);
  ASSERT_EQ(refs.size(), list.nr_pages);
  EXPECT_EQ(refs.front(), 1000u);
  EXPECT_EQ(refs.back(), 1000u + kRefsPerIndirectPage + 1);
}

pvdrm_response EncodedResponse(const Response& response) {
  pvdrm_response wire;
  EncodeResponse(response, wire);
  return wire;
}

TEST(PvdrmCodec, ResponsesOfEveryKindRoundTrip) {
  for (const Request& request : OneOfEach()) {
    SCOPED_TRACE(std::string(OpName(request.op())));
    Response response{request.id, request.op(), 0, {}};
    switch (request.op()) {
      case Op::kGetParam:
        response.body = drm_nouveau_getparam{NOUVEAU_GETPARAM_CHIPSET_ID, 0xc0};
        break;
      case Op::kChannelAlloc: {
        drm_nouveau_channel_alloc out = std::get<ChannelAlloc>(request.body).arg;
        out.channel = 2;
        out.nr_subchan = 1;
        out.subchan[0] = {0xbeef90c0, 0x90c0};
        response.body = out;
        break;
      }
      case Op::kNotifierobjAlloc: {
        drm_nouveau_notifierobj_alloc out = std::get<NotifierobjAlloc>(request.body).arg;
        out.offset = 0x100;
        response.body = out;
        break;
      }
      case Op::kGemNew:
      case Op::kGemInfo:
        response.body =
            drm_nouveau_gem_info{5, NOUVEAU_GEM_DOMAIN_GART, 4096, 0x2000, 0x100000, 0, 0};
        break;
      case Op::kGemPushbuf: {
        drm_nouveau_gem_pushbuf out = std::get<GemPushbuf>(request.body).arg;
        out.suffix0 = 1;
        out.vram_available = 1 << 20;
        response.body = out;
        break;
      }
      default:
        break;
    }
    const pvdrm_response wire = EncodedResponse(response);
    Result<Response> back = DecodeResponse(wire, request.op());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->id, request.id);
    EXPECT_EQ(back->body.index(), response.body.index());
    const pvdrm_response again = EncodedResponse(*back);
    EXPECT_EQ(std::memcmp(&again, &wire, sizeof(wire)), 0);
    // Every error is the bare status.
    const pvdrm_response error = EncodedResponse(ErrorResponse(request.id, request.op(), -ENOENT));
    Result<Response> error_back = DecodeResponse(error, request.op());
    ASSERT_TRUE(error_back.ok());
    EXPECT_EQ(error_back->status, -ENOENT);
    EXPECT_TRUE(std::holds_alternative<std::monostate>(error_back->body));
  }
}

TEST(PvdrmCodec, RefusesEveryMalformedResponse) {
  Response ok{1, Op::kGemInfo, 0, drm_nouveau_gem_info{5, 2, 4096, 0, 0, 0, 0}};
  struct Case {
    const char* what;
    Op expected;
    std::function<void(pvdrm_response&)> corrupt;
  };
  const std::vector<Case> cases = {
      {"another op", Op::kGemNew, [](pvdrm_response&) {}},
      {"reserved", Op::kGemInfo, [](pvdrm_response& r) { r.reserved = 1; }},
      {"positive status", Op::kGemInfo, [](pvdrm_response& r) { r.status = 1; }},
      {"status past errno", Op::kGemInfo, [](pvdrm_response& r) { r.status = -4096; }},
      {"error with a payload", Op::kGemInfo, [](pvdrm_response& r) { r.status = -EINVAL; }},
      {"trailing bytes", Op::kGemInfo, [](pvdrm_response& r) { r.u.bytes[40] = 1; }},
      {"payload on an op without result", Op::kGemClose,
       [](pvdrm_response& r) { r.op = static_cast<uint16_t>(Op::kGemClose); }},
      {"pushbuf pointer", Op::kGemPushbuf,
       [](pvdrm_response& r) {
         std::memset(&r.u, 0, sizeof(r.u));
         r.op = static_cast<uint16_t>(Op::kGemPushbuf);
         r.u.gem_pushbuf.push = 0x1000;
       }},
      {"negative channel", Op::kChannelAlloc,
       [](pvdrm_response& r) {
         std::memset(&r.u, 0, sizeof(r.u));
         r.op = static_cast<uint16_t>(Op::kChannelAlloc);
         r.u.channel_alloc.channel = -1;
       }},
      {"nine subchannels", Op::kChannelAlloc,
       [](pvdrm_response& r) {
         std::memset(&r.u, 0, sizeof(r.u));
         r.op = static_cast<uint16_t>(Op::kChannelAlloc);
         r.u.channel_alloc.nr_subchan = 9;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    pvdrm_response wire = EncodedResponse(ok);
    c.corrupt(wire);
    EXPECT_EQ(DecodeResponse(wire, c.expected).status().code(), StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace gpuvm::pvdrm
