// Both ends of PVDRM over the local hypervisor backend: a real gpuvm-local-hvd (in-process), guest
// domains registered with it, real grants, event channels and store (docs/PVDRM.md). The typed
// suite also runs on Xen's dom0 loopback in the Xen test bed (skipped elsewhere).
#include <gtest/gtest.h>
#include <xen/io/protocols.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/store.h"
#include "hypervisor/testing/backend_env.h"
#include "pvdrm-backend/backend.h"
#include "pvdrm-frontend/frontend.h"
#include "pvdrm-frontend/page_lists.h"

namespace gpuvm::pvdrm {
namespace {

using hv::local::LocalDomain;

// The GPU layer's stand-in: answers from the request itself, so a wrong pairing shows, and reads
// the guest pages a request lists.
class TestHandler : public RequestHandler {
 public:
  Response Handle(const Request& request, GuestPages& pages) override {
    handled_.fetch_add(1);
    Response r;
    std::visit(
        [&](const auto& b) {
          using T = std::decay_t<decltype(b)>;
          if constexpr (std::is_same_v<T, GetParam>) {
            r.body = drm_nouveau_getparam{b.arg.param, b.arg.param * 1000 + request.file};
          } else if constexpr (std::is_same_v<T, GemNew>) {
            drm_nouveau_gem_info info = b.arg.info;
            info.handle = next_handle_++;
            if (b.pages.nr_pages != 0) {
              // GEM_NEW lists guest frames: their numbers, summed, prove which arrived.
              Result<std::vector<uint32_t>> frames =
                  ReadFrameList(pages, b.pages, (info.size + kPageBytes - 1) / kPageBytes);
              if (!frames.ok()) {
                r.status = -EFAULT;
                return;
              }
              uint64_t sum = 0;
              for (const uint32_t frame : *frames) sum += frame;
              info.map_handle = sum;
            }
            r.body = info;
          } else if constexpr (std::is_same_v<T, GemPushbuf>) {
            drm_nouveau_gem_pushbuf out = b.arg;
            if (b.data.nr_pages != 0) {
              std::unique_ptr<hv::GuestMapping> m = MapOrFail(pages, b.data, r);
              if (m == nullptr) return;
              Result<PushbufArrays> arrays = CopyPushbufArrays(b.arg, m->bytes());
              if (!arrays.ok()) {
                r.status = -EINVAL;
                return;
              }
              for (const auto& push : arrays->push) out.vram_available += push.length;
            }
            out.suffix0 = b.arg.nr_push;
            r.body = out;
          } else if constexpr (std::is_same_v<T, GemInfo>) {
            r.status = -ENOENT;
          }
        },
        request.body);
    return r;
  }
  void OnDisconnect() override { disconnects_.fetch_add(1); }
  bool WantsIdle() const override { return idle_wanted_.load() > 0; }
  void OnIdle() override {
    idle_wanted_.fetch_sub(1);
    idles_.fetch_add(1);
  }

  // The list's pages, or null with -EFAULT in `r` (a bad grant fails the request, as a bad user
  // pointer fails an ioctl).
  static std::unique_ptr<hv::GuestMapping> MapOrFail(GuestPages& pages, const PageList& list,
                                                     Response& r) {
    Result<std::unique_ptr<hv::GuestMapping>> m = pages.Map(list, hv::Access::kReadWrite);
    if (m.ok()) return std::move(*m);
    r.status = -EFAULT;
    return nullptr;
  }

  std::atomic<uint64_t> handled_{0};
  std::atomic<int> disconnects_{0};
  std::atomic<int> idle_wanted_{0};  // OnIdle calls still wanted
  std::atomic<int> idles_{0};

 private:
  uint32_t next_handle_ = 1;  // Run thread only
};

// One backend connection on its own thread, as a per-guest backend process runs it.
class BackendThread {
 public:
  Status Start(hv::GrantMapper& mapper, std::unique_ptr<hv::EventChannels> channels,
               std::unique_ptr<hv::Store> store, const BackendOptions& options) {
    GPUVM_ASSIGN_OR_RETURN(stop_, os::CreateEventFd());
    GPUVM_ASSIGN_OR_RETURN(connection_,
                           BackendConnection::Create(mapper, std::move(channels), std::move(store),
                                                     handler_, options));
    thread_ = std::thread([this] {
      run_status_ = connection_->Run(stop_.get());
      finished_.store(true);
    });
    return Status::Ok();
  }
  ~BackendThread() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    (void)os::SignalEventFd(stop_.get());
    thread_.join();
  }
  // Waits (bounded only by the test's own timeout) for Run() to return.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool finished() const { return finished_.load(); }

  TestHandler handler_;
  std::unique_ptr<BackendConnection> connection_;
  Status run_status_;

 private:
  os::UniqueFd stop_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

// Polls a store key until it has `value` (the store has watches, but a test reading it directly
// is simpler; no timing is asserted — the test's own timeout bounds the wait).
void AwaitKey(hv::Store& store, const std::string& path, const std::string& value) {
  for (;;) {
    Result<std::string> got = store.Read(path);
    if (got.ok() && *got == value) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
std::string StateValue(XenbusState state) { return std::to_string(static_cast<int>(state)); }

// ---- The typed suite: the same handshake and calls on every hypervisor backend.

template <typename Backend>
class PvdrmOnBackend : public hv::testing::BackendTest<Backend> {};
using Backends = ::testing::Types<hv::testing::LocalBackend, hv::testing::XenBackend>;
TYPED_TEST_SUITE(PvdrmOnBackend, Backends, hv::testing::BackendName);

TYPED_TEST(PvdrmOnBackend, HandshakeConnectsBothEndsAndCallsGetTheirAnswers) {
  auto& env = *this->env_;
  const DeviceAddress device{env.peer_domid(), env.backend_domid(), 0};
  GPUVM_ASSIGN_OR_SKIP(std::unique_ptr<hv::Store> toolstack, env.OpenStore(env.backend_domid()));
  ASSERT_TRUE(AnnounceDevice(*toolstack, device).ok());
  GPUVM_ASSIGN_OR_SKIP(std::unique_ptr<hv::GrantMapper> mapper, env.OpenGrantMapper());
  GPUVM_ASSIGN_OR_SKIP(std::unique_ptr<hv::GrantSharer> sharer, env.OpenGrantSharer());
  GPUVM_ASSIGN_OR_SKIP(auto back_channels, env.OpenEventChannels(env.backend_domid()));
  GPUVM_ASSIGN_OR_SKIP(auto back_store, env.OpenStore(env.backend_domid()));
  GPUVM_ASSIGN_OR_SKIP(auto front_channels, env.OpenEventChannels(env.peer_domid()));
  GPUVM_ASSIGN_OR_SKIP(auto front_store, env.OpenStore(env.peer_domid()));

  BackendThread backend;
  ASSERT_TRUE(
      backend.Start(*mapper, std::move(back_channels), std::move(back_store), {device}).ok());
  Result<std::unique_ptr<FrontendConnection>> frontend = FrontendConnection::Connect(
      *sharer, std::move(front_channels), std::move(front_store), {device});
  ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
  EXPECT_EQ(*toolstack->Read(Key(FrontendDir(device), kStateKey)),
            StateValue(XenbusStateConnected));
  EXPECT_EQ(*toolstack->Read(Key(BackendDir(device), kStateKey)), StateValue(XenbusStateConnected));
  EXPECT_EQ(*toolstack->Read(Key(FrontendDir(device), kVersionKey)),
            std::to_string(kProtocolVersion));

  Result<Response> open = (*frontend)->Call(5, FileOpen{});
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->status, 0);
  GetParam getparam;
  getparam.arg.param = NOUVEAU_GETPARAM_CHIPSET_ID;
  Result<Response> param = (*frontend)->Call(5, getparam);
  ASSERT_TRUE(param.ok()) << param.status().ToString();
  ASSERT_EQ(param->status, 0);
  EXPECT_EQ(std::get<drm_nouveau_getparam>(param->body).value,
            NOUVEAU_GETPARAM_CHIPSET_ID * 1000 + 5);

  ASSERT_TRUE((*frontend)->Close().ok());
  backend.Join();  // Run returns once the frontend is Closed
  EXPECT_TRUE(backend.run_status_.ok()) << backend.run_status_.ToString();
  EXPECT_EQ(backend.handler_.disconnects_.load(), 1);
  EXPECT_EQ(*toolstack->Read(Key(BackendDir(device), kStateKey)), StateValue(XenbusStateClosed));
  EXPECT_EQ(*toolstack->Read(Key(FrontendDir(device), kStateKey)), StateValue(XenbusStateClosed));
  EXPECT_TRUE(RemoveDevice(*toolstack, device).ok());
}

// ---- The local world with two guest domains: a good one and a hostile one.

class PvdrmLocalTest : public ::testing::Test {
 public:  // RawFrontend opens its channels and store through the fixture
  static constexpr hv::DomainId kGood = 1;
  static constexpr hv::DomainId kHostile = 2;
  static constexpr uint64_t kRamBytes = 8ull << 20;
  static constexpr uint64_t kPoolFrames = 256;

  void SetUp() override {
    static std::atomic<int> counter{0};
    path_ = "@gpuvm-pvdrm-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    auto daemon = hv::local::LocalHvDaemon::Create(path_);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    auto control = hv::local::LocalHvClient::Connect(path_, hv::kControlDomain);
    ASSERT_TRUE(control.ok());
    control_ = std::move(*control);
    for (hv::DomainId id : {kGood, kHostile}) {
      auto domain = LocalDomain::Create({id, kRamBytes, 1});
      ASSERT_TRUE(domain.ok()) << domain.status().ToString();
      ASSERT_TRUE(hv::local::RegisterDomain(*control_, **domain).ok());
      auto sharer = hv::local::LocalGrantSharer::Create(
          **domain, (*domain)->frame_count() - kPoolFrames, kPoolFrames);
      ASSERT_TRUE(sharer.ok()) << sharer.status().ToString();
      domains_[id] = std::move(*domain);
      sharers_[id] = std::move(*sharer);
    }
    toolstack_ = Store(hv::kControlDomain);
    auto lookup_client = hv::local::LocalHvClient::Connect(path_, hv::kControlDomain);
    ASSERT_TRUE(lookup_client.ok());
    std::shared_ptr<hv::local::LocalHvClient> client = std::move(*lookup_client);
    mapper_ = std::make_unique<hv::local::LocalGrantMapper>(
        hv::kControlDomain,
        [client](hv::DomainId id) { return hv::local::AttachDomain(*client, id); });
  }

  std::unique_ptr<hv::Store> Store(hv::DomainId as) {
    auto store = hv::local::LocalStore::Connect(path_, as);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::unique_ptr<hv::Store>(std::move(*store)) : nullptr;
  }
  std::unique_ptr<hv::EventChannels> Channels(hv::DomainId as) {
    auto channels = hv::local::LocalEventChannels::Connect(path_, as);
    EXPECT_TRUE(channels.ok()) << channels.status().ToString();
    return channels.ok() ? std::unique_ptr<hv::EventChannels>(std::move(*channels)) : nullptr;
  }

  // Announces the device and starts its backend thread.
  std::unique_ptr<BackendThread> StartBackend(const DeviceAddress& device,
                                              BackendOptions options = {}) {
    EXPECT_TRUE(AnnounceDevice(*toolstack_, device).ok());
    auto backend = std::make_unique<BackendThread>();
    options.device = device;
    Status started =
        backend->Start(*mapper_, Channels(hv::kControlDomain), Store(hv::kControlDomain), options);
    EXPECT_TRUE(started.ok()) << started.ToString();
    return backend;
  }
  Result<std::unique_ptr<FrontendConnection>> Connect(const DeviceAddress& device) {
    return FrontendConnection::Connect(*sharers_[device.frontend], Channels(device.frontend),
                                       Store(device.frontend), {device});
  }
  // Connects a frontend to `device` and opens its DRM file 1; null (with a failure) if it cannot.
  std::unique_ptr<FrontendConnection> ConnectAndOpen(const DeviceAddress& device) {
    Result<std::unique_ptr<FrontendConnection>> frontend = Connect(device);
    EXPECT_TRUE(frontend.ok()) << frontend.status().ToString();
    if (!frontend.ok()) return nullptr;
    Result<Response> open = (*frontend)->Call(1, FileOpen{});
    EXPECT_TRUE(open.ok() && open->status == 0);
    return std::move(*frontend);
  }
  std::string BackendState(const DeviceAddress& device) {
    Result<std::string> s = toolstack_->Read(Key(BackendDir(device), kStateKey));
    return s.ok() ? *s : s.status().ToString();
  }

  std::string path_;
  std::unique_ptr<hv::local::LocalHvDaemon> daemon_;
  std::unique_ptr<hv::local::LocalHvClient> control_;
  std::map<hv::DomainId, std::unique_ptr<LocalDomain>> domains_;
  std::map<hv::DomainId, std::unique_ptr<hv::local::LocalGrantSharer>> sharers_;
  std::unique_ptr<hv::Store> toolstack_;
  std::unique_ptr<hv::GrantMapper> mapper_;
};

TEST_F(PvdrmLocalTest, ManyThreadsManyFilesEachGetTheirOwnAnswers) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  EXPECT_EQ(frontend->Call(0, GetParam{}).status().code(), StatusCode::kInvalidArgument);
  constexpr int kThreads = 6;
  constexpr int kCalls = 300;  // far more than the ring's 32 slots
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t file = 100 + t;
      Result<Response> open = frontend->Call(file, FileOpen{});
      if (!open.ok() || open->status != 0) wrong.fetch_add(1);
      for (int i = 0; i < kCalls; ++i) {
        GetParam g;
        g.arg.param = 1 + i;
        Result<Response> r = frontend->Call(file, g);
        if (!r.ok() || r->status != 0 ||
            std::get<drm_nouveau_getparam>(r->body).value != g.arg.param * 1000 + file) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(backend->handler_.handled_.load(), uint64_t{kThreads} * (kCalls + 1) + 1);

  // The connection keeps per-file order: a file must be open, and only once.
  auto status_of = [&](uint32_t file, const RequestBody& body) {
    Result<Response> r = frontend->Call(file, body);
    return r.ok() ? r->status : -99999;
  };
  EXPECT_EQ(status_of(999, GetParam{}), -EBADF);
  EXPECT_EQ(status_of(100, FileOpen{}), -EEXIST);
  EXPECT_EQ(status_of(100, FileClose{}), 0);
  EXPECT_EQ(status_of(100, GemInfo{}), -EBADF);
  EXPECT_EQ(status_of(101, GemInfo{}), -ENOENT);  // the handler's own answer
  EXPECT_EQ(backend->connection_->stats().malformed, 0u);
}

// Posted requests (a pushbuffer's, in the device) interleaved with synchronous calls from other
// threads: every posted one completes exactly once with its own answer, in the order sent, and a
// synchronous call still gets its own; Close waits for what is posted.
// A handler with idle work gets OnIdle once the ring is quiet, as often as it asks and no more, and
// the ring is served as before around it.
TEST_F(PvdrmLocalTest, AQuietRingRunsTheHandlersIdleWork) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  EXPECT_EQ(backend->handler_.idles_.load(), 0);
  backend->handler_.idle_wanted_.store(2);
  // The poll in Run has no timeout while no idle work was wanted: a call wakes it to look again.
  GetParam g;
  g.arg.param = 3;
  ASSERT_TRUE(frontend->Call(1, g).ok());
  while (backend->handler_.idles_.load() < 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10 * BackendConnection::kIdleAfterMs));
  EXPECT_EQ(backend->handler_.idles_.load(), 2);
  Result<Response> after = frontend->Call(1, g);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::get<drm_nouveau_getparam>(after->body).value, 3 * 1000 + 1u);
}

TEST_F(PvdrmLocalTest, PostedRequestsCompleteInOrderBesideSynchronousCalls) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  ASSERT_EQ(frontend->Post(1, GetParam{}, nullptr).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(frontend->Post(0, GetParam{}, [](Result<Response>) {}).code(),
            StatusCode::kInvalidArgument);
  constexpr int kPosted = 400;  // far more than the ring's 32 slots
  std::mutex mu;
  std::vector<uint64_t> answers;  // in completion order
  std::atomic<int> wrong{0};
  std::thread sync([&] {
    for (int i = 0; i < 200; ++i) {
      GetParam g;
      g.arg.param = 5000 + i;
      Result<Response> r = frontend->Call(1, g);
      if (!r.ok() || r->status != 0 ||
          std::get<drm_nouveau_getparam>(r->body).value != g.arg.param * 1000 + 1) {
        wrong.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < kPosted; ++i) {
    GetParam g;
    g.arg.param = 1 + i;
    ASSERT_TRUE(frontend
                    ->Post(1, g,
                           [&](Result<Response> r) {
                             std::lock_guard lock(mu);
                             answers.push_back(r.ok() && r->status == 0
                                                   ? std::get<drm_nouveau_getparam>(r->body).value
                                                   : 0);
                           })
                    .ok());
  }
  sync.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(frontend->Close().ok());  // waits for the posted requests
  std::lock_guard lock(mu);
  ASSERT_EQ(answers.size(), size_t{kPosted});
  for (int i = 0; i < kPosted; ++i) EXPECT_EQ(answers[i], uint64_t(1 + i) * 1000 + 1) << i;
}

// A posted request whose backend goes away completes with the connection's failure.
TEST_F(PvdrmLocalTest, PostedRequestsLearnThatTheBackendWent) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  backend->Stop();
  while (frontend->health().ok()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(frontend->Post(1, GetParam{}, [](Result<Response>) {}).code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(frontend->Close().ok());
}

TEST_F(PvdrmLocalTest, GemPagesAndPushbufArraysTravelInGrantedPageLists) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  GemNew gem;
  gem.arg.info.size = 3 * kPageBytes;
  gem.arg.info.domain = NOUVEAU_GEM_DOMAIN_GART;
  const uint32_t frames[] = {10, 20, 40};
  Result<SharedPageList> listed = ShareFrameList(*sharers_[kGood], 0, frames);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  gem.pages = listed->list;
  Result<Response> made = frontend->Call(1, gem);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_EQ(made->status, 0);
  EXPECT_EQ(std::get<drm_nouveau_gem_info>(made->body).map_handle, 70u);
  EXPECT_NE(std::get<drm_nouveau_gem_info>(made->body).handle, 0u);

  // A page list whose indirect page is a grant that does not exist: reading it fails, the call
  // fails, the connection carries on.
  GemNew bad = gem;
  bad.pages.indirect = {60000};
  Result<Response> refused = frontend->Call(1, bad);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->status, -EFAULT);

  PushbufArrays arrays;
  arrays.buffers.resize(2);
  arrays.push.resize(3);
  for (size_t i = 0; i < arrays.push.size(); ++i) {
    arrays.push[i].bo_index = 1;
    arrays.push[i].length = 100 * (i + 1);
  }
  const PushbufLayout layout = LayoutPushbuf(2, 0, 3);
  Result<SharedPageList> data = ShareDataPages(*sharers_[kGood], 0, layout.pages);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  WritePushbufArrays(arrays, data->data->bytes());
  GemPushbuf pushbuf;
  pushbuf.arg.channel = 1;
  pushbuf.arg.nr_buffers = 2;
  pushbuf.arg.nr_push = 3;
  pushbuf.data = data->list;
  Result<Response> pushed = frontend->Call(1, pushbuf);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  ASSERT_EQ(pushed->status, 0);
  EXPECT_EQ(std::get<drm_nouveau_gem_pushbuf>(pushed->body).suffix0, 3u);
  EXPECT_EQ(std::get<drm_nouveau_gem_pushbuf>(pushed->body).vram_available, 600u);
  ASSERT_TRUE(frontend->Close().ok());
}

// A frontend written by hand with raw ring access, for a hostile guest.
class RawFrontend {
 public:
  RawFrontend(PvdrmLocalTest* t, hv::GrantSharer& sharer, const DeviceAddress& device)
      : device_(device),
        channels_(t->Channels(device.frontend)),
        store_(t->Store(device.frontend)) {
    auto page = sharer.Share(device.backend, 1, hv::Access::kReadWrite);
    EXPECT_TRUE(page.ok());
    page_ = std::move(*page);
    sring_ = reinterpret_cast<pvdrm_sring*>(page_->bytes().data());
    SHARED_RING_INIT(sring_);
    FRONT_RING_INIT(&front_, sring_, kPageBytes);
    auto port = channels_->AllocUnbound(device.backend);
    EXPECT_TRUE(port.ok());
    port_ = *port;
  }
  // Writes the handshake keys (ring-ref overridable) and goes Initialised.
  void Offer(std::optional<grant_ref_t> ring_ref = std::nullopt) {
    const std::string dir = FrontendDir(device_);
    ASSERT_TRUE(
        store_->Write(Key(dir, kRingRefKey), std::to_string(ring_ref.value_or(page_->refs()[0])))
            .ok());
    ASSERT_TRUE(store_->Write(Key(dir, kEventChannelKey), std::to_string(port_)).ok());
    ASSERT_TRUE(store_->Write(Key(dir, kProtocolKey), XEN_IO_PROTO_ABI_NATIVE).ok());
    ASSERT_TRUE(store_->Write(Key(dir, kVersionKey), std::to_string(kProtocolVersion)).ok());
    ASSERT_TRUE(WriteState(*store_, dir, XenbusStateInitialised).ok());
  }
  // Puts `count` requests (built by `fill`) in the ring, pushes and rings the doorbell.
  void Send(int count, const std::function<void(pvdrm_request&)>& fill) {
    for (int i = 0; i < count; ++i) {
      pvdrm_request* slot = RING_GET_REQUEST(&front_, front_.req_prod_pvt);
      std::memset(slot, 0, sizeof(*slot));
      slot->id = next_id_++;
      slot->file = 1;
      fill(*slot);
      ++front_.req_prod_pvt;
    }
    RING_PUSH_REQUESTS(&front_);
    ASSERT_TRUE(channels_->Notify(port_).ok());
  }
  // Waits until every request sent has its response; returns the responses' statuses.
  std::vector<int32_t> Collect() {
    std::vector<int32_t> statuses;
    while (front_.rsp_cons != front_.req_prod_pvt) {
      const RING_IDX rp = os::LoadShared(sring_->rsp_prod);
      while (front_.rsp_cons != rp) {
        pvdrm_response r;
        RING_COPY_RESPONSE(&front_, front_.rsp_cons, &r);
        statuses.push_back(r.status);
        ++front_.rsp_cons;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return statuses;
  }
  pvdrm_sring* sring() { return sring_; }
  hv::EventChannels& channels() { return *channels_; }
  hv::EvtchnPort port() const { return port_; }

 private:
  DeviceAddress device_;
  std::unique_ptr<hv::EventChannels> channels_;
  std::unique_ptr<hv::Store> store_;
  std::unique_ptr<hv::SharedPages> page_;
  pvdrm_sring* sring_ = nullptr;
  pvdrm_front_ring front_{};
  hv::EvtchnPort port_ = 0;
  uint64_t next_id_ = 1;
};

TEST_F(PvdrmLocalTest, HostileFrontendsAreDisconnectedWhileAGoodOneKeepsWorking) {
  const DeviceAddress good{kGood, 0, 0};
  auto good_backend = StartBackend(good);
  auto frontend = ConnectAndOpen(good);
  ASSERT_NE(frontend, nullptr);
  auto works = [&] {
    GetParam g;
    g.arg.param = 7;
    Result<Response> r = frontend->Call(1, g);
    return r.ok() && r->status == 0 && std::get<drm_nouveau_getparam>(r->body).value == 7001;
  };
  ASSERT_TRUE(works());

  // 1. A flood of unknown ops and malformed requests: each answered with its error until the
  //    backend has had enough, then Closing with a reason.
  {
    const DeviceAddress device{kHostile, 0, 0};
    BackendOptions options;
    options.max_malformed = 40;
    auto backend = StartBackend(device, options);
    RawFrontend raw(this, *sharers_[kHostile], device);
    raw.Offer();
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateConnected));
    raw.Send(16, [](pvdrm_request& r) { r.op = 0x7777; });
    std::vector<int32_t> statuses = raw.Collect();
    ASSERT_EQ(statuses.size(), 16u);
    for (int32_t s : statuses) EXPECT_EQ(s, -ENOTTY);
    raw.Send(16, [](pvdrm_request& r) {
      r.op = static_cast<uint16_t>(Op::kGetParam);
      r.u.getparam.value = 1;  // an output set: malformed
    });
    statuses = raw.Collect();
    ASSERT_EQ(statuses.size(), 16u);
    for (int32_t s : statuses) EXPECT_EQ(s, -EINVAL);
    EXPECT_TRUE(works());
    raw.Send(16, [](pvdrm_request& r) { r.op = 0xffff; });  // past max_malformed
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateClosing));
    EXPECT_NE(toolstack_->Read(Key(BackendDir(device), kErrorKey))->find("malformed"),
              std::string::npos);
    EXPECT_EQ(backend->handler_.disconnects_.load(), 1);
    EXPECT_EQ(backend->connection_->stats().malformed, 41u);
    EXPECT_TRUE(works());
  }

  // 2. A request producer index that lies: far more requests than the ring has slots.
  {
    const DeviceAddress device{kHostile, 0, 1};
    auto backend = StartBackend(device);
    RawFrontend raw(this, *sharers_[kHostile], device);
    raw.Offer();
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateConnected));
    os::StoreShared(raw.sring()->req_prod, RING_IDX{1000});
    ASSERT_TRUE(raw.channels().Notify(raw.port()).ok());
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateClosing));
    EXPECT_NE(toolstack_->Read(Key(BackendDir(device), kErrorKey))->find("request producer"),
              std::string::npos);
    EXPECT_EQ(backend->connection_->stats().requests, 0u);
    EXPECT_TRUE(works());
  }

  // 3. A ring-ref that is no grant of ours: the backend never connects.
  {
    const DeviceAddress device{kHostile, 0, 2};
    auto backend = StartBackend(device);
    RawFrontend raw(this, *sharers_[kHostile], device);
    raw.Offer(/*ring_ref=*/55555);
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateClosing));
    EXPECT_NE(toolstack_->Read(Key(BackendDir(device), kErrorKey))->find("ring-ref"),
              std::string::npos);
    EXPECT_EQ(backend->handler_.disconnects_.load(), 0);  // never connected
    EXPECT_EQ(backend->connection_->stats().connects, 0u);
  }

  // 4. Junk in the state key and in the handshake numbers.
  {
    const DeviceAddress device{kHostile, 0, 3};
    auto backend = StartBackend(device);
    auto store = Store(kHostile);
    const std::string dir = FrontendDir(device);
    ASSERT_TRUE(store->Write(Key(dir, kRingRefKey), "0x10").ok());
    ASSERT_TRUE(store->Write(Key(dir, kEventChannelKey), "1").ok());
    ASSERT_TRUE(store->Write(Key(dir, kProtocolKey), XEN_IO_PROTO_ABI_NATIVE).ok());
    ASSERT_TRUE(store->Write(Key(dir, kVersionKey), std::to_string(kProtocolVersion)).ok());
    ASSERT_TRUE(WriteState(*store, dir, XenbusStateInitialised).ok());
    AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateClosing));
    EXPECT_NE(toolstack_->Read(Key(BackendDir(device), kErrorKey))->find("decimal"),
              std::string::npos);
  }
  EXPECT_TRUE(works());
  EXPECT_EQ(good_backend->connection_->stats().malformed, 0u);
  EXPECT_FALSE(good_backend->finished());
}

TEST_F(PvdrmLocalTest, AVanishingFrontendMakesTheBackendFreeEverything) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  RawFrontend raw(this, *sharers_[kGood], device);  // a guest that will die without closing
  raw.Offer();
  AwaitKey(*toolstack_, Key(BackendDir(device), kStateKey), StateValue(XenbusStateConnected));
  raw.Send(2, [](pvdrm_request& r) { r.op = static_cast<uint16_t>(Op::kFileOpen); });
  ASSERT_EQ(raw.Collect(), (std::vector<int32_t>{0, -EEXIST}));
  EXPECT_EQ(backend->handler_.disconnects_.load(), 0);

  // The domain dies: the toolstack removes its store directory and the domain goes away.
  ASSERT_TRUE(toolstack_->Remove(FrontendDir(device)).ok());
  ASSERT_TRUE(hv::local::UnregisterDomain(*control_, kGood).ok());
  backend->Join();
  EXPECT_TRUE(backend->run_status_.ok()) << backend->run_status_.ToString();
  EXPECT_EQ(backend->handler_.disconnects_.load(), 1);
  EXPECT_NE(backend->connection_->disconnect_reason().find("vanished"), std::string::npos);
  EXPECT_EQ(BackendState(device), StateValue(XenbusStateClosed));
}

TEST_F(PvdrmLocalTest, TheFrontendSeesTheBackendGoAndFailsItsCalls) {
  const DeviceAddress device{kGood, 0, 0};
  auto backend = StartBackend(device);
  auto frontend = ConnectAndOpen(device);
  ASSERT_NE(frontend, nullptr);
  backend->Stop();  // the backend process ends: it disconnects and goes Closed
  EXPECT_EQ(backend->handler_.disconnects_.load(), 1);
  // The frontend's receiver sees Closed; from then on every call fails.
  while (frontend->health().ok()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  Result<Response> after = frontend->Call(1, GetParam{});
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(frontend->Close().ok());
  EXPECT_EQ(*toolstack_->Read(Key(FrontendDir(device), kStateKey)), StateValue(XenbusStateClosed));
}

// A backend written by hand that lies in its responses: the frontend breaks its connection, fails
// the call, tells the backend why and goes Closing.
TEST_F(PvdrmLocalTest, AFrontendBreaksOnABackendThatLies) {
  struct Lie {
    const char* what;
    uint32_t devid;
    std::function<void(pvdrm_sring&, const pvdrm_request&)> answer;
    const char* said;
  };
  const std::vector<Lie> lies = {
      {"an id nobody asked about", 5,
       [](pvdrm_sring& ring, const pvdrm_request& request) {
         pvdrm_response r{};
         r.id = request.id + 1000;
         r.op = request.op;
         std::memcpy(&ring.ring[0].rsp, &r, sizeof(r));
         os::StoreShared(ring.rsp_prod, RING_IDX{1});
       },
       "not outstanding"},
      {"a producer past the requests", 6,
       [](pvdrm_sring& ring, const pvdrm_request&) { os::StoreShared(ring.rsp_prod, RING_IDX{7}); },
       "past our requests"},
      {"a status that is no errno", 7,
       [](pvdrm_sring& ring, const pvdrm_request& request) {
         pvdrm_response r{};
         r.id = request.id;
         r.op = request.op;
         r.status = 12;
         std::memcpy(&ring.ring[0].rsp, &r, sizeof(r));
         os::StoreShared(ring.rsp_prod, RING_IDX{1});
       },
       "negative errno"},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.what);
    const DeviceAddress device{kGood, 0, lie.devid};
    ASSERT_TRUE(AnnounceDevice(*toolstack_, device).ok());
    const std::string back = BackendDir(device);
    const std::string front = FrontendDir(device);
    std::unique_ptr<hv::Store> store = Store(hv::kControlDomain);
    std::unique_ptr<hv::EventChannels> channels = Channels(hv::kControlDomain);
    ASSERT_TRUE(store->Write(Key(back, kVersionKey), std::to_string(kProtocolVersion)).ok());
    ASSERT_TRUE(WriteState(*store, back, XenbusStateInitWait).ok());
    Result<std::unique_ptr<FrontendConnection>> frontend = Status::Internal("not yet");
    std::thread connecting([&] { frontend = Connect(device); });
    AwaitKey(*toolstack_, Key(front, kStateKey), StateValue(XenbusStateInitialised));
    const grant_ref_t ref =
        static_cast<grant_ref_t>(*ReadNumber(*store, Key(front, kRingRefKey), 0xffffffff));
    auto ring = mapper_->Map(kGood, std::span<const grant_ref_t>(&ref, 1), hv::Access::kReadWrite);
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    auto port = channels->BindInterdomain(
        kGood,
        static_cast<hv::EvtchnPort>(*ReadNumber(*store, Key(front, kEventChannelKey), 0xffffffff)));
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    ASSERT_TRUE(WriteState(*store, back, XenbusStateConnected).ok());
    connecting.join();
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();

    Result<Response> answer = Status::Internal("not yet");
    std::thread caller([&] { answer = (*frontend)->Call(1, FileOpen{}); });
    auto& sring = *reinterpret_cast<pvdrm_sring*>((*ring)->bytes().data());
    while (os::LoadShared(sring.req_prod) != 1) std::this_thread::yield();
    pvdrm_request request;
    std::memcpy(&request, &sring.ring[0].req, sizeof(request));
    lie.answer(sring, request);
    ASSERT_TRUE(channels->Notify(*port).ok());
    caller.join();
    EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(answer.status().message().find(lie.said), std::string::npos)
        << answer.status().ToString();
    EXPECT_EQ((*frontend)->Call(1, FileOpen{}).status().code(), StatusCode::kUnavailable);
    AwaitKey(*toolstack_, Key(front, kStateKey), StateValue(XenbusStateClosing));
    EXPECT_NE(store->Read(Key(front, kErrorKey))->find(lie.said), std::string::npos);
    // The (hand-written) backend lets go; the frontend then closes for good.
    ring->reset();
    ASSERT_TRUE(WriteState(*store, back, XenbusStateClosed).ok());
    EXPECT_TRUE((*frontend)->Close().ok());
    EXPECT_EQ(*toolstack_->Read(Key(front, kStateKey)), StateValue(XenbusStateClosed));
  }
}

TEST_F(PvdrmLocalTest, AFrontendWithoutABackendGivesUpAtItsDeadline) {
  const DeviceAddress device{kGood, 0, 4};
  ASSERT_TRUE(AnnounceDevice(*toolstack_, device).ok());  // no backend ever runs
  FrontendOptions options{device};
  options.connect_timeout = std::chrono::milliseconds(50);
  auto frontend =
      FrontendConnection::Connect(*sharers_[kGood], Channels(kGood), Store(kGood), options);
  EXPECT_EQ(frontend.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*toolstack_->Read(Key(FrontendDir(device), kStateKey)), StateValue(XenbusStateClosed));
  // No device at all: a clear error.
  auto none = FrontendConnection::Connect(*sharers_[kGood], Channels(kGood), Store(kGood),
                                          {DeviceAddress{kGood, 0, 9}});
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuvm::pvdrm
