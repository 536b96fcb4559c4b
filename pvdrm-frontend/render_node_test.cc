// RenderNodeDevice's checks that need no pvdrm render node (the node itself is exercised in the Xen
// test bed's pvdrm guest: gpuvm-pvdrm-nouveau-check and CUDA programs with GPUVM_BUS=drm).
#include "pvdrm-frontend/render_node.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace gpuvm::pvdrm {
namespace {

std::string TempDir() {
  char pattern[] = "/tmp/render_node_test.XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  return dir != nullptr ? dir : "";
}

TEST(RenderNode, FindsNothingWhereThereIsNoNode) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  Result<std::string> found = FindRenderNode(kPvdrmDriverName, dir);
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound) << found.status().ToString();
  ::rmdir(dir.c_str());
}

TEST(RenderNode, IgnoresFilesThatAreNoDrmDevice) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  const std::string fake = dir + "/renderD128";
  const int fd = ::open(fake.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(FindRenderNode(kPvdrmDriverName, dir).status().code(), StatusCode::kNotFound);
  // Open refuses it too: DRM_IOCTL_VERSION fails on a plain file, so its driver is not pvdrm.
  Result<std::unique_ptr<RenderNodeDevice>> opened = RenderNodeDevice::Open(fake);
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  ::unlink(fake.c_str());
  ::rmdir(dir.c_str());
}

TEST(RenderNode, OpenOfAMissingPathSaysSo) {
  Result<std::unique_ptr<RenderNodeDevice>> opened =
      RenderNodeDevice::Open("/nonexistent/dev/dri/renderD128");
  EXPECT_FALSE(opened.ok());
  EXPECT_NE(opened.status().ToString().find("/nonexistent/dev/dri/renderD128"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::pvdrm
