// FormatPrintfRecords: records as the vprintf instruction writes them become the text C's printf
// would print, and hostile records (any bytes a kernel could leave in its FIFO) are refused cleanly
// without reading outside the area, printing through the device's format, or crashing.
#include "runtime/core/printf_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/isa/device_printf.h"

namespace gpuvm::runtime {
namespace {

// Builds records the way the instruction does.
class RecordWriter {
 public:
  RecordWriter& Begin(const std::string& format) {
    start_ = bytes_.size();
    slots_ = 0;
    bytes_.resize(bytes_.size() + 16, 0);
    Append(format.data(), format.size());
    Pad();
    format_bytes_ = static_cast<uint32_t>(format.size());
    return *this;
  }
  RecordWriter& Int(int64_t v) { return Slot(static_cast<uint64_t>(v)); }
  RecordWriter& Double(double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    return Slot(v);
  }
  RecordWriter& String(const std::string& s) {
    Slot(s.size());
    Append(s.data(), s.size());
    Pad();
    return *this;
  }
  RecordWriter& NullString() { return Slot(isa::kPrintfNullString); }
  RecordWriter& End() {
    const uint32_t total = static_cast<uint32_t>(bytes_.size() - start_);
    std::memcpy(bytes_.data() + start_, &total, 4);
    std::memcpy(bytes_.data() + start_ + 4, &format_bytes_, 4);
    std::memcpy(bytes_.data() + start_ + 8, &slots_, 4);
    return *this;
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  RecordWriter& Slot(uint64_t v) {
    ++slots_;
    Append(&v, 8);
    return *this;
  }
  void Append(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void Pad() { bytes_.resize((bytes_.size() + 7) / 8 * 8, 0); }

  std::vector<uint8_t> bytes_;
  size_t start_ = 0;
  uint32_t slots_ = 0;
  uint32_t format_bytes_ = 0;
};

TEST(PrintfFormat, FormatsLikePrintf) {
  RecordWriter w;
  w.Begin("x=%d %5.2f %s %c|%-4d|%05u|%x %#o %lld %llu %e %g %%\n")
      .Int(-42)
      .Double(3.14159)
      .String("hello")
      .Int('Z')
      .Int(7)
      .Int(42)
      .Int(255)
      .Int(8)
      .Int(-9000000000LL)
      .Int(-1)
      .Double(1e-5)
      .Double(0.5)
      .End();
  w.Begin("plain\n").End();
  w.Begin("[%*d] [%-*d] [%.*f] [%s] [%p] [%hhd] [%hx]\n")
      .Int(5)
      .Int(1)
      .Int(-5)
      .Int(2)
      .Int(3)
      .Double(2.0)
      .NullString()
      .Int(0x1234)
      .Int(300)
      .Int(0x12345)
      .End();
  PrintfText out = FormatPrintfRecords(w.bytes());
  EXPECT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.records, 3u);
  EXPECT_EQ(out.text,
            "x=-42  3.14 hello Z|7   |00042|ff 010 -9000000000 18446744073709551615 1.000000e-05 "
            "0.5 %\n"
            "plain\n"
            "[    1] [2    ] [2.000] [(null)] [0x1234] [44] [2345]\n");
}

TEST(PrintfFormat, InvalidSpecsPrintAsWritten) {
  RecordWriter w;
  w.Begin("100%% sure %n %y %ls %").End();
  PrintfText out = FormatPrintfRecords(w.bytes());
  EXPECT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.text, "100% sure %n %y %ls %");
}

TEST(PrintfFormat, UndefinedFlagsAndHugeValuesAreTamed) {
  RecordWriter w;
  // '#' with %d and '0' with %s are undefined in C: dropped. Star widths are clamped.
  w.Begin("%#d|%05s|%*d|%.*s|%.9999f")
      .Int(5)
      .String("ab")
      .Int(1 << 30)
      .Int(1)
      .Int(-1)
      .String("xyz")
      .End();
  PrintfText out = FormatPrintfRecords(w.bytes());
  EXPECT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.text.substr(0, 9), "5|   ab| ");
  EXPECT_EQ(out.text.find("|xyz|"), static_cast<size_t>(8 + isa::kPrintfMaxWidth))
      << out.text.size();
  EXPECT_LT(out.text.size(), 20000u);  // %.9999f is not a conversion: printed as written
  EXPECT_NE(out.text.find("%.9999f"), std::string::npos);
}

TEST(PrintfFormat, MalformedRecordsStopCleanly) {
  RecordWriter good;
  good.Begin("ok %d\n").Int(1).End();
  const std::vector<uint8_t> first = good.bytes();
  auto expect_refused = [&](std::vector<uint8_t> bad, const char* says) {
    std::vector<uint8_t> area = first;
    area.insert(area.end(), bad.begin(), bad.end());
    PrintfText out = FormatPrintfRecords(area);
    EXPECT_EQ(out.text, "ok 1\n") << says;
    EXPECT_EQ(out.records, 1u) << says;
    EXPECT_NE(out.error.find(says), std::string::npos) << out.error;
    EXPECT_EQ(out.bad_offset, first.size());
  };
  auto record = [](const std::string& format, auto&&... build) {
    RecordWriter w;
    w.Begin(format);
    (build(w), ...);
    w.End();
    return w.bytes();
  };
  auto set32 = [](std::vector<uint8_t> r, size_t at, uint32_t v) {
    std::memcpy(r.data() + at, &v, 4);
    return r;
  };
  std::vector<uint8_t> r = record("%d", [](RecordWriter& w) { w.Int(1); });
  expect_refused(std::vector<uint8_t>(r.begin(), r.begin() + 8), "truncated");
  expect_refused(set32(r, 0, 0), "size");
  expect_refused(set32(r, 0, 12), "size");
  expect_refused(set32(r, 0, 33), "size");
  expect_refused(set32(r, 0, 1u << 31), "size");
  expect_refused(set32(r, 4, 1000), "format length");
  expect_refused(set32(r, 4, ~0u), "format length");
  expect_refused(set32(r, 8, 1000), "too many");
  expect_refused(set32(r, 8, 0), "do not match");
  expect_refused(set32(r, 8, 2), "do not match");
  expect_refused(set32(r, 12, 1), "reserved");
  // A format asking for more than the record carries, or less.
  expect_refused(record("%d %d", [](RecordWriter& w) { w.Int(1); }), "do not match");
  expect_refused(record("%d", [](RecordWriter& w) { w.Int(1).Int(2); }), "do not match");
  // A string slot with a length past the record, past the limit, or a bad high word.
  expect_refused(record("%s", [](RecordWriter& w) { w.Int(100); }), "do not match");
  expect_refused(record("%s", [](RecordWriter& w) { w.Int(int64_t{1} << 32); }), "do not match");
  std::string huge(isa::kPrintfMaxStringBytes + 8, 'q');
  expect_refused(record("%s", [&](RecordWriter& w) { w.String(huge); }), "do not match");
  // A NUL inside a format or a string ends nothing and prints nothing odd.
  RecordWriter n;
  n.Begin(std::string("a\0b%s", 5)).String(std::string("c\0d", 3)).End();
  EXPECT_EQ(FormatPrintfRecords(n.bytes()).text, "abc");
}

TEST(PrintfFormat, RandomBytesNeverCrash) {
  std::mt19937_64 rng(12345);
  RecordWriter seed;
  seed.Begin("v=%d s=%s f=%f %*.*x\n").Int(3).String("str").Double(1.5).Int(4).Int(2).Int(9).End();
  const std::vector<uint8_t> base = seed.bytes();
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> area = base;
    const int flips = 1 + static_cast<int>(rng() % 6);
    for (int f = 0; f < flips; ++f) area[rng() % area.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) area.resize(rng() % (area.size() + 1));
    PrintfText out = FormatPrintfRecords(area);
    EXPECT_LT(out.text.size(), 64u * 1024);
  }
}

}  // namespace
}  // namespace gpuvm::runtime
