#include "bench/harness/json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "base/json_string.h"
#include "base/testing/round_trip_doubles.h"

namespace gpuvm::bench {
namespace {

TEST(BenchHarnessJson, ParsesWhatTheSuiteReports) {
  const std::string text =
      R"({"bench":"madd","api":"driver","size":"test","problem":"64 x 64 int32 add","correct":true,)"
      R"("seconds":0.012345678,"phases":{"init":0.01,"htod":1e-4,"launch":2E-3,"dtoh":0,"close":0},)"
      R"("error":""})";
  Result<Json> j = ParseJson(text);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_TRUE(j->is_object());
  EXPECT_EQ(j->Find("bench")->string(), "madd");
  EXPECT_TRUE(j->Find("correct")->bool_value());
  EXPECT_DOUBLE_EQ(j->Find("seconds")->number(), 0.012345678);
  EXPECT_DOUBLE_EQ(j->Find("phases")->Find("launch")->number(), 2e-3);
  EXPECT_EQ(j->Find("nothing"), nullptr);
}

TEST(BenchHarnessJson, StringEscaping) {
  const char raw[] = "q\" b\\ n\n r\r t\t \x01\x1f\0 \xc3\xa9";  // NUL and UTF-8 included
  const std::string text(raw, sizeof raw - 1);
  std::string out = "x";
  AppendJsonString(out, text);
  EXPECT_EQ(out, "x\"q\\\" b\\\\ n\\n r\\r t\\t \\u0001\\u001f\\u0000 \xc3\xa9\"");
  // What the writer escapes, the parser reads back.
  Result<Json> j = ParseJson(out.substr(1));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->string(), text);
}

TEST(BenchHarnessJson, RoundTripsThroughSerialize) {
  Json o = Json::Object();
  o.Set("s", Json::String("a \"quoted\"\n\\ tab\t \x01"));
  o.Set("n", Json::Number(42));
  o.Set("f", Json::Number(0.25));
  o.Set("neg", Json::Number(-3.5e-9));
  o.Set("b", Json::Bool(false));
  o.Set("z", Json());
  Json a = Json::Array();
  a.Push(Json::Number(1));
  a.Push(Json::Object());
  o.Set("a", std::move(a));
  const std::string line = o.Serialize();
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one object per line";
  EXPECT_NE(line.find("\"n\":42,"), std::string::npos) << line;
  Result<Json> back = ParseJson(line);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Serialize(), line);
  EXPECT_EQ(back->Find("s")->string(), "a \"quoted\"\n\\ tab\t \x01");
  EXPECT_TRUE(back->Find("z")->is_null());
}

TEST(BenchHarnessJson, KeepsKeyOrderAndReplacesInPlace) {
  Json o = Json::Object();
  o.Set("b", Json::Number(1));
  o.Set("a", Json::Number(2));
  o.Set("b", Json::Number(3));
  EXPECT_EQ(o.Serialize(), R"({"b":3,"a":2})");
}

TEST(BenchHarnessJson, NonFiniteNumbersBecomeNull) {
  Json a = Json::Array();
  a.Push(Json::Number(1.0 / 0.0));
  EXPECT_EQ(a.Serialize(), "[null]");
}

// Written, read back and written again, a number must not change (under "%.9g", the writer's old
// format, 4503599627370495.5 became an integer and the bench_result fuzz target's round-trip check
// aborted on it).
TEST(BenchHarnessJson, NumbersRoundTripExactly) {
  for (double v : testing::kRoundTripDoubles) {
    Json a = Json::Array();
    a.Push(Json::Number(v));
    const std::string line = a.Serialize();
    Result<Json> back = ParseJson(line);
    ASSERT_TRUE(back.ok()) << line << ": " << back.status().ToString();
    const double got = back->items().at(0).number();
    EXPECT_EQ(std::memcmp(&got, &v, sizeof v), 0) << line;  // the same double, bit for bit
    EXPECT_EQ(back->Serialize(), line);
  }
  // Integers keep their digits; the shortest form elsewhere.
  EXPECT_EQ(Json::Number(1e15).Serialize(), "1000000000000000");
  EXPECT_EQ(Json::Number(0.1).Serialize(), "0.1");
  EXPECT_EQ(Json::Number(1e300).Serialize(), "1e+300");
  // The fuzz target's input, as text.
  Result<Json> parsed = ParseJson("4503599627370495.5");
  ASSERT_TRUE(parsed.ok());
  const std::string line = parsed->Serialize();
  EXPECT_EQ(line, "4503599627370495.5");
  EXPECT_EQ(ParseJson(line)->Serialize(), line);
}

TEST(BenchHarnessJson, DecodesUnicodeEscapes) {
  Result<Json> j = ParseJson(R"("\u00e9\u20ac\ud83d\ude00\/")");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->string(), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/");
}

TEST(BenchHarnessJson, RefusesMalformedInputWithThePlace) {
  const char* bad[] = {
      "",         "{",         "{\"a\"}",     "{\"a\":}",    "[1,]",       "[1 2]",
      "01",       "1.",        "-",           "1e",          "tru",        "\"open",
      "\"\\x\"",  "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "{\"a\":1}x", "nan",
      "\"a\nb\"", "{1:2}",     "1e999",
  };
  for (const char* text : bad) {
    Result<Json> j = ParseJson(text);
    EXPECT_FALSE(j.ok()) << "accepted: " << text;
    if (!j.ok()) {
      EXPECT_NE(j.status().message().find("JSON: expected"), std::string::npos)
          << j.status().message();
    }
  }
}

TEST(BenchHarnessJson, BoundsDepthAndSize) {
  std::string deep(kMaxJsonDepth + 5, '[');
  deep += std::string(kMaxJsonDepth + 5, ']');
  EXPECT_FALSE(ParseJson(deep).ok());
  std::string shallow(kMaxJsonDepth, '[');
  shallow += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(shallow).ok());
  const std::string huge = "\"" + std::string(kMaxJsonBytes, 'a') + "\"";
  Result<Json> j = ParseJson(huge);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("limit"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::bench
