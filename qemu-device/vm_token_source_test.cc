#include "qemu-device/vm_token_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace gpuvm::dm {
namespace {

class VmTokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "gpuvm-token-source-" + std::to_string(::getpid());
    ::mkdir(dir_.c_str(), 0700);
    for (size_t i = 0; i < token_.size(); ++i) token_[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  void TearDown() override {
    for (const char* f : {"/t", "/link"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }
  std::string Write(const std::string& text, mode_t mode) {
    const std::string path = dir_ + "/t";
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
  ipc::VmToken token_;
};

TEST_F(VmTokenSourceTest, APipeCarriesTheToken) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const std::string text = ipc::FormatVmToken(token_) + "\n";
  ASSERT_EQ(::write(p[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(p[1]);
  Result<ipc::VmToken> read = ReadVmTokenFromFd(p[0]);
  ::close(p[0]);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, token_);
}

TEST_F(VmTokenSourceTest, AnOwnerOnlyFileCarriesTheToken) {
  Result<ipc::VmToken> read = ReadVmTokenFromFile(Write(ipc::FormatVmToken(token_), 0600));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, token_);
  EXPECT_TRUE(ReadVmTokenFromFile(Write(ipc::FormatVmToken(token_), 0400)).ok());
}

TEST_F(VmTokenSourceTest, FilesOthersCanReadOrSwapAreRefused) {
  for (mode_t mode : {0640, 0604, 0666}) {
    Result<ipc::VmToken> read = ReadVmTokenFromFile(Write(ipc::FormatVmToken(token_), mode));
    ASSERT_FALSE(read.ok()) << std::oct << mode;
    EXPECT_EQ(read.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(read.status().message().find("make it 0600"), std::string::npos)
        << read.status().message();
  }
  const std::string target = Write(ipc::FormatVmToken(token_), 0600);
  ASSERT_EQ(::symlink(target.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(ReadVmTokenFromFile(dir_ + "/link").ok()) << "a symlink is refused";
  EXPECT_EQ(ReadVmTokenFromFile(dir_).status().code(), StatusCode::kPermissionDenied)
      << "a directory";
  EXPECT_FALSE(ReadVmTokenFromFile(dir_ + "/missing").ok());
}

TEST_F(VmTokenSourceTest, GarbageIsNoToken) {
  for (const std::string& bad :
       {std::string(), std::string("abc"), std::string(64, 'z'), std::string(200, '0')}) {
    EXPECT_EQ(ReadVmTokenFromFile(Write(bad, 0600)).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace gpuvm::dm
