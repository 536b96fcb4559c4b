#include "base/os.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace gpuvm::os {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The "AnonHugePages:"/"ShmemPmdMapped:"-style field of the mapping holding `address`, in KiB, from
// /proc/self/smaps; -1 when the mapping or the field is not there.
long SmapsField(const void* address, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > 8) {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

std::string Setting(const char* path) {
  std::ifstream in(path);
  std::string all;
  std::getline(in, all);
  return all;
}

TEST(NameThisThreadTest, NamesTheCallingThreadAndCutsLongNamesTo15Bytes) {
  std::string short_name, long_name;
  std::thread([&] {
    char got[32] = {};
    os::NameThisThread("gpu-pfifo");
    ASSERT_EQ(pthread_getname_np(pthread_self(), got, sizeof got), 0);
    short_name = got;
    os::NameThisThread("a-name-longer-than-fifteen-bytes");
    ASSERT_EQ(pthread_getname_np(pthread_self(), got, sizeof got), 0);
    long_name = got;
  }).join();
  EXPECT_EQ(short_name, "gpu-pfifo");
  EXPECT_EQ(long_name, "a-name-longer-t");
}

TEST(HugePagesTest, ReservationsHaveTheAskedCongruenceAndAreReservedOnly) {
  for (const uint64_t phase : {uint64_t{0}, uint64_t{4096}, 3 * kMiB + 8192, 2 * kMiB - 4096}) {
    Result<void*> r = ReserveHugeAligned(5 * kMiB + 4096, phase);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*r) % kHugePageBytes, phase % kHugePageBytes);
    // Address space only: a mapping with no access, and the slack around it given back (the
    // reservation is exactly one mapping of the asked length).
    EXPECT_EQ(SmapsField(*r, "Rss"), 0);
    EXPECT_EQ(SmapsField(*r, "Size"), long((5 * kMiB + 4096) / 1024));
    EXPECT_EQ(::munmap(*r, 5 * kMiB + 4096), 0);
  }
  EXPECT_FALSE(ReserveHugeAligned(0, 0).ok());
}

TEST(HugePagesTest, LargeSharedMappingsAreCongruentToTheirOffsetAndAdvised) {
  Result<UniqueFd> fd = CreateSealedMemfd("huge-pages-test", 16 * kMiB);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  for (const uint64_t offset : {uint64_t{0}, 4 * kMiB + 4096}) {
    Result<SharedMapping> m = SharedMapping::Map(fd->get(), offset, 8 * kMiB, true);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % kHugePageBytes, offset % kHugePageBytes);
    // MADV_HUGEPAGE shows as "hg" in the mapping's VmFlags.
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false, advised = false;
    while (std::getline(smaps, line)) {
      unsigned long begin = 0, end = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > 8) {
        inside = begin == reinterpret_cast<uintptr_t>(m->data());
      } else if (inside && line.rfind("VmFlags:", 0) == 0) {
        advised = line.find(" hg") != std::string::npos;
      }
    }
    EXPECT_TRUE(advised) << "offset " << offset;
    // The bytes are the file's.
    m->data()[0] = 0x5a;
    Result<SharedMapping> again = SharedMapping::Map(fd->get(), offset, 8 * kMiB, false);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->data()[0], 0x5a);
  }
  // A small mapping stays where the kernel put it, unadvised (rings, pages): nothing to gain.
  Result<SharedMapping> small = SharedMapping::Map(fd->get(), 0, 64 * 1024, true);
  ASSERT_TRUE(small.ok());
}

TEST(HugePagesTest, WhereTheHostAllowsIt2MiBOfSharedMemoryIsOneEntry) {
  const std::string shmem = Setting("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  if (shmem.find("[advise]") == std::string::npos && shmem.find("[always]") == std::string::npos &&
      shmem.find("[within_size]") == std::string::npos &&
      shmem.find("[force]") == std::string::npos) {
    GTEST_SKIP() << "this host gives memfds no huge pages (shmem_enabled: " << shmem << ")";
  }
  Result<UniqueFd> fd = CreateSealedMemfd("huge-pages-test", 8 * kMiB);
  ASSERT_TRUE(fd.ok());
  Result<SharedMapping> m = SharedMapping::Map(fd->get(), 0, 8 * kMiB, true);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(PopulatePages(m->data(), 8 * kMiB, PopulateFor::kWrite));
  // Huge pages are best effort (fragmented memory): at least one block made it.
  EXPECT_GE(SmapsField(m->data(), "ShmemPmdMapped"), 2048) << "no 2 MiB block mapped whole";
}

}  // namespace
}  // namespace gpuvm::os
