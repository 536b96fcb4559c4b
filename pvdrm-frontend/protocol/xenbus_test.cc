#include "pvdrm-frontend/protocol/xenbus.h"

#include <gtest/gtest.h>

#include <map>

namespace gpuvm::pvdrm {
namespace {

// A store in a map, enough for the key conventions (watches are the integration test's).
class MapStore : public hv::Store {
 public:
  Result<std::string> Read(std::string_view path) override {
    auto it = keys_.find(std::string(path));
    if (it == keys_.end()) return Status::NotFound(std::string(path));
    return it->second;
  }
  Status Write(std::string_view path, std::string_view value) override {
    keys_[std::string(path)] = std::string(value);
    return Status::Ok();
  }
  Status Remove(std::string_view path) override {
    const std::string prefix = std::string(path) + "/";
    const size_t erased = std::erase_if(
        keys_, [&](const auto& kv) { return kv.first == path || kv.first.starts_with(prefix); });
    return erased ? Status::Ok() : Status::NotFound(std::string(path));
  }
  Result<std::vector<std::string>> List(std::string_view) override {
    return Status::Unimplemented("not needed");
  }
  Status Watch(std::string_view, std::string_view) override { return Status::Ok(); }
  Status Unwatch(std::string_view, std::string_view) override { return Status::Ok(); }
  int watch_fd() const override { return -1; }
  Result<std::optional<hv::WatchEvent>> PollWatch() override {
    return std::optional<hv::WatchEvent>();
  }

  std::map<std::string, std::string> keys_;
};

TEST(PvdrmXenbus, DirectoriesFollowXensLayout) {
  const DeviceAddress device{3, 0, 1};
  EXPECT_EQ(FrontendDir(device), "/local/domain/3/device/vgpu-drm/1");
  EXPECT_EQ(BackendDir(device), "/local/domain/0/backend/vgpu-drm/3/1");
  EXPECT_EQ(int{XenbusStateConnected}, 4);  // the header's values are the protocol's
  EXPECT_EQ(StateName(XenbusStateInitWait), "InitWait");
}

TEST(PvdrmXenbus, NumbersArePlainDecimalWithinTheBound) {
  EXPECT_EQ(*ParseNumber("0", 10), 0u);
  EXPECT_EQ(*ParseNumber("4294967295", 0xffffffff), 0xffffffffu);
  EXPECT_EQ(*ParseNumber("18446744073709551615", UINT64_MAX), UINT64_MAX);
  for (const char* bad :
       {"", "-1", "+1", " 1", "1 ", "01", "0x10", "4294967296", "1e3", "99999999999999999999999"}) {
    EXPECT_EQ(ParseNumber(bad, 0xffffffff).status().code(), StatusCode::kDataLoss) << bad;
  }
  EXPECT_FALSE(ParseNumber("9", 8).ok());
}

TEST(PvdrmXenbus, AnnounceWritesBothDirectoriesAndRemoveTakesThemAway) {
  MapStore store;
  const DeviceAddress device{2, 0, 0};
  ASSERT_TRUE(AnnounceDevice(store, device).ok());
  EXPECT_EQ(*ReadState(store, FrontendDir(device)), XenbusStateInitialising);
  EXPECT_EQ(*ReadState(store, BackendDir(device)), XenbusStateInitialising);
  EXPECT_EQ(*store.Read(Key(FrontendDir(device), kBackendKey)), BackendDir(device));
  EXPECT_EQ(*store.Read(Key(BackendDir(device), kFrontendIdKey)), "2");
  ASSERT_TRUE(WriteState(store, FrontendDir(device), XenbusStateConnected).ok());
  EXPECT_EQ(*ReadState(store, FrontendDir(device)), XenbusStateConnected);
  ASSERT_TRUE(store.Write(Key(FrontendDir(device), kStateKey), "9").ok());
  EXPECT_EQ(ReadState(store, FrontendDir(device)).status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(RemoveDevice(store, device).ok());
  EXPECT_EQ(ReadState(store, FrontendDir(device)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(RemoveDevice(store, device).ok());  // already gone is fine
}

}  // namespace
}  // namespace gpuvm::pvdrm
