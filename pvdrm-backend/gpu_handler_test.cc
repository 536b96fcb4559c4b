// PVDRM's GPU layer against the software GF100 (through the guest driver's native Bus): requests as
// the backend's connection hands them over, guest pages from a memfd standing for the guest's RAM.
// A guest builds real pushbuffers (PCOPY copies, semaphores) in its own GART objects; the handler
// runs them, keeps files apart, and refuses what a hostile frontend may send.
#include "pvdrm-backend/gpu_handler.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "gpu/hw/classes.h"
#include "guest-pv-driver/native_bus.h"
#include "guest-pv-driver/pushbuf.h"

namespace gpuvm::pvdrm {
namespace {

constexpr uint64_t kRamFrames = 4096;  // 16 MiB of guest RAM
constexpr uint32_t kSubcCopy = 4;

// Page lists without a grant table: indirect[0] names one of the test's lists.
class TestPages final : public GuestPages {
 public:
  struct Entry {
    std::vector<uint8_t> data;  // GEM_NEW: the frame-list pages; GEM_PUSHBUF: the arrays
  };
  PageList Add(Entry entry, uint32_t nr_pages) {
    const grant_ref_t key = next_++;
    entry.data.resize(uint64_t{nr_pages} * kPageBytes);
    lists_[key] = std::move(entry);
    PageList list;
    list.nr_pages = nr_pages;
    list.indirect.assign(IndirectPagesFor(nr_pages), 0);
    list.indirect[0] = key;
    return list;
  }
  std::vector<uint8_t>& data(const PageList& list) { return lists_.at(list.indirect[0]).data; }

  Result<std::unique_ptr<hv::GuestMapping>> Map(const PageList& list, hv::Access) override {
    auto it = lists_.find(list.indirect.empty() ? 0 : list.indirect[0]);
    if (it == lists_.end()) return Status::PermissionDenied("not granted");
    class View final : public hv::GuestMapping {
     public:
      explicit View(std::vector<uint8_t>& d) : d_(d) {}
      std::span<uint8_t> bytes() override { return d_; }

     private:
      std::vector<uint8_t>& d_;
    };
    return std::unique_ptr<hv::GuestMapping>(new View(it->second.data));
  }
  std::span<uint8_t> FileArea(uint32_t file) override {
    auto it = areas.find(file);
    return it == areas.end() ? std::span<uint8_t>() : std::span<uint8_t>(it->second);
  }
  std::map<uint32_t, std::vector<uint8_t>> areas;  // the files' arrays areas

 private:
  grant_ref_t next_ = 1;
  std::map<grant_ref_t, Entry> lists_;
};

class GpuHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = guest::NativeGpu::Create();
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    auto driver = guest::Driver::Create(gpu_->bus());
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
    const int fd = memfd_create("guest-ram", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, kRamFrames * 4096), 0);
    void* view = mmap(nullptr, kRamFrames * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(view, MAP_FAILED);
    ram_ = static_cast<uint8_t*>(view);
    auto frames = MemfdGuestFrames::Create(os::UniqueFd(fd), kRamFrames);
    ASSERT_TRUE(frames.ok());
    frames_ = std::move(*frames);
    GpuHandlerOptions options;
    options.cpu_prep_timeout = std::chrono::milliseconds(2000);
    handler_ = std::make_unique<GpuRequestHandler>(*driver_, *frames_, options);
  }
  void TearDown() override {
    handler_.reset();
    if (ram_ != nullptr) munmap(ram_, kRamFrames * 4096);
  }

  Response Call(uint32_t file, RequestBody body) {
    Request request;
    request.id = ++id_;
    request.file = file;
    request.body = std::move(body);
    return handler_->Handle(request, pages_);
  }
  void Open(uint32_t file) { ASSERT_EQ(Call(file, FileOpen{}).status, 0); }
  int AllocChannel(uint32_t file) {
    Response r = Call(file, ChannelAlloc{});
    EXPECT_EQ(r.status, 0);
    return r.status == 0 ? std::get<drm_nouveau_channel_alloc>(r.body).channel : -1;
  }
  // A GART object over `frames` (the guest's pages, in that order); returns its info.
  drm_nouveau_gem_info NewGart(uint32_t file, std::vector<uint32_t> frames,
                               int32_t* status = nullptr) {
    GemNew g;
    g.arg.info.size = frames.size() * 4096;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
    std::vector<uint8_t> list(frames.size() * sizeof(uint32_t));
    std::memcpy(list.data(), frames.data(), list.size());
    g.pages = pages_.Add({std::move(list)},
                         uint32_t((frames.size() + kFramesPerListPage - 1) / kFramesPerListPage));
    Response r = Call(file, g);
    if (status != nullptr) *status = r.status;
    return r.status == 0 ? std::get<drm_nouveau_gem_info>(r.body) : drm_nouveau_gem_info{};
  }
  drm_nouveau_gem_info NewVram(uint32_t file, uint64_t size) {
    GemNew g;
    g.arg.info.size = size;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
    Response r = Call(file, g);
    EXPECT_EQ(r.status, 0);
    return r.status == 0 ? std::get<drm_nouveau_gem_info>(r.body) : drm_nouveau_gem_info{};
  }
  // The guest's own view of byte `offset` of an object over `frames`.
  uint8_t* At(const std::vector<uint32_t>& frames, uint64_t offset) {
    return ram_ + uint64_t{frames[offset / 4096]} * 4096 + offset % 4096;
  }
  // Writes `pb` into the object over `frames` at `offset` through the guest's view.
  void WriteWords(const std::vector<uint32_t>& frames, uint64_t offset,
                  const guest::PushBuffer& pb) {
    for (size_t i = 0; i < pb.size(); ++i) {
      std::memcpy(At(frames, offset + 4 * i), &pb.words()[i], 4);
    }
  }
  // GEM_PUSHBUF of one push (`words` at `offset` of buffers[0]) listing `handles`.
  Response Pushbuf(uint32_t file, int channel, std::vector<uint32_t> handles, uint64_t offset,
                   uint64_t bytes, PageList* data_out = nullptr) {
    PushbufArrays arrays;
    for (uint32_t h : handles) {
      drm_nouveau_gem_pushbuf_bo bo{};
      bo.handle = h;
      bo.read_domains = NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_VRAM;
      arrays.buffers.push_back(bo);
    }
    drm_nouveau_gem_pushbuf_push push{};
    push.bo_index = 0;
    push.offset = offset;
    push.length = bytes;
    arrays.push.push_back(push);
    GemPushbuf p;
    p.arg.channel = uint32_t(channel);
    p.arg.nr_buffers = uint32_t(arrays.buffers.size());
    p.arg.nr_push = 1;
    const PushbufLayout layout = LayoutPushbuf(p.arg.nr_buffers, 0, 1);
    std::vector<uint8_t> data(layout.pages * 4096);
    WritePushbufArrays(arrays, data);
    p.data = pages_.Add({std::move(data)}, layout.pages);
    if (data_out != nullptr) *data_out = p.data;
    return Call(file, p);
  }
  static guest::PushBuffer CopyCommands(uint64_t dst, uint64_t src, uint32_t bytes) {
    guest::PushBuffer pb;
    pb.Method(kSubcCopy, gf100::host::kSetObject, gf100::kClassCopy);
    pb.Inc(
        kSubcCopy, gf100::copy::kOffsetInUpper,
        {uint32_t(src >> 32), uint32_t(src), uint32_t(dst >> 32), uint32_t(dst), 0, 0, bytes, 1});
    pb.Method(kSubcCopy, gf100::copy::kLaunchDma,
              2 | gf100::copy::kSrcPitch | gf100::copy::kDstPitch);  // non-pipelined
    return pb;
  }
  static std::vector<uint32_t> Frames(uint32_t first, uint32_t count, bool reversed = false) {
    std::vector<uint32_t> f;
    for (uint32_t i = 0; i < count; ++i) f.push_back(reversed ? first + count - 1 - i : first + i);
    return f;
  }

  std::unique_ptr<guest::NativeGpu> gpu_;
  std::unique_ptr<guest::Driver> driver_;
  std::unique_ptr<MemfdGuestFrames> frames_;
  std::unique_ptr<GpuRequestHandler> handler_;
  TestPages pages_;
  uint8_t* ram_ = nullptr;
  uint64_t id_ = 0;
};

TEST_F(GpuHandlerTest, GetParamDescribesTheGpuAndTheGuestsGart) {
  Open(1);
  auto param = [&](uint64_t which) {
    GetParam g;
    g.arg.param = which;
    return Call(1, g);
  };
  Response chipset = param(NOUVEAU_GETPARAM_CHIPSET_ID);
  ASSERT_EQ(chipset.status, 0);
  EXPECT_EQ(std::get<drm_nouveau_getparam>(chipset.body).value, 0xc0u);
  EXPECT_EQ(std::get<drm_nouveau_getparam>(param(NOUVEAU_GETPARAM_PCI_VENDOR).body).value, 0x10deu);
  EXPECT_EQ(std::get<drm_nouveau_getparam>(param(NOUVEAU_GETPARAM_FB_SIZE).body).value,
            driver_->info().vram_bytes);
  EXPECT_EQ(std::get<drm_nouveau_getparam>(param(NOUVEAU_GETPARAM_AGP_SIZE).body).value,
            kRamFrames * 4096);
  EXPECT_EQ(param(999).status, -EINVAL);
  EXPECT_EQ(param(NOUVEAU_GETPARAM_GRAPH_UNITS).status, -EINVAL);  // not offered
}

// Guest data in GART pages (listed out of order) goes to VRAM and back into other GART pages by a
// pushbuffer the guest wrote into a third GART object; CPU_PREP waits for it; every listed object
// learns its GPU address through `presumed`.
TEST_F(GpuHandlerTest, APushbufferTheGuestWroteCopiesThroughVram) {
  Open(1);
  const int channel = AllocChannel(1);
  constexpr uint32_t kBytes = 3 * 4096 + 100;
  const auto src_frames = Frames(100, 4, /*reversed=*/true);
  const auto dst_frames = Frames(200, 4);
  const auto pb_frames = Frames(300, 1);
  const drm_nouveau_gem_info src = NewGart(1, src_frames);
  const drm_nouveau_gem_info dst = NewGart(1, dst_frames);
  const drm_nouveau_gem_info push = NewGart(1, pb_frames);
  const drm_nouveau_gem_info vram = NewVram(1, 64 << 10);
  ASSERT_NE(src.handle, 0u);
  ASSERT_NE(dst.handle, 0u);
  ASSERT_NE(vram.handle, 0u);
  EXPECT_EQ(vram.domain, uint32_t(NOUVEAU_GEM_DOMAIN_VRAM));
  EXPECT_EQ(src.domain, uint32_t(NOUVEAU_GEM_DOMAIN_GART));
  for (uint32_t i = 0; i < kBytes; ++i) *At(src_frames, i) = uint8_t(i * 7 + 3);

  // One push: GART -> VRAM, then VRAM -> GART (the copy engine runs them in order).
  const guest::PushBuffer pb = CopyCommands(vram.offset, src.offset, kBytes);
  const guest::PushBuffer back = CopyCommands(dst.offset, vram.offset, kBytes);
  WriteWords(pb_frames, 0, pb);
  WriteWords(pb_frames, pb.size() * 4, back);
  PageList data;
  Response r = Pushbuf(1, channel, {push.handle, src.handle, vram.handle, dst.handle}, 0,
                       (pb.size() + back.size()) * 4, &data);
  ASSERT_EQ(r.status, 0);
  const auto& out = std::get<drm_nouveau_gem_pushbuf>(r.body);
  EXPECT_EQ(out.gart_available, kRamFrames * 4096);
  EXPECT_GT(out.vram_available, 0u);

  GemCpuPrep prep;
  prep.arg.handle = dst.handle;
  ASSERT_EQ(Call(1, prep).status, 0);
  for (uint32_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(*At(dst_frames, i), uint8_t(i * 7 + 3)) << "byte " << i;
  }
  // presumed written back into the caller's array, as the kernel does.
  drm_nouveau_gem_pushbuf_bo bo{};
  std::memcpy(&bo, pages_.data(data).data() + 2 * sizeof(bo), sizeof(bo));
  EXPECT_EQ(bo.presumed.valid, 1u);
  EXPECT_EQ(bo.presumed.offset, vram.offset);
  EXPECT_EQ(bo.presumed.domain, uint32_t(NOUVEAU_GEM_DOMAIN_VRAM));
  EXPECT_EQ(handler_->stats().pushbufs, 1u);
}

// A pushbuffer whose arrays lie in the file's arrays area (no pages of their own) runs like one
// with pages; arrays past the area, or a file without one, get -EFAULT.
TEST_F(GpuHandlerTest, PushbufArraysInTheFilesAreaRun) {
  Open(1);
  Open(2);
  const int channel = AllocChannel(1);
  const auto src_frames = Frames(400, 1);
  const auto dst_frames = Frames(410, 1);
  const auto pb_frames = Frames(420, 1);
  const drm_nouveau_gem_info src = NewGart(1, src_frames);
  const drm_nouveau_gem_info dst = NewGart(1, dst_frames);
  const drm_nouveau_gem_info push = NewGart(1, pb_frames);
  for (uint32_t i = 0; i < 256; ++i) *At(src_frames, i) = uint8_t(i ^ 0x5a);
  const guest::PushBuffer pb = CopyCommands(dst.offset, src.offset, 256);
  WriteWords(pb_frames, 0, pb);

  PushbufArrays arrays;
  for (uint32_t h : {push.handle, src.handle, dst.handle}) {
    drm_nouveau_gem_pushbuf_bo bo{};
    bo.handle = h;
    bo.read_domains = NOUVEAU_GEM_DOMAIN_GART;
    arrays.buffers.push_back(bo);
  }
  drm_nouveau_gem_pushbuf_push p{};
  p.length = pb.size() * 4;
  arrays.push.push_back(p);
  const PushbufLayout layout = LayoutPushbuf(3, 0, 1);
  std::vector<uint8_t>& area = pages_.areas[1];
  area.assign(2 * 4096, 0);
  constexpr uint64_t kAt = 4096 + 64;
  WritePushbufArrays(arrays, std::span<uint8_t>(area).subspan(kAt, layout.bytes));
  GemPushbuf submit;
  submit.arg.channel = uint32_t(channel);
  submit.arg.nr_buffers = 3;
  submit.arg.nr_push = 1;
  submit.arg.buffers = kAt;
  ASSERT_TRUE(submit.InArea());
  const Response ran = Call(1, submit);
  ASSERT_EQ(ran.status, 0);
  EXPECT_EQ(std::get<drm_nouveau_gem_pushbuf>(ran.body).buffers, 0u);  // no pointers back
  GemCpuPrep prep;
  prep.arg.handle = dst.handle;
  ASSERT_EQ(Call(1, prep).status, 0);
  for (uint32_t i = 0; i < 256; ++i) ASSERT_EQ(*At(dst_frames, i), uint8_t(i ^ 0x5a)) << i;
  drm_nouveau_gem_pushbuf_bo written{};
  std::memcpy(&written, area.data() + kAt + 2 * sizeof(written), sizeof(written));
  EXPECT_EQ(written.presumed.offset, dst.offset);  // presumed written back into the area

  submit.arg.buffers = area.size() - 8;  // runs past the area
  EXPECT_EQ(Call(1, submit).status, -EFAULT);
  GemPushbuf other = submit;  // file 2 has no area
  other.arg.channel = uint32_t(AllocChannel(2));
  other.arg.buffers = 0;
  EXPECT_EQ(Call(2, other).status, -EFAULT);
  EXPECT_EQ(handler_->stats().pushbufs, 1u);
}

// An object of more frames than one frame-list page holds (1030: two pages of frame numbers, out
// of order across the page boundary) reaches the GPU whole: bytes at its far end go to VRAM and
// back. A list with a frame number past the object's end, or one list page too few, is refused.
TEST_F(GpuHandlerTest, ObjectsListedOverSeveralFrameListPagesAreWhole) {
  Open(1);
  const int channel = AllocChannel(1);
  constexpr uint32_t kFrames = kFramesPerListPage + 6;
  const auto big_frames = Frames(1000, kFrames, /*reversed=*/true);
  const auto dst_frames = Frames(3000, 2);
  const auto pb_frames = Frames(3100, 1);
  const drm_nouveau_gem_info big = NewGart(1, big_frames);
  const drm_nouveau_gem_info dst = NewGart(1, dst_frames);
  const drm_nouveau_gem_info push = NewGart(1, pb_frames);
  const drm_nouveau_gem_info vram = NewVram(1, 64 << 10);
  ASSERT_NE(big.handle, 0u);
  ASSERT_EQ(big.size, uint64_t{kFrames} * 4096);
  constexpr uint64_t kFrom = uint64_t{kFrames - 2} * 4096 + 17;  // listed in the second page
  constexpr uint32_t kBytes = 6000;
  for (uint32_t i = 0; i < kBytes; ++i) *At(big_frames, kFrom + i) = uint8_t(i * 13 + 5);
  const guest::PushBuffer pb = CopyCommands(vram.offset, big.offset + kFrom, kBytes);
  const guest::PushBuffer back = CopyCommands(dst.offset, vram.offset, kBytes);
  WriteWords(pb_frames, 0, pb);
  WriteWords(pb_frames, pb.size() * 4, back);
  ASSERT_EQ(Pushbuf(1, channel, {push.handle, big.handle, vram.handle, dst.handle}, 0,
                    (pb.size() + back.size()) * 4)
                .status,
            0);
  GemCpuPrep prep;
  prep.arg.handle = dst.handle;
  ASSERT_EQ(Call(1, prep).status, 0);
  for (uint32_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(*At(dst_frames, i), uint8_t(i * 13 + 5)) << "byte " << i;
  }

  // A frame listed past the object's last one (the list page's tail must be zero).
  {
    std::vector<uint8_t> list(4096);
    const uint32_t frames[] = {50, 51, 52};
    std::memcpy(list.data(), frames, sizeof(frames));
    GemNew g;
    g.arg.info.size = 2 * 4096;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
    g.pages = pages_.Add({std::move(list)}, 1);
    EXPECT_EQ(Call(1, g).status, -EINVAL);
  }
  // One frame-list page for 1030 frames: the codec refuses the count; the handler's own read of
  // the list refuses it too, should a request reach it.
  {
    GemNew g;
    g.arg.info.size = uint64_t{kFrames} * 4096;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
    g.pages = pages_.Add({std::vector<uint8_t>(4096)}, 1);
    EXPECT_EQ(Call(1, g).status, -EINVAL);
  }
}

// What a hostile frontend may name: another file's handles and channels, freed handles, pushes
// outside their object or misaligned, relocations, frames past its RAM, an object listed twice —
// each refused with the ioctl's errno, and the victim file keeps working.
TEST_F(GpuHandlerTest, FilesAreApartAndBadRequestsAreRefused) {
  Open(1);
  Open(2);
  const int channel1 = AllocChannel(1);
  const auto pb_frames = Frames(10, 1);
  const drm_nouveau_gem_info obj1 = NewGart(1, pb_frames);
  const drm_nouveau_gem_info vram1 = NewVram(1, 4096);
  ASSERT_NE(obj1.handle, 0u);

  // File 2 names file 1's handle: handles are per file.
  GemInfo info;
  info.arg.handle = vram1.handle;
  EXPECT_EQ(Call(2, info).status, -ENOENT);
  GemCpuPrep prep;
  prep.arg.handle = obj1.handle;
  EXPECT_EQ(Call(2, prep).status, -ENOENT);
  // ... and file 1's channel: channels are per file.
  EXPECT_EQ(Pushbuf(2, channel1, {obj1.handle}, 0, 16).status, -ENOENT);

  // Pushes outside the object, misaligned, empty; relocations; a handle listed twice.
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle}, 4096, 4).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle}, 4000, 100).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle}, 2, 8).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle}, 0, 6).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle}, 0, 0).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, channel1, {obj1.handle, obj1.handle}, 0, 4).status, -EINVAL);
  EXPECT_EQ(Pushbuf(1, 77, {obj1.handle}, 0, 4).status, -ENOENT);
  {
    GemPushbuf p;
    p.arg.channel = uint32_t(channel1);
    p.arg.nr_relocs = 1;
    p.arg.nr_buffers = 1;
    const PushbufLayout layout = LayoutPushbuf(1, 1, 0);
    p.data = pages_.Add({std::vector<uint8_t>(layout.pages * 4096)}, layout.pages);
    EXPECT_EQ(Call(1, p).status, -EINVAL);
  }
  // Frames past the guest's RAM; a GART object without its pages; tiling; an odd alignment.
  int32_t status = 0;
  NewGart(1, {1, uint32_t(kRamFrames)}, &status);
  EXPECT_EQ(status, -EFAULT);
  {
    GemNew g;
    g.arg.info.size = 4096;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
    EXPECT_EQ(Call(1, g).status, -EINVAL);
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
    g.arg.info.tile_flags = 0xfe00;
    EXPECT_EQ(Call(1, g).status, -EINVAL);
    g.arg.info.tile_flags = 0;
    g.arg.align = 3;
    EXPECT_EQ(Call(1, g).status, -EINVAL);
  }
  // A closed handle is gone; closing twice is -ENOENT.
  GemClose close;
  close.arg.handle = vram1.handle;
  EXPECT_EQ(Call(1, close).status, 0);
  info.arg.handle = vram1.handle;
  EXPECT_EQ(Call(1, info).status, -ENOENT);
  EXPECT_EQ(Call(1, close).status, -ENOENT);
  // Grobjs: known Fermi classes only, unique handles, freed once.
  GrobjAlloc grobj;
  grobj.arg.channel = channel1;
  grobj.arg.handle = 0xbeef;
  grobj.arg.oclass = int(gf100::kClass3d);
  EXPECT_EQ(Call(1, grobj).status, -EINVAL);
  grobj.arg.oclass = int(gf100::kClassCompute);
  EXPECT_EQ(Call(1, grobj).status, 0);
  EXPECT_EQ(Call(1, grobj).status, -EEXIST);
  GpuobjFree gfree;
  gfree.arg.channel = channel1;
  gfree.arg.handle = 0xbeef;
  EXPECT_EQ(Call(2, gfree).status, -ENOENT);
  EXPECT_EQ(Call(1, gfree).status, 0);
  EXPECT_EQ(Call(1, gfree).status, -ENOENT);
  EXPECT_EQ(Call(1, NotifierobjAlloc{}).status, -ENODEV);

  // After all that, file 1 still copies.
  const auto src_frames = Frames(20, 1);
  const auto dst_frames = Frames(30, 1);
  const drm_nouveau_gem_info src = NewGart(1, src_frames);
  const drm_nouveau_gem_info dst = NewGart(1, dst_frames);
  std::memset(At(src_frames, 0), 0x5a, 4096);
  const guest::PushBuffer pb = CopyCommands(dst.offset, src.offset, 4096);
  WriteWords(pb_frames, 0, pb);
  ASSERT_EQ(Pushbuf(1, channel1, {obj1.handle, src.handle, dst.handle}, 0, pb.size() * 4).status,
            0);
  prep.arg.handle = dst.handle;
  ASSERT_EQ(Call(1, prep).status, 0);
  EXPECT_EQ(*At(dst_frames, 4095), 0x5a);
}

// CPU_PREP follows the object's fence: a pushbuffer held at a semaphore the guest opens later keeps
// its objects busy (NOWAIT: -EBUSY; a wait: -EBUSY after the bound), then idle.
TEST_F(GpuHandlerTest, CpuPrepWaitsForTheLastSubmissionNamingTheObject) {
  Open(1);
  const int channel = AllocChannel(1);
  const auto pb_frames = Frames(40, 1);
  const auto gate_frames = Frames(41, 1);
  const drm_nouveau_gem_info push = NewGart(1, pb_frames);
  const drm_nouveau_gem_info gate = NewGart(1, gate_frames);
  const drm_nouveau_gem_info idle = NewGart(1, Frames(42, 1));
  guest::PushBuffer pb;
  pb.Inc(0, gf100::host::kSemaphoreA,
         {uint32_t(gate.offset >> 32), uint32_t(gate.offset), 1, gf100::host::kSemOpAcquire});
  WriteWords(pb_frames, 0, pb);
  ASSERT_EQ(Pushbuf(1, channel, {push.handle, gate.handle}, 0, pb.size() * 4).status, 0);
  GemCpuPrep prep;
  prep.arg.handle = gate.handle;
  prep.arg.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT;
  EXPECT_EQ(Call(1, prep).status, -EBUSY);
  prep.arg.flags = 0;
  EXPECT_EQ(Call(1, prep).status, -EBUSY);  // the 2 s bound of this test's handler
  prep.arg.handle = idle.handle;            // never named by a pushbuf
  prep.arg.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT;
  EXPECT_EQ(Call(1, prep).status, 0);
  __atomic_store_n(reinterpret_cast<uint32_t*>(At(gate_frames, 0)), 1u, __ATOMIC_RELEASE);
  prep.arg.handle = gate.handle;
  prep.arg.flags = 0;
  EXPECT_EQ(Call(1, prep).status, 0);
  prep.arg.flags = NOUVEAU_GEM_CPU_PREP_NOWAIT;
  EXPECT_EQ(Call(1, prep).status, 0);
}

// A pushbuffer that writes where its file has nothing mapped faults that file's context: its later
// calls fail with -EIO, another file of the same guest copies on, and closing the faulted file
// gives everything back.
TEST_F(GpuHandlerTest, AFaultingPushbufferCostsOnlyItsOwnFile) {
  const uint64_t vram_before = driver_->vram_free();
  Open(1);
  Open(2);
  const int bad_channel = AllocChannel(1);
  const auto bad_frames = Frames(50, 1);
  const drm_nouveau_gem_info bad = NewGart(1, bad_frames);
  const drm_nouveau_gem_info file2_vram = NewVram(2, 8192);
  // Release a semaphore at an address file 1 never mapped.
  constexpr uint64_t kNowhere = 20ull << 30;
  guest::PushBuffer pb;
  pb.Inc(0, gf100::host::kSemaphoreA,
         {uint32_t(kNowhere >> 32), uint32_t(kNowhere), 7,
          gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
  WriteWords(bad_frames, 0, pb);
  ASSERT_EQ(Pushbuf(1, bad_channel, {bad.handle}, 0, pb.size() * 4).status, 0);
  GemCpuPrep prep;
  prep.arg.handle = bad.handle;
  EXPECT_NE(Call(1, prep).status, 0);
  GetParam g;
  g.arg.param = NOUVEAU_GETPARAM_CHIPSET_ID;
  EXPECT_EQ(Call(1, g).status, -EIO);

  const int channel2 = AllocChannel(2);
  const auto pb2 = Frames(60, 1), src2 = Frames(61, 1), dst2 = Frames(62, 1);
  const drm_nouveau_gem_info p2 = NewGart(2, pb2);
  const drm_nouveau_gem_info s2 = NewGart(2, src2);
  const drm_nouveau_gem_info d2 = NewGart(2, dst2);
  std::memset(At(src2, 0), 0x33, 4096);
  guest::PushBuffer copy = CopyCommands(file2_vram.offset, s2.offset, 4096);
  const guest::PushBuffer copy_back = CopyCommands(d2.offset, file2_vram.offset, 4096);
  WriteWords(pb2, 0, copy);
  WriteWords(pb2, copy.size() * 4, copy_back);
  ASSERT_EQ(Pushbuf(2, channel2, {p2.handle, s2.handle, file2_vram.handle, d2.handle}, 0,
                    (copy.size() + copy_back.size()) * 4)
                .status,
            0);
  prep.arg.handle = d2.handle;
  ASSERT_EQ(Call(2, prep).status, 0);
  EXPECT_EQ(*At(dst2, 100), 0x33);

  EXPECT_EQ(Call(1, FileClose{}).status, 0);
  EXPECT_EQ(handler_->stats().files, 1u);
  handler_->OnDisconnect();  // the frontend went away: everything of every file
  EXPECT_EQ(handler_->stats().files, 0u);
  EXPECT_EQ(handler_->stats().objects, 0u);
  EXPECT_EQ(driver_->vram_free(), vram_before);
}

// The spare context: an open takes it with no GPU work; a file that only probed (GETPARAM) gives
// it back; a file that did anything else never does; with every file closed OnIdle makes another.
TEST_F(GpuHandlerTest, OpensTakeTheSpareContextAndOnlyAnUnusedOneGoesBack) {
  const uint64_t vram_before = driver_->vram_free();
  EXPECT_FALSE(handler_->has_spare());
  EXPECT_TRUE(handler_->WantsIdle());
  ASSERT_TRUE(handler_->PrepareSpare().ok());
  EXPECT_TRUE(handler_->has_spare());
  EXPECT_FALSE(handler_->WantsIdle());
  EXPECT_LT(driver_->vram_free(), vram_before);  // the spare's own memory

  const uint64_t accesses = driver_->bus_counters().total();
  Open(1);
  EXPECT_EQ(driver_->bus_counters().total(), accesses);  // no GPU work
  EXPECT_FALSE(handler_->has_spare());
  EXPECT_EQ(handler_->stats().spare_opens, 1u);
  EXPECT_FALSE(handler_->WantsIdle());  // a file is open
  GetParam g;
  g.arg.param = NOUVEAU_GETPARAM_CHIPSET_ID;
  ASSERT_EQ(Call(1, g).status, 0);
  EXPECT_EQ(Call(1, FileClose{}).status, 0);
  EXPECT_TRUE(handler_->has_spare());  // a probe leaves nothing in it

  // The next file gets that context, uses it, and it goes when the file does.
  Open(2);
  EXPECT_EQ(handler_->stats().spare_opens, 2u);
  const drm_nouveau_gem_info object = NewVram(2, 8192);
  EXPECT_NE(object.handle, 0u);
  EXPECT_EQ(Call(2, FileClose{}).status, 0);
  EXPECT_FALSE(handler_->has_spare());
  EXPECT_EQ(driver_->vram_free(), vram_before);  // all of it freed

  // Nothing open and no spare: the idle ring makes one.
  ASSERT_TRUE(handler_->WantsIdle());
  handler_->OnIdle();
  EXPECT_TRUE(handler_->has_spare());
  // A file opened without a spare creates its own context.
  Open(3);
  Open(4);
  EXPECT_EQ(handler_->stats().spare_opens, 3u);
  EXPECT_EQ(handler_->stats().files, 2u);
  ASSERT_EQ(AllocChannel(4), 0);
  EXPECT_EQ(Call(3, FileClose{}).status, 0);
  EXPECT_EQ(Call(4, FileClose{}).status, 0);
  EXPECT_TRUE(handler_->has_spare());  // file 3's, unused
  EXPECT_FALSE(handler_->WantsIdle());

  // The backend's way out: the spare goes while the GPU can still be told (its channel disabled,
  // its memory returned), and the idle ring makes no new one after.
  handler_->ReleaseSpare();
  EXPECT_FALSE(handler_->has_spare());
  EXPECT_FALSE(handler_->WantsIdle());
  EXPECT_EQ(driver_->vram_free(), vram_before);
}

}  // namespace
}  // namespace gpuvm::pvdrm
