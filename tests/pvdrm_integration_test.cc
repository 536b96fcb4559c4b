// PVDRM end to end with real processes (docs/PVDRM.md): gpuvm-aggregator owns the software GPU;
// gpuvm-pvdrm-backend opens a VM's session with that VM's token and serves its vgpu-drm device;
// the test plays the guest — a local domain registered with an in-process local hypervisor
// daemon — and its frontend: it writes PCOPY commands into its own RAM, names the frames in
// GEM_NEW, submits with GEM_PUSHBUF and waits with GEM_CPU_PREP. Checked: the bytes arrive
// through the aggregator's GPU, gpuvm-ctl lists the VM, and the backend frees everything and
// ends its session when the frontend goes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/hw/classes.h"
#include "guest-pv-driver/pushbuf.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/store.h"
#include "pvdrm-frontend/frontend.h"
#include "pvdrm-frontend/page_lists.h"
#include "tests/vm_process_fixture.h"

namespace gpuvm::pvdrm {
namespace {

using namespace std::chrono_literals;
using process_testing::Process;

constexpr hv::DomainId kGuest = 7;
constexpr uint64_t kRamBytes = 64ull << 20;   // 16384 frames
constexpr uint32_t kGrantPoolFrames = 256;    // the top of RAM: pages the guest shares
constexpr uint32_t kBackendPoolFirst = 8192;  // 8 MiB at 32 MiB: the backend's DMA pool
constexpr uint32_t kBackendPoolFrames = 2048;

// The last "name=N" in `text`, or -1.
long long Counter(const std::string& text, const std::string& name) {
  const size_t at = text.rfind(name + "=");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + name.size() + 1));
}

class PvdrmIntegrationTest : public process_testing::AggregatorProcessTest {
 protected:
  void SetUp() override {
    StartAggregator("pvdrm", {"--vram-mib", "256"});
    hv_path_ = "@gpuvm-pvdrm-hv-" + std::to_string(::getpid());
    auto daemon = hv::local::LocalHvDaemon::Create(hv_path_);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    auto control = hv::local::LocalHvClient::Connect(hv_path_, hv::kControlDomain);
    ASSERT_TRUE(control.ok());
    control_ = std::move(*control);
    auto domain = hv::local::LocalDomain::Create({kGuest, kRamBytes, 1});
    ASSERT_TRUE(domain.ok()) << domain.status().ToString();
    domain_ = std::move(*domain);
    ASSERT_TRUE(hv::local::RegisterDomain(*control_, *domain_).ok());
    auto sharer = hv::local::LocalGrantSharer::Create(
        *domain_, domain_->frame_count() - kGrantPoolFrames, kGrantPoolFrames);
    ASSERT_TRUE(sharer.ok()) << sharer.status().ToString();
    sharer_ = std::move(*sharer);
    void* ram = mmap(nullptr, kRamBytes, PROT_READ | PROT_WRITE, MAP_SHARED, domain_->ram_fd(), 0);
    ASSERT_NE(ram, MAP_FAILED);
    ram_ = static_cast<uint8_t*>(ram);
  }
  void TearDown() override {
    if (ram_ != nullptr) munmap(ram_, kRamBytes);
    AggregatorProcessTest::TearDown();
  }

  // The VM's one-time token, from the aggregator's control socket, in a file.
  std::string TokenFile() {
    Process ctl = Process::Start(
        {GPUVM_CTL_BIN, "--socket", socket_ + "-control", "vm-token", std::to_string(kGuest)},
        dir_ + "/ctl-token");
    EXPECT_TRUE(ctl.Wait(60s)) << ctl.Logs();
    EXPECT_EQ(ctl.exit_code(), 0) << ctl.Logs();
    const std::string path = dir_ + "/token";
    std::ofstream(path) << ctl.out();
    ::chmod(path.c_str(), 0600);  // a token readable by others is refused
    return path;
  }
  Process StartBackend() {
    Process p = Process::Start(
        {GPUVM_PVDRM_BACKEND_BIN, "--backend", "local", "--hv", hv_path_, "--domid",
         std::to_string(kGuest), "--token-file", TokenFile(), "--aggregator", socket_, "--pool",
         std::to_string(kBackendPoolFirst) + ":" + std::to_string(kBackendPoolFrames), "--name",
         "drm1", "--vram-mib", "64", "--announce"},
        dir_ + "/backend");
    const auto deadline = process_testing::Clock::now() + 60s;
    while (p.err().find("serving") == std::string::npos) {
      if (process_testing::Clock::now() > deadline || p.Exited()) {
        ADD_FAILURE() << "the backend did not come up: " << p.Logs();
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    return p;
  }
  std::unique_ptr<FrontendConnection> Connect() {
    auto channels = hv::local::LocalEventChannels::Connect(hv_path_, kGuest);
    auto store = hv::local::LocalStore::Connect(hv_path_, kGuest);
    EXPECT_TRUE(channels.ok() && store.ok());
    if (!channels.ok() || !store.ok()) return nullptr;
    FrontendOptions options;
    options.device = {kGuest, hv::kControlDomain, 0};
    auto frontend =
        FrontendConnection::Connect(*sharer_, std::move(*channels), std::move(*store), options);
    EXPECT_TRUE(frontend.ok()) << frontend.status().ToString();
    return frontend.ok() ? std::move(*frontend) : nullptr;
  }
  uint8_t* Frame(uint32_t frame) { return ram_ + uint64_t{frame} * 4096; }

  std::string List() {
    Process ctl = Process::Start({GPUVM_CTL_BIN, "--socket", socket_ + "-control", "list"},
                                 dir_ + "/ctl-list");
    EXPECT_TRUE(ctl.Wait(60s)) << ctl.Logs();
    return ctl.out();
  }

  std::string hv_path_;
  std::unique_ptr<hv::local::LocalHvDaemon> daemon_;
  std::unique_ptr<hv::local::LocalHvClient> control_;
  std::unique_ptr<hv::local::LocalDomain> domain_;
  std::unique_ptr<hv::local::LocalGrantSharer> sharer_;
  uint8_t* ram_ = nullptr;
};

TEST_F(PvdrmIntegrationTest, AGuestPushbufferCopiesThroughTheAggregatorsGpu) {
  Process backend = StartBackend();
  ASSERT_FALSE(backend.Exited()) << backend.Logs();
  std::unique_ptr<FrontendConnection> frontend = Connect();
  ASSERT_NE(frontend, nullptr) << backend.Logs();
  auto call = [&](RequestBody body) -> Response {
    Result<Response> r = frontend->Call(1, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ErrorResponse(0, Op::kFileOpen, -EPIPE);
  };
  ASSERT_EQ(call(FileOpen{}).status, 0);
  GetParam chipset;
  chipset.arg.param = NOUVEAU_GETPARAM_CHIPSET_ID;
  Response got = call(chipset);
  ASSERT_EQ(got.status, 0) << backend.Logs();
  EXPECT_EQ(std::get<drm_nouveau_getparam>(got.body).value, 0xc0u);
  Response channel = call(ChannelAlloc{});
  ASSERT_EQ(channel.status, 0);

  // GART objects over frames the guest owns: source (4 pages, out of order), destination, and
  // the pushbuffer; a VRAM object between them.
  std::vector<SharedPageList> lists;
  auto gart = [&](std::vector<uint32_t> frames) {
    Result<SharedPageList> listed = ShareFrameList(*sharer_, hv::kControlDomain, frames);
    EXPECT_TRUE(listed.ok());
    GemNew g;
    g.arg.info.size = frames.size() * 4096;
    g.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
    g.pages = listed->list;
    lists.push_back(std::move(*listed));
    Response r = call(g);
    EXPECT_EQ(r.status, 0);
    return r.status == 0 ? std::get<drm_nouveau_gem_info>(r.body) : drm_nouveau_gem_info{};
  };
  const std::vector<uint32_t> src_frames = {1003, 1002, 1001, 1000};
  const drm_nouveau_gem_info src = gart(src_frames);
  const drm_nouveau_gem_info dst = gart({2000, 2001, 2002, 2003});
  const drm_nouveau_gem_info push = gart({3000});
  GemNew v;
  v.arg.info.size = 1 << 20;
  v.arg.info.domain = NOUVEAU_GEM_DOMAIN_VRAM;
  Response vr = call(v);
  ASSERT_EQ(vr.status, 0);
  const drm_nouveau_gem_info vram = std::get<drm_nouveau_gem_info>(vr.body);

  constexpr uint32_t kBytes = 4 * 4096;
  for (uint32_t i = 0; i < kBytes; ++i) Frame(src_frames[i / 4096])[i % 4096] = uint8_t(i * 13 + 1);
  guest::PushBuffer pb;
  auto copy = [&pb](uint64_t to, uint64_t from) {
    pb.Method(4, gf100::host::kSetObject, gf100::kClassCopy);
    pb.Inc(
        4, gf100::copy::kOffsetInUpper,
        {uint32_t(from >> 32), uint32_t(from), uint32_t(to >> 32), uint32_t(to), 0, 0, kBytes, 1});
    pb.Method(4, gf100::copy::kLaunchDma, 2 | gf100::copy::kSrcPitch | gf100::copy::kDstPitch);
  };
  copy(vram.offset, src.offset);
  copy(dst.offset, vram.offset);
  std::memcpy(Frame(3000), pb.words().data(), pb.size() * 4);

  PushbufArrays arrays;
  for (uint32_t handle : {push.handle, src.handle, vram.handle, dst.handle}) {
    drm_nouveau_gem_pushbuf_bo bo{};
    bo.handle = handle;
    bo.read_domains = NOUVEAU_GEM_DOMAIN_GART | NOUVEAU_GEM_DOMAIN_VRAM;
    arrays.buffers.push_back(bo);
  }
  arrays.push.push_back({0, 0, 0, pb.size() * 4});
  const PushbufLayout layout = LayoutPushbuf(4, 0, 1);
  Result<SharedPageList> data = ShareDataPages(*sharer_, hv::kControlDomain, layout.pages);
  ASSERT_TRUE(data.ok());
  WritePushbufArrays(arrays, data->data->bytes());
  GemPushbuf submit;
  submit.arg.channel = uint32_t(std::get<drm_nouveau_channel_alloc>(channel.body).channel);
  submit.arg.nr_buffers = 4;
  submit.arg.nr_push = 1;
  submit.data = data->list;
  ASSERT_EQ(call(submit).status, 0) << backend.Logs();
  GemCpuPrep prep;
  prep.arg.handle = dst.handle;
  ASSERT_EQ(call(prep).status, 0) << backend.Logs();
  for (uint32_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(Frame(2000 + i / 4096)[i % 4096], uint8_t(i * 13 + 1)) << "byte " << i;
  }

  // The operator sees the VM, as a pvdrm one.
  const std::string listed = List();
  EXPECT_NE(listed.find("drm1"), std::string::npos) << listed;
  EXPECT_NE(listed.find("pvdrm"), std::string::npos) << listed;

  // The frontend goes: the backend frees everything, ends its session and exits cleanly.
  ASSERT_TRUE(frontend->Close().ok());
  ASSERT_TRUE(backend.Wait(60s)) << backend.Logs();
  EXPECT_EQ(backend.exit_code(), 0) << backend.Logs();
  EXPECT_EQ(Counter(backend.err(), "pvdrm_pushbufs"), 1) << backend.Logs();
  EXPECT_GT(Counter(backend.err(), "pvdrm_requests"), 8) << backend.Logs();
  EXPECT_TRUE(WaitForLog("drm1", 5s));
}

// gpuvm-vm --mode pvdrm / pvdrm-pool: unmodified guest programs (the driver-API suite's
// gpuvm-pt-guest) run through the split driver — a pvdrm VM, a pvdrm-pool VM and an fv VM at once,
// all correct, each pvdrm VM's backend reporting its ring requests, the aggregator listing the
// pvdrm VMs.
TEST_F(PvdrmIntegrationTest, PvdrmVmsRunGuestProgramsBesideAnFvVm) {
  auto pvdrm_vm = [&](const std::string& name, const std::vector<std::string>& guest,
                      const std::string& mode = "pvdrm") {
    std::vector<std::string> argv = VmCommand({"--mode", mode, "--name", name, "--vram-mib", "64",
                                               "--pvdrm-backend", GPUVM_PVDRM_BACKEND_BIN},
                                              guest);
    return Process::Start(argv, dir_ + "/" + name);
  };
  Process a = pvdrm_vm("drm-madd", {"case", "madd"});
  Process b = pvdrm_vm("drm-mmul", {"case", "mmul"}, "pvdrm-pool");
  Process fv = StartVm({"--mode", "fv-optimized", "--name", "fv-nop", "--vram-mib", "64"},
                       {"nop", "3"}, "fv-nop");
  for (Process* p : {&a, &b, &fv}) {
    ASSERT_TRUE(p->Wait(180s)) << p->Logs();
    EXPECT_EQ(p->exit_code(), 0) << p->Logs();
  }
  EXPECT_NE(a.out().find("PASSED madd"), std::string::npos) << a.Logs();
  EXPECT_NE(b.out().find("PASSED mmul"), std::string::npos) << b.Logs();
  EXPECT_NE(fv.out().find("PASSED nop x3"), std::string::npos) << fv.Logs();
  EXPECT_NE(a.out().find("(gpuvm pvdrm)"), std::string::npos) << a.Logs();
  EXPECT_GT(Counter(a.err(), "pvdrm_pushbufs"), 2) << a.Logs();
  EXPECT_GT(Counter(a.err(), "pvdrm_requests"), 10) << a.Logs();
  EXPECT_EQ(Counter(b.err(), "pvdrm_frontend_requests"), Counter(b.err(), "pvdrm_requests"))
      << b.Logs();  // the frontend's count and the backend's agree
  EXPECT_NE(AggregatorLog().find("name=drm-mmul "), std::string::npos) << AggregatorLog();
}

// The guest dies mid-run (kill -9 of the program holding its GPU work): gpuvm-vm stops the
// backend, which frees the guest's objects and ends the VM's session; the next pvdrm VM runs.
TEST_F(PvdrmIntegrationTest, AGuestKilledMidRunIsCleanedUpAndTheNextVmRuns) {
  const std::string ready = dir_ + "/hold.ready";
  const std::string pids = dir_ + "/hold.pids";
  Process holder =
      Process::Start(VmCommand({"--mode", "pvdrm", "--name", "drm-hold", "--pvdrm-backend",
                                GPUVM_PVDRM_BACKEND_BIN, "--pid-file", pids},
                               {"hold", ready}),
                     dir_ + "/hold");
  ASSERT_TRUE(WaitForFile(ready, holder, 120s)) << holder.Logs();
  ASSERT_TRUE(WaitForFile(pids, holder, 10s)) << holder.Logs();
  std::istringstream in(process_testing::ReadFile(pids));
  std::string who;
  pid_t pid = -1, guest = -1;
  while (in >> who >> pid) {
    if (who == "guest") guest = pid;
  }
  ASSERT_GT(guest, 0);
  ::kill(guest, SIGKILL);
  ASSERT_TRUE(holder.Wait(60s)) << holder.Logs();
  EXPECT_EQ(holder.exit_code(), 128 + SIGKILL) << holder.Logs();
  EXPECT_TRUE(WaitForLog("name=drm-hold ", 10s)) << AggregatorLog();
  EXPECT_NE(holder.err().find("gpuvm-counters: pvdrm_requests="), std::string::npos)
      << holder.Logs();  // the backend ended cleanly, with its counters

  Process next = Process::Start(VmCommand({"--mode", "pvdrm", "--name", "drm-next",
                                           "--pvdrm-backend", GPUVM_PVDRM_BACKEND_BIN},
                                          {"nop", "2"}),
                                dir_ + "/next");
  ASSERT_TRUE(next.Wait(120s)) << next.Logs();
  EXPECT_EQ(next.exit_code(), 0) << next.Logs();
  EXPECT_NE(next.out().find("PASSED nop x2"), std::string::npos) << next.Logs();
}

}  // namespace
}  // namespace gpuvm::pvdrm
