// SysfsBus against a sysfs tree made of ordinary files: the resourceN files are sparse files the
// bus maps like BARs, so every access is visible with pread; DMA frames come from a page map file
// the test writes (and, as root, from the real /proc/self/pagemap).
#include "guest-pv-driver/sysfs_bus.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuvm::guest {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kBar0 = 16ull << 20;
constexpr uint64_t kBar1 = 1ull << 20;
constexpr uint64_t kBar3 = 256ull << 10;
constexpr uint64_t kBar0Address = 0xf3000000;
constexpr uint64_t kBar1Address = 0xe0000000;
constexpr uint64_t kBar3Address = 0xe8000000;

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

void MakeSparse(const fs::path& path, uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t(size)), 0);
  ::close(fd);
}

// A line of the `resource` file; an absent resource is all zeros, as the kernel prints it.
std::string ResourceLine(uint64_t start, uint64_t size, uint64_t flags) {
  if (size == 0) start = flags = 0;
  char line[80];
  std::snprintf(line, sizeof(line), "0x%016llx 0x%016llx 0x%016llx\n", (unsigned long long)start,
                (unsigned long long)(size ? start + size - 1 : 0), (unsigned long long)flags);
  return line;
}

class GuestDriverSysfsBusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("sysfs-bus-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    // Another function first (the bus must skip it), then the GPU.
    AddFunction("0000:00:00.0", "0x8086", "0x1237", "0x060000", kBar0, kBar1, kBar3);
    AddFunction("0000:00:05.0", "0x10de", "0x06d8", "0x030000", kBar0, kBar1, kBar3);
  }
  void TearDown() override { fs::remove_all(root_); }

  void AddFunction(const std::string& name, const std::string& vendor, const std::string& device,
                   const std::string& class_code, uint64_t bar0, uint64_t bar1, uint64_t bar3) {
    const fs::path d = root_ / name;
    fs::create_directories(d);
    WriteFile(d / "vendor", vendor + "\n");
    WriteFile(d / "device", device + "\n");
    WriteFile(d / "class", class_code + "\n");
    WriteFile(d / "revision", "0xa1\n");
    // BAR0 32-bit, BAR1 and BAR3 64-bit prefetchable (the upper halves show as empty lines).
    std::string resource = ResourceLine(kBar0Address, bar0, 0x40200) +
                           ResourceLine(kBar1Address, bar1, 0x14220c) + ResourceLine(0, 0, 0) +
                           ResourceLine(kBar3Address, bar3, 0x14220c) + ResourceLine(0, 0, 0) +
                           ResourceLine(0, 0, 0) + ResourceLine(0, 0, 0);
    WriteFile(d / "resource", resource);
    MakeSparse(d / "resource0", bar0);
    MakeSparse(d / "resource1", bar1);
    MakeSparse(d / "resource3", bar3);
  }

  SysfsBusOptions Options() const {
    SysfsBusOptions o;
    o.devices_dir = root_.string();
    return o;
  }

  // The bytes the "device" holds: the resource file's contents.
  std::vector<uint8_t> Peek(int bar, uint64_t offset, uint64_t length) const {
    std::vector<uint8_t> out(length);
    const fs::path p = root_ / "0000:00:05.0" / ("resource" + std::to_string(bar));
    const int fd = ::open(p.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), length, off_t(offset)), ssize_t(length));
    ::close(fd);
    return out;
  }

  fs::path root_;
};

TEST_F(GuestDriverSysfsBusTest, FindsTheGpuByIdAndReadsItsIdentity) {
  auto bus = SysfsBus::Create(Options());
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  EXPECT_EQ((*bus)->address(), "0000:00:05.0");
  const gpu::PciIdentity& pci = (*bus)->pci();
  EXPECT_EQ(pci.vendor_id, 0x10de);
  EXPECT_EQ(pci.device_id, 0x06d8);
  EXPECT_EQ(pci.class_code, 0x030000u);
  EXPECT_EQ(pci.revision, 0xa1);
  EXPECT_EQ(pci.bar0_size, kBar0);
  EXPECT_EQ(pci.bar1_size, kBar1);
  EXPECT_EQ(pci.bar3_size, kBar3);
  EXPECT_EQ((*bus)->bar_address(Bar::k0), kBar0Address);
  EXPECT_EQ((*bus)->bar_address(Bar::k1), kBar1Address);
  EXPECT_EQ((*bus)->bar_address(Bar::k3), kBar3Address);
}

TEST_F(GuestDriverSysfsBusTest, ExplicitAddressAndMissingDevices) {
  SysfsBusOptions o = Options();
  o.address = "0000:00:05.0";
  EXPECT_TRUE(SysfsBus::Create(o).ok());

  o.address = "0000:00:07.0";
  EXPECT_FALSE(SysfsBus::Create(o).ok());
  o.address = "../0000:00:05.0";
  EXPECT_EQ(SysfsBus::Create(o).status().code(), StatusCode::kInvalidArgument);

  o = Options();
  o.device_id = 0x1234;
  EXPECT_EQ(SysfsBus::Create(o).status().code(), StatusCode::kNotFound);

  o = Options();
  o.devices_dir = (root_ / "nothing-here").string();
  EXPECT_FALSE(SysfsBus::Create(o).ok());
}

TEST_F(GuestDriverSysfsBusTest, RefusesMissingOrSmallBars) {
  fs::remove_all(root_ / "0000:00:05.0");
  AddFunction("0000:00:05.0", "0x10de", "0x06d8", "0x030000", kBar0, 0, kBar3);
  EXPECT_EQ(SysfsBus::Create(Options()).status().code(), StatusCode::kFailedPrecondition);

  fs::remove_all(root_ / "0000:00:05.0");
  AddFunction("0000:00:05.0", "0x10de", "0x06d8", "0x030000", 1 << 20, kBar1, kBar3);
  EXPECT_EQ(SysfsBus::Create(Options()).status().code(), StatusCode::kFailedPrecondition);

  // A resource file that is not numbers.
  WriteFile(root_ / "0000:00:05.0" / "resource", "garbage\n");
  EXPECT_FALSE(SysfsBus::Create(Options()).ok());
}

TEST_F(GuestDriverSysfsBusTest, SingleAccessesReachTheBarsAtEveryWidth) {
  auto bus = SysfsBus::Create(Options());
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  SysfsBus& b = **bus;
  b.Write(Bar::k0, 0x1000, Width::k32, 0xdeadbeef);
  b.Write(Bar::k0, 0x1004, Width::k16, 0x1234);
  b.Write(Bar::k0, 0x1006, Width::k8, 0x56);
  b.Write(Bar::k1, 0x10, Width::k64, 0x0102030405060708ull);
  b.Write(Bar::k3, kBar3 - 8, Width::k64, 0xa5a5a5a5a5a5a5a5ull);
  EXPECT_EQ(b.Read(Bar::k0, 0x1000, Width::k32), 0xdeadbeefu);
  EXPECT_EQ(b.Read(Bar::k0, 0x1004, Width::k16), 0x1234u);
  EXPECT_EQ(b.Read(Bar::k0, 0x1006, Width::k8), 0x56u);
  EXPECT_EQ(b.Read(Bar::k0, 0x1000, Width::k64), 0x0056'1234'deadbeefull);
  EXPECT_EQ(b.Read(Bar::k1, 0x10, Width::k64), 0x0102030405060708ull);
  EXPECT_EQ(b.ReadReg(0x1000), 0xdeadbeefu);

  const std::vector<uint8_t> bar0 = Peek(0, 0x1000, 8);
  EXPECT_EQ(bar0, (std::vector<uint8_t>{0xef, 0xbe, 0xad, 0xde, 0x34, 0x12, 0x56, 0x00}));
  EXPECT_EQ(Peek(3, kBar3 - 8, 8), std::vector<uint8_t>(8, 0xa5));
  EXPECT_EQ(b.bad_accesses(), 0u);
}

TEST_F(GuestDriverSysfsBusTest, AccessesOutsideABarOrUnalignedAreDropped) {
  auto bus = SysfsBus::Create(Options());
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  SysfsBus& b = **bus;
  EXPECT_EQ(b.Read(Bar::k0, kBar0, Width::k32), 0u);
  EXPECT_EQ(b.Read(Bar::k0, kBar0 - 2, Width::k32), 0u);
  EXPECT_EQ(b.Read(Bar::k1, ~0ull - 3, Width::k32), 0u);  // offset + size would wrap
  EXPECT_EQ(b.Read(Bar::k0, 0x1002, Width::k32), 0u);     // not naturally aligned
  b.Write(Bar::k3, kBar3, Width::k8, 1);
  b.Write(Bar::k3, kBar3 - 4, Width::k64, 1);
  EXPECT_EQ(b.bad_accesses(), 6u);
  EXPECT_EQ(Peek(3, kBar3 - 8, 8), std::vector<uint8_t>(8, 0));
}

class GuestDriverSysfsBusBlockTest
    : public GuestDriverSysfsBusTest,
      public ::testing::WithParamInterface<SysfsBusOptions::BlockTransfer> {
 protected:
  // The bus with the block transfer under test, in bus_.
  void OpenBus() {
    SysfsBusOptions o = Options();
    o.block_transfer = GetParam();
    auto bus = SysfsBus::Create(o);
    ASSERT_TRUE(bus.ok()) << bus.status().ToString();
    bus_ = std::move(*bus);
  }

  std::unique_ptr<SysfsBus> bus_;
};

TEST_P(GuestDriverSysfsBusBlockTest, BlocksOfAnyLengthAndOffset) {
  ASSERT_NO_FATAL_FAILURE(OpenBus());
  SysfsBus& b = *bus_;
  uint8_t seed = 1;
  for (uint64_t length : {1ull, 7ull, 8ull, 9ull, 63ull, 4096ull, 4097ull, 12345ull}) {
    for (uint64_t offset : {0ull, 1ull, 4095ull, 8ull}) {
      std::vector<uint8_t> data(length);
      for (auto& v : data) v = seed++;
      ASSERT_TRUE(b.WriteBlock(Bar::k1, offset, data.data(), length).ok());
      EXPECT_EQ(Peek(1, offset, length), data) << length << " at " << offset;
      // Guard bytes around the read buffer stay untouched.
      std::vector<uint8_t> back(length + 16, 0xcc);
      ASSERT_TRUE(b.ReadBlock(Bar::k1, offset, back.data() + 8, length).ok());
      EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 8));
      EXPECT_EQ(back[7], 0xcc);
      EXPECT_EQ(back[length + 8], 0xcc);
    }
  }
  // The last bytes of BAR3, exactly.
  std::vector<uint8_t> tail(100, 0x5a);
  ASSERT_TRUE(b.WriteBlock(Bar::k3, kBar3 - 100, tail.data(), 100).ok());
  EXPECT_EQ(Peek(3, kBar3 - 100, 100), tail);
  // Fills (memset_io) of any length and offset, nothing past their end.
  for (uint64_t length : {1ull, 9ull, 4096ull, 12345ull}) {
    for (uint64_t offset : {0ull, 3ull, 4095ull}) {
      ASSERT_TRUE(b.FillBlock(Bar::k3, offset, 0xee, length + 1).ok());
      ASSERT_TRUE(b.FillBlock(Bar::k3, offset, 0x3c, length).ok());
      EXPECT_EQ(Peek(3, offset, length), std::vector<uint8_t>(length, 0x3c));
      EXPECT_EQ(Peek(3, offset + length, 1), std::vector<uint8_t>(1, 0xee));
    }
  }
  EXPECT_EQ(b.FillBlock(Bar::k3, kBar3 - 4, 0, 8).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(b.FillBlock(Bar::k0, 0, 0, 8).code(), StatusCode::kInvalidArgument);
}

TEST_P(GuestDriverSysfsBusBlockTest, BadBlocksAreRefused) {
  ASSERT_NO_FATAL_FAILURE(OpenBus());
  SysfsBus& b = *bus_;
  uint8_t buf[16] = {};
  EXPECT_EQ(b.WriteBlock(Bar::k0, 0, buf, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.ReadBlock(Bar::k0, 0, buf, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.WriteBlock(Bar::k1, kBar1 - 8, buf, 16).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(b.ReadBlock(Bar::k3, kBar3, buf, 1).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(b.ReadBlock(Bar::k3, ~0ull, buf, 2).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(b.ReadBlock(Bar::k1, 0, nullptr, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(b.ReadBlock(Bar::k1, kBar1, buf, 0).ok());
}

INSTANTIATE_TEST_SUITE_P(Transfers, GuestDriverSysfsBusBlockTest,
                         ::testing::Values(SysfsBusOptions::BlockTransfer::kRepMovs,
                                           SysfsBusOptions::BlockTransfer::kWords),
                         [](const auto& info) {
                           return info.param == SysfsBusOptions::BlockTransfer::kRepMovs
                                      ? std::string("rep")
                                      : std::string("words");
                         });

// Page-aligned memory the test owns.
struct AlignedPages {
  explicit AlignedPages(uint64_t pages) : length(pages * kPage) {
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~AlignedPages() {
    if (data) ::munmap(data, length);
  }
  uint8_t* data;
  uint64_t length;
};

TEST_F(GuestDriverSysfsBusTest, DmaFramesComeFromThePageMap) {
  AlignedPages mem(3);
  ASSERT_NE(mem.data, nullptr);
  // A page map as the kernel writes it: the entry of virtual page n at byte 8n (a sparse file).
  const fs::path pagemap = root_ / "pagemap";
  const int fd = ::open(pagemap.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const uint64_t vpn = reinterpret_cast<uintptr_t>(mem.data) / kPage;
  const uint64_t entries[3] = {(1ull << 63) | 0x1234, (1ull << 63) | 0x9, (1ull << 63) | 0x1235};
  ASSERT_EQ(::pwrite(fd, entries, sizeof(entries), off_t(vpn * 8)), ssize_t(sizeof(entries)));
  // A page that is not present.
  const uint64_t absent = 0x77;
  ASSERT_EQ(::pwrite(fd, &absent, 8, off_t((vpn + 3) * 8)), 8);
  ::close(fd);

  SysfsBusOptions o = Options();
  o.pagemap_path = pagemap.string();
  auto bus = SysfsBus::Create(o);
  ASSERT_TRUE(bus.ok()) << bus.status().ToString();
  SysfsBus& b = **bus;
  {
    auto whole = b.MapDma(mem.data, 3 * kPage);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    EXPECT_EQ((*whole)->host(), mem.data);
    EXPECT_EQ((*whole)->length(), 3 * kPage);
    EXPECT_EQ((*whole)->PageBusAddress(0), 0x1234 * kPage);
    EXPECT_EQ((*whole)->PageBusAddress(kPage + 17), 0x9 * kPage);
    EXPECT_EQ((*whole)->PageBusAddress(3 * kPage - 1), 0x1235 * kPage);
    EXPECT_EQ(b.locked_pages(), 3u);
    {
      // Overlapping registrations share the lock; the pages stay locked until both are gone.
      auto middle = b.MapDma(mem.data + kPage, kPage);
      ASSERT_TRUE(middle.ok());
      EXPECT_EQ((*middle)->PageBusAddress(0), 0x9 * kPage);
      EXPECT_EQ(b.locked_pages(), 3u);
    }
    EXPECT_EQ(b.locked_pages(), 3u);
  }
  EXPECT_EQ(b.locked_pages(), 0u);

  // The 4th page's entry says "not present": refused, nothing stays locked.
  AlignedPages more(0);
  EXPECT_EQ(b.MapDma(mem.data + 2 * kPage, 2 * kPage).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.locked_pages(), 0u);
}

TEST_F(GuestDriverSysfsBusTest, DmaArgumentsAreChecked) {
  auto bus = SysfsBus::Create(Options());
  ASSERT_TRUE(bus.ok());
  AlignedPages mem(2);
  EXPECT_EQ((*bus)->MapDma(nullptr, kPage).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*bus)->MapDma(mem.data, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*bus)->MapDma(mem.data + 1, kPage).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*bus)->MapDma(mem.data, kPage + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*bus)->SetInterruptHandler([](bool) {}).code(), StatusCode::kUnimplemented);
  EXPECT_TRUE((*bus)->SetInterruptHandler(nullptr).ok());
}

// The real page map: as root the frames are real (non-zero, distinct); otherwise the kernel hides
// them and MapDma says how to fix that.
TEST_F(GuestDriverSysfsBusTest, RealPageMap) {
  auto bus = SysfsBus::Create(Options());
  ASSERT_TRUE(bus.ok());
  AlignedPages mem(4);
  auto mapping = (*bus)->MapDma(mem.data, 4 * kPage);
  if (::geteuid() != 0) {
    EXPECT_EQ(mapping.status().code(), StatusCode::kFailedPrecondition);
    return;
  }
  if (!mapping.ok() && mapping.status().code() != StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "mlock not possible here: " << mapping.status().ToString();
  }
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  std::set<uint64_t> frames;
  for (uint64_t i = 0; i < 4; ++i) {
    const uint64_t a = (*mapping)->PageBusAddress(i * kPage);
    EXPECT_NE(a, 0u);
    EXPECT_EQ(a % kPage, 0u);
    frames.insert(a);
  }
  EXPECT_EQ(frames.size(), 4u);
}

}  // namespace
}  // namespace gpuvm::guest
