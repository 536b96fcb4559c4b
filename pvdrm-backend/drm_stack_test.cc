// The whole PVDRM stack in one process (docs/PVDRM.md): the guest driver as DRM user space
// (Driver::CreateOnDrm) on PvdrmDevice, over a real FrontendConnection/BackendConnection pair on
// the local hypervisor (an in-process daemon, grants, event channels, store), served by
// GpuRequestHandler on a second guest driver over the software GPU. What the runtime does with a
// driver — contexts, every kind of memory, staged and DMA copies, memsets, events, channels — runs
// through ring requests only; a faulting context is stopped alone; closing gives everything back.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu/hw/classes.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/local_trap_bus.h"
#include "guest-pv-driver/native_bus.h"
#include "guest-pv-driver/pushbuf.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/store.h"
#include "pvdrm-backend/backend.h"
#include "pvdrm-backend/gpu_handler.h"
#include "pvdrm-backend/guest_frames.h"
#include "pvdrm-frontend/drm_device.h"
#include "pvdrm-frontend/frontend.h"

namespace gpuvm::pvdrm {
namespace {

constexpr hv::DomainId kGuest = 9;
constexpr uint64_t kRamBytes = 128ull << 20;
constexpr uint64_t kReservedHigh = 16ull << 20;  // grant pool (1 MiB) below the top
constexpr uint32_t kGrantPoolFrames = 256;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t((i * 2654435761u + seed) >> 13);
  return v;
}

class DrmStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "@gpuvm-drm-stack-" + std::to_string(::getpid());
    auto daemon = hv::local::LocalHvDaemon::Create(path_);
    ASSERT_TRUE(daemon.ok());
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    auto control = hv::local::LocalHvClient::Connect(path_, hv::kControlDomain);
    ASSERT_TRUE(control.ok());
    control_ = std::move(*control);
    auto domain = hv::local::LocalDomain::Create({kGuest, kRamBytes, 1});
    ASSERT_TRUE(domain.ok());
    domain_ = std::move(*domain);
    ASSERT_TRUE(hv::local::RegisterDomain(*control_, *domain_).ok());

    // dom0: the GPU, its driver, the guest's frames, the handler, the connection on a thread.
    auto gpu = guest::NativeGpu::Create();
    ASSERT_TRUE(gpu.ok());
    gpu_ = std::move(*gpu);
    auto host_driver = guest::Driver::Create(gpu_->bus());
    ASSERT_TRUE(host_driver.ok());
    host_driver_ = std::move(*host_driver);
    auto ram = os::DuplicateFd(domain_->ram_fd());
    ASSERT_TRUE(ram.ok());
    auto frames = MemfdGuestFrames::Create(std::move(*ram), domain_->frame_count());
    ASSERT_TRUE(frames.ok());
    frames_ = std::move(*frames);
    handler_ = std::make_unique<GpuRequestHandler>(*host_driver_, *frames_, GpuHandlerOptions{});
    auto lookup = hv::local::LocalHvClient::Connect(path_, hv::kControlDomain);
    ASSERT_TRUE(lookup.ok());
    std::shared_ptr<hv::local::LocalHvClient> client = std::move(*lookup);
    mapper_ = std::make_unique<hv::local::LocalGrantMapper>(
        hv::kControlDomain,
        [client](hv::DomainId id) { return hv::local::AttachDomain(*client, id); });
    auto back_store = hv::local::LocalStore::Connect(path_, hv::kControlDomain);
    auto back_channels = hv::local::LocalEventChannels::Connect(path_, hv::kControlDomain);
    ASSERT_TRUE(back_store.ok() && back_channels.ok());
    const DeviceAddress device{kGuest, hv::kControlDomain, 0};
    ASSERT_TRUE(AnnounceDevice(**back_store, device).ok());
    auto stop = os::CreateEventFd();
    ASSERT_TRUE(stop.ok());
    stop_ = std::move(*stop);
    BackendOptions options;
    options.device = device;
    auto connection = BackendConnection::Create(*mapper_, std::move(*back_channels),
                                                std::move(*back_store), *handler_, options);
    ASSERT_TRUE(connection.ok());
    connection_ = std::move(*connection);
    backend_thread_ = std::thread([this] { (void)connection_->Run(stop_.get()); });

    // The guest: its RAM as DMA memory (the top kept for grants), the frontend, the DRM port.
    auto io = hv::local::LocalGuestIo::Create(*domain_);
    ASSERT_TRUE(io.ok());
    guest::LocalVmGuestOptions vm_options;
    vm_options.reserved_high_bytes = kReservedHigh;
    auto vm = guest::LocalVmGuest::Create(std::move(*io), vm_options);
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    dma_ = LocalVmGuestDma(*vm);
    auto sharer = hv::local::LocalGrantSharer::Create(
        *domain_, domain_->frame_count() - kGrantPoolFrames, kGrantPoolFrames);
    ASSERT_TRUE(sharer.ok());
    sharer_ = std::move(*sharer);
    auto front_store = hv::local::LocalStore::Connect(path_, kGuest);
    auto front_channels = hv::local::LocalEventChannels::Connect(path_, kGuest);
    ASSERT_TRUE(front_store.ok() && front_channels.ok());
    FrontendOptions front;
    front.device = device;
    auto frontend = FrontendConnection::Connect(*sharer_, std::move(*front_channels),
                                                std::move(*front_store), front);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(*frontend);
    drm_ = std::make_unique<PvdrmDevice>(*frontend_, *sharer_, *dma_, hv::kControlDomain);
    auto driver = guest::Driver::CreateOnDrm(drm_.get());
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
  }
  void TearDown() override {
    driver_.reset();
    drm_.reset();
    if (frontend_ != nullptr) (void)frontend_->Close();
    if (backend_thread_.joinable()) {
      (void)os::SignalEventFd(stop_.get());
      backend_thread_.join();
    }
    connection_.reset();
    handler_.reset();
  }

  std::string path_;
  std::unique_ptr<hv::local::LocalHvDaemon> daemon_;
  std::unique_ptr<hv::local::LocalHvClient> control_;
  std::unique_ptr<hv::local::LocalDomain> domain_;
  std::unique_ptr<guest::NativeGpu> gpu_;
  std::unique_ptr<guest::Driver> host_driver_;
  std::unique_ptr<MemfdGuestFrames> frames_;
  std::unique_ptr<GpuRequestHandler> handler_;
  std::unique_ptr<hv::local::LocalGrantMapper> mapper_;
  os::UniqueFd stop_;
  std::unique_ptr<BackendConnection> connection_;
  std::thread backend_thread_;
  std::unique_ptr<GuestDma> dma_;
  std::unique_ptr<hv::local::LocalGrantSharer> sharer_;
  std::unique_ptr<FrontendConnection> frontend_;
  std::unique_ptr<PvdrmDevice> drm_;
  std::unique_ptr<guest::Driver> driver_;
};

TEST_F(DrmStackTest, TheDriverRunsOnDrmCallsAlone) {
  EXPECT_EQ(driver_->info().chipset, 0xc0u);
  EXPECT_EQ(driver_->info().vram_bytes, host_driver_->info().vram_bytes);
  auto ctx = driver_->CreateContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  guest::Channel* ch = (*ctx)->default_channel();
  const uint64_t vram_before = driver_->vram_free();

  // Pageable host memory, staged both ways, at sizes around the staging buffer's halves.
  for (const uint64_t size : {uint64_t{100}, uint64_t{4097}, uint64_t{3} << 20}) {
    SCOPED_TRACE(size);
    auto dev = (*ctx)->AllocDevice(size);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    const auto in = Pattern(size, uint32_t(size));
    ASSERT_TRUE(ch->CopyHostToDevice(dev->va, in.data(), size).ok());
    std::vector<uint8_t> out(size);
    ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), dev->va, size).ok());
    EXPECT_EQ(out, in);
    ASSERT_TRUE((*ctx)->Free(dev->va).ok());
  }
  EXPECT_EQ(driver_->vram_free(), vram_before);  // freed allocations are recycled or gone

  // Pinned memory by DMA, device to device, a memset.
  const uint64_t size = 1 << 20;
  auto a = (*ctx)->AllocDevice(size);
  auto b = (*ctx)->AllocDevice(size);
  auto pinned = (*ctx)->AllocHost(size);
  ASSERT_TRUE(a.ok() && b.ok() && pinned.ok());
  const auto in = Pattern(size, 77);
  std::memcpy(pinned->host, in.data(), size);
  ASSERT_TRUE(ch->CopyAsync(a->va, pinned->va, size).ok());
  ASSERT_TRUE(ch->CopyAsync(b->va + 8, a->va, size - 8).ok());
  auto f = ch->Memset32Async(a->va, 0xdeadbeef, 16);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ch->CopyAsync(pinned->va, b->va, size).ok());
  ASSERT_TRUE(ch->Synchronize().ok());
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(pinned->host) + 8, in.data(), size - 8), 0);
  std::vector<uint8_t> head(64);
  ASSERT_TRUE(ch->CopyDeviceToHost(head.data(), a->va, 64).ok());
  uint32_t word = 0;
  std::memcpy(&word, head.data() + 60, 4);
  EXPECT_EQ(word, 0xdeadbeefu);

  // The caller's own memory, registered at an odd address: the GPU writes into it.
  void* raw = nullptr;
  ASSERT_EQ(posix_memalign(&raw, 4096, 3 * 4096), 0);
  auto* mine = static_cast<uint8_t*>(raw);
  std::memset(mine, 0, 3 * 4096);
  auto registered = (*ctx)->RegisterHost(mine + 100, 8000);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  ASSERT_TRUE(ch->CopyAsync(registered->va, a->va + 64, 8000).ok());
  ASSERT_TRUE(ch->Synchronize().ok());
  EXPECT_EQ(std::memcmp(mine + 100, in.data() + 64, 8000), 0);
  ASSERT_TRUE((*ctx)->Free(registered->va).ok());
  free(raw);

  // Events and a second channel waiting on one.
  auto event = (*ctx)->CreateEvent();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE(ch->Record(*event).ok());
  ASSERT_TRUE((*event)->Wait().ok());
  EXPECT_TRUE((*event)->TimestampNs().ok());
  auto second = (*ctx)->CreateChannel();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE((*second)->WaitEvent(*event).ok());
  ASSERT_TRUE((*second)->CopyAsync(b->va, pinned->va, 4096).ok());
  ASSERT_TRUE((*second)->Synchronize().ok());
  ASSERT_TRUE((*ctx)->DestroyChannel(*second).ok());

  EXPECT_GT(drm_->requests(), 20u);
  EXPECT_GE(handler_->stats().files, 1u);
  ctx->reset();
  // The context's file is closed: the backend holds nothing of it.
  for (int i = 0; i < 200 && handler_->stats().files != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(handler_->stats().files, 0u);
  EXPECT_EQ(handler_->stats().objects, 0u);
}

// Small uploads in DRM mode ride in the pushbuffer (M2MF PUSH; user space has no BAR1): ragged
// sizes at ragged offsets land exactly, behind earlier work and ahead of later work on the channel.
TEST_F(DrmStackTest, SmallUploadsRideInThePushbufferAndLandExactly) {
  auto ctx = driver_->CreateContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  guest::Channel* ch = (*ctx)->default_channel();
  const uint64_t size = 3 * 4096;
  auto dev = (*ctx)->AllocDevice(size);
  ASSERT_TRUE(dev.ok());
  std::vector<uint8_t> want = Pattern(size, 5);
  ASSERT_TRUE(ch->CopyHostToDevice(dev->va, want.data(), size).ok());  // staged: > 4 KiB
  const uint64_t requests_before = drm_->requests();
  struct Piece {
    uint64_t offset, bytes;
  };
  const Piece pieces[] = {{1, 3}, {7, 12}, {100, 33}, {4095, 2}, {5000, 255}, {8192, 4096}};
  uint32_t seed = 100;
  for (const Piece& p : pieces) {
    const std::vector<uint8_t> in = Pattern(p.bytes, seed++);
    ASSERT_TRUE(ch->CopyHostToDevice(dev->va + p.offset, in.data(), p.bytes).ok());
    std::memcpy(want.data() + p.offset, in.data(), p.bytes);
  }
  // One request each (the pushbuffer), nothing staged.
  EXPECT_EQ(drm_->requests() - requests_before, std::size(pieces));
  // A kernel-free check of order: a device-to-device copy queued behind them sees them.
  auto copy = (*ctx)->AllocDevice(size);
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE(ch->CopyAsync(copy->va, dev->va, size).ok());
  std::vector<uint8_t> out(size);
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), copy->va, size).ok());
  EXPECT_EQ(out, want);
}

// A context whose commands fault is stopped by the backend; its waits learn it (kAborted) through
// the health check, and another context of the same guest carries on.
TEST_F(DrmStackTest, AFaultingContextIsStoppedAloneAndItsWaitsLearnIt) {
  auto good = driver_->CreateContext();
  auto bad = driver_->CreateContext();
  ASSERT_TRUE(good.ok() && bad.ok());
  auto commands = (*bad)->AllocHost(4096);
  ASSERT_TRUE(commands.ok());
  guest::PushBuffer pb;
  constexpr uint64_t kNowhere = 20ull << 30;
  pb.Inc(0, gf100::host::kSemaphoreA,
         {uint32_t(kNowhere >> 32), uint32_t(kNowhere), 1,
          gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
  std::memcpy(commands->host, pb.words().data(), pb.size() * 4);
  const guest::CommandSegment segment{commands->va, uint32_t(pb.size())};
  auto fence = (*bad)->default_channel()->SubmitSegments({&segment, 1});
  ASSERT_TRUE(fence.ok()) << fence.status().ToString();
  const Status waited = (*bad)->default_channel()->Wait(*fence);
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.ToString();
  EXPECT_EQ((*bad)->status().code(), StatusCode::kAborted);

  auto dev = (*good)->AllocDevice(4096);
  ASSERT_TRUE(dev.ok());
  const auto in = Pattern(4096, 5);
  ASSERT_TRUE((*good)->default_channel()->CopyHostToDevice(dev->va, in.data(), 4096).ok());
  std::vector<uint8_t> out(4096);
  ASSERT_TRUE((*good)->default_channel()->CopyDeviceToHost(out.data(), dev->va, 4096).ok());
  EXPECT_EQ(out, in);
}

// A pushbuffer is posted: the call returns once it is on the ring. One the backend refuses (a
// channel the file does not have) makes the file's next Pushbuf and Health say so; another file
// is untouched.
TEST_F(DrmStackTest, APostedPushbufferTheBackendRefusesFailsTheFilesNextCalls) {
  Result<uint32_t> file = drm_->OpenFile();
  Result<uint32_t> other = drm_->OpenFile();
  ASSERT_TRUE(file.ok() && other.ok());
  Result<guest::DrmDevice::Object> object = drm_->NewGart(*file, 4096);
  Result<guest::DrmDevice::Object> object2 = drm_->NewGart(*other, 4096);
  ASSERT_TRUE(object.ok() && object2.ok());
  const guest::DrmDevice::Push push{object->handle, 0, 16};
  ASSERT_TRUE(drm_->Pushbuf(*file, /*channel=*/77, {&push, 1}).ok());  // posted
  Status health = Status::Ok();
  for (int i = 0; i < 1000 && health.ok(); ++i) {
    health = drm_->Health(*file, object->handle);
    if (health.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(health.code(), StatusCode::kNotFound) << health.ToString();
  EXPECT_EQ(drm_->Pushbuf(*file, 77, {&push, 1}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(drm_->Health(*other, object2->handle).ok());
  drm_->CloseFile(*file);
  drm_->CloseFile(*other);
}

// pvdrm-pool: a freed host allocation's object is kept open and serves the next of its size — no
// GEM_CLOSE, no GEM_NEW — zeroed again; the pool is per file, bounded, and goes with the file.
TEST_F(DrmStackTest, GemPoolingServesTheNextObjectOfASizeWithoutARoundTrip) {
  PvdrmDeviceOptions options;
  options.pool_bytes = 1 << 20;
  PvdrmDevice pooled(*frontend_, *sharer_, *dma_, hv::kControlDomain, options);
  auto driver = guest::Driver::CreateOnDrm(&pooled);
  ASSERT_TRUE(driver.ok());
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  auto first = (*ctx)->AllocHost(64 << 10);
  ASSERT_TRUE(first.ok());
  std::memset(first->host, 0x5a, 64 << 10);
  const uint64_t objects = handler_->stats().objects;
  ASSERT_TRUE((*ctx)->Free(first->va).ok());
  EXPECT_EQ(handler_->stats().objects, objects);  // kept open in the pool
  const uint64_t requests = pooled.requests();
  auto second = (*ctx)->AllocHost(64 << 10);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(pooled.requests(), requests);  // no round trip
  EXPECT_EQ(pooled.pool_hits(), 1u);
  EXPECT_EQ(second->va, first->va);
  const auto* bytes = static_cast<const uint8_t*>(second->host);
  EXPECT_EQ(std::count(bytes, bytes + (64 << 10), 0), 64 << 10);  // zeroed again
  // Bigger than the pool: really closed.
  auto big = (*ctx)->AllocHost(2 << 20);
  ASSERT_TRUE(big.ok());
  const uint64_t before_free = handler_->stats().objects;
  ASSERT_TRUE((*ctx)->Free(big->va).ok());
  EXPECT_EQ(handler_->stats().objects, before_free - 1);
  // The pooled objects work: the GPU writes into the reused one.
  auto dev = (*ctx)->AllocDevice(4096);
  ASSERT_TRUE(dev.ok());
  const auto in = Pattern(4096, 9);
  ASSERT_TRUE((*ctx)->default_channel()->CopyHostToDevice(dev->va, in.data(), 4096).ok());
  ASSERT_TRUE((*ctx)->default_channel()->CopyAsync(second->va, dev->va, 4096).ok());
  ASSERT_TRUE((*ctx)->Synchronize().ok());
  EXPECT_EQ(std::memcmp(second->host, in.data(), 4096), 0);
  ctx->reset();
  for (int i = 0; i < 200 && handler_->stats().files != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(handler_->stats().objects, 0u);  // pooled objects went with the file
}

}  // namespace
}  // namespace gpuvm::pvdrm
