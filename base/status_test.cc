#include "base/status.h"

#include <cerrno>
#include <memory>

#include <gtest/gtest.h>

namespace gpuvm {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::OutOfRange("address 0x1000 is past VRAM");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.ToString(), "OutOfRange: address 0x1000 is past VRAM");
  Status copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(s.WithContext("copy engine").message(), "copy engine: address 0x1000 is past VRAM");
}

TEST(StatusTest, FromErrnoMapsCommonErrors) {
  EXPECT_EQ(Status::FromErrno(ENOENT, "open").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::FromErrno(EPIPE, "write").code(), StatusCode::kUnavailable);
  EXPECT_NE(Status::FromErrno(ENOENT, "open /x").message().find("open /x: "), std::string::npos);
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  GPUVM_ASSIGN_OR_RETURN(int h, Half(x));
  GPUVM_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(ResultTest, ValueOrError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResultTest, HoldsMoveOnlyTypes) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

Status FailIfNegative(int x) {
  if (x < 0) return Status::InvalidArgument("negative");
  return Status::Ok();
}

Status Both(int a, int b) {
  GPUVM_RETURN_IF_ERROR(FailIfNegative(a));
  GPUVM_RETURN_IF_ERROR(FailIfNegative(b));
  return Status::Ok();
}

TEST(StatusTest, ReturnIfError) {
  EXPECT_TRUE(Both(1, 2).ok());
  EXPECT_EQ(Both(1, -2).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuvm
