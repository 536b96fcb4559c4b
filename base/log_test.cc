#include "base/log.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm {
namespace {

// 2026-11-28T01:18:05.123Z
const std::chrono::system_clock::time_point kWhen =
    std::chrono::system_clock::time_point(std::chrono::seconds(1795828685)) +
    std::chrono::milliseconds(123);

TEST(LogTest, ValuesAreBareOnlyWhenNothingNeedsQuoting) {
  EXPECT_EQ(LogValue("web"), "web");
  EXPECT_EQ(LogValue("fv-optimized"), "fv-optimized");
  EXPECT_EQ(LogValue(""), "\"\"");
  EXPECT_EQ(LogValue("session ended"), "\"session ended\"");
  EXPECT_EQ(LogValue("a=b"), "\"a=b\"");
  EXPECT_EQ(LogValue("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
  // A hostile peer's text cannot break the line or write escape sequences.
  EXPECT_EQ(LogValue("x\ny\x1b[2J"), "\"x?y?[2J\"");
  EXPECT_EQ(LogValue("caf\xc3\xa9"), "\"caf??\"");
}

TEST(LogTest, AVmsEventCarriesItsIdAndName) {
  EXPECT_EQ(VmLogFields(3, "web"), "vm=3 name=web");
  EXPECT_EQ(LogEvent(LogLevel::kWarn, VmLogFields(3, "web") + LogField("mode", "fv-lazy"),
                     "refused BAR0 write"),
            "level=warn vm=3 name=web mode=fv-lazy msg=\"refused BAR0 write\"");
  EXPECT_EQ(LogEvent("serving"), "level=info msg=serving");
}

TEST(LogTest, TheLineStartsWithTimeLevelAndComponent) {
  EXPECT_EQ(FormatLogLine(kWhen, "gpuvm-aggregator",
                          LogEvent(LogLevel::kError, VmLogFields(7, "db"), "GPU reset failed")),
            "ts=2026-11-28T01:18:05.123Z level=error component=gpuvm-aggregator vm=7 name=db "
            "msg=\"GPU reset failed\"");
  // Plain text (a sink handed something that is not a LogEvent): an info line's message.
  EXPECT_EQ(FormatLogLine(kWhen, "gpuvm-dm", "level headed text"),
            "ts=2026-11-28T01:18:05.123Z level=info component=gpuvm-dm msg=\"level headed text\"");
  EXPECT_EQ(FormatLogLine(kWhen, "gpuvm-dm", ""),
            "ts=2026-11-28T01:18:05.123Z level=info component=gpuvm-dm msg=\"\"");
  EXPECT_EQ(FormatLogLine(kWhen, "c", "level=warn"),
            "ts=2026-11-28T01:18:05.123Z level=warn component=c");
}

TEST(LogTest, WriteLogLineWritesOneTerminatedLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  WriteLogLine(f, "gpuvm-aggregator", LogEvent(LogLevel::kInfo, VmLogFields(1, "a"), "hello"));
  std::rewind(f);
  char buffer[256] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, f);
  std::fclose(f);
  const std::string line(buffer, n);
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_NE(line.find(" level=info component=gpuvm-aggregator vm=1 name=a msg=hello\n"),
            std::string::npos)
      << line;
  WriteLogLine(nullptr, "x", "ignored");  // no stream: nothing, no crash
}

}  // namespace
}  // namespace gpuvm
