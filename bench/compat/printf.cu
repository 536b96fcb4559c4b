// compat-printf: printf inside kernels, as CUDA programs use it to trace. Every thread of a grid
// prints a line mixing the common conversions (%d %u %lld %f %c %s, widths, flags, %%); a second
// kernel prints under divergence (a loop whose trip count is the lane) and from one thread with a
// string in device memory. The program catches its own stdout around cudaDeviceSynchronize (where
// CUDA prints the buffered output) and checks that every expected line came exactly once and each
// matches what the host's snprintf makes of the same format and values, and that printf returned
// its argument count. Then, in a fresh context, it shrinks the FIFO with cudaDeviceSetLimit
// (cudaLimitPrintfFifoSize) and checks that a grid printing more than fits loses whole lines only.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

#define GREET_FORMAT "printf-compat t=%d b=%d l=%u v=%lld f=%.3f c=%c s=%s|%5d|%-4x|%%\n"
#define LOOP_FORMAT "printf-compat loop lane %d step %d\n"
#define DETAIL_FORMAT "printf-compat detail [%s] %e %g %lu %-6s|\n"

__device__ const char* Parity(int v) { return (v & 1) ? "odd" : "even"; }

__global__ void greet(int* rets, long long scale) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  rets[tid] = printf(GREET_FORMAT, tid, blockIdx.x, threadIdx.x, tid * scale, tid * 0.25f,
                     'a' + tid % 26, Parity(tid), tid % 1000, tid);
}

__global__ void detail(const char* word, int* rets) {
  const int lane = threadIdx.x % 32;
  if (threadIdx.x < 32) {
    for (int i = 0; i < lane % 5; ++i) printf(LOOP_FORMAT, lane, i);
  }
  if (threadIdx.x == 0) {
    rets[0] = printf(DETAIL_FORMAT, word, 12345.678, 0.0001, 18446744073709551615ul, "ok");
    rets[1] = printf("printf-compat no arguments\n");
  }
}

// Sends fd 1 to a temporary file from construction to Take() (or destruction), so the program can
// read what the CUDA runtime printed.
class StdoutCapture {
 public:
  StdoutCapture() {
    std::fflush(stdout);
    file_ = std::tmpfile();
    saved_ = dup(1);
    if (file_ != nullptr && saved_ >= 0) ok_ = dup2(fileno(file_), 1) >= 0;
  }
  ~StdoutCapture() { Restore(); }
  bool ok() const { return ok_; }
  // Restores stdout and returns what was written meanwhile.
  std::string Take() {
    Restore();
    std::string text;
    if (file_ == nullptr) return text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    return text;
  }

 private:
  void Restore() {
    std::fflush(stdout);
    if (saved_ >= 0) {
      dup2(saved_, 1);
      close(saved_);
      saved_ = -1;
    }
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
  bool ok_ = false;
};

template <typename... Args>
std::string Format(const char* format, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

// The lines of `text` (each with its '\n'), counted.
std::map<std::string, int> Lines(const std::string& text) {
  std::map<std::string, int> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    end = end == std::string::npos ? text.size() : end + 1;
    ++lines[text.substr(at, end - at)];
    at = end;
  }
  return lines;
}

std::string GreetLine(int tid, int threads) {
  return Format(GREET_FORMAT, tid, tid / threads, unsigned(tid % threads), tid * 1000003ll,
                double(tid * 0.25f), 'a' + tid % 26, (tid & 1) ? "odd" : "even", tid % 1000, tid);
}

int Blocks(Size size) { return size == Size::kTest ? 4 : 16; }
int Threads(Size size) { return size == Size::kTest ? 64 : 256; }

void Run(Size size, Report& report) {
  const int blocks = Blocks(size), threads = Threads(size), n = blocks * threads;
  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  size_t fifo = 0;
  CHECK_CUDA(report, cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize));
  CHECK_VALUE(report, fifo >= (1u << 20), "default printf FIFO is " + std::to_string(fifo));
  int* d_rets;
  char* d_word;
  const char word[] = "device-string";
  CHECK_CUDA(report, cudaMalloc(&d_rets, n * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_word, sizeof word));
  report.Enter(Phase::kHtoD);
  CHECK_CUDA(report, cudaMemcpy(d_word, word, sizeof word, cudaMemcpyHostToDevice));

  report.Enter(Phase::kLaunch);
  std::string printed;
  {
    StdoutCapture capture;
    CHECK_VALUE(report, capture.ok(), "cannot capture stdout");
    greet<<<blocks, threads>>>(d_rets, 1000003ll);
    CHECK_LAUNCH(report);
    detail<<<1, 64>>>(d_word, d_rets + n - 2);
    CHECK_LAUNCH(report);
    CHECK_CUDA(report, cudaDeviceSynchronize());
    printed = capture.Take();
  }
  report.Enter(Phase::kDtoH);
  std::vector<int> rets(n);
  CHECK_CUDA(report, cudaMemcpy(rets.data(), d_rets, n * sizeof(int), cudaMemcpyDeviceToHost));

  // A fresh context takes a smaller FIFO; a grid printing more than fits loses whole lines.
  report.Enter(Phase::kLaunch);
  CHECK_CUDA(report, cudaDeviceReset());
  const size_t small = 16 << 10;
  CHECK_CUDA(report, cudaDeviceSetLimit(cudaLimitPrintfFifoSize, small));
  CHECK_CUDA(report, cudaDeviceGetLimit(&fifo, cudaLimitPrintfFifoSize));
  CHECK_VALUE(report, fifo == small,
              "printf FIFO after cudaDeviceSetLimit is " + std::to_string(fifo) + ", want " +
                  std::to_string(small));
  CHECK_CUDA(report, cudaMalloc(&d_rets, n * sizeof(int)));
  std::string overflow;
  {
    StdoutCapture capture;
    CHECK_VALUE(report, capture.ok(), "cannot capture stdout");
    greet<<<4, 256>>>(d_rets, 1000003ll);  // 1024 lines of ~160 bytes each: more than 16 KiB
    CHECK_LAUNCH(report);
    CHECK_CUDA(report, cudaDeviceSynchronize());
    overflow = capture.Take();
  }
  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaFree(d_rets));
  CHECK_CUDA(report, cudaDeviceReset());
  report.End();

  // The first grid: every line once, as the host formats it; printf's result is its argument count.
  std::map<std::string, int> want;
  for (int tid = 0; tid < n; ++tid) ++want[GreetLine(tid, threads)];
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < lane % 5; ++i) ++want[Format(LOOP_FORMAT, lane, i)];
  }
  ++want[Format(DETAIL_FORMAT, word, 12345.678, 0.0001, 18446744073709551615ul, "ok")];
  ++want["printf-compat no arguments\n"];
  const std::map<std::string, int> got = Lines(printed);
  for (const auto& [line, count] : want) {
    auto it = got.find(line);
    CHECK_VALUE(report, it != got.end() && it->second == count,
                "line printed " + std::to_string(it == got.end() ? 0 : it->second) +
                    " times, want " + std::to_string(count) + ": " + line);
  }
  for (const auto& [line, count] : got) {
    CHECK_VALUE(report, want.count(line) == 1, "unexpected output: " + line);
  }
  for (int tid = 0; tid < n - 2; ++tid) {
    CHECK_VALUE(report, rets[tid] == 9, Mismatch("printf returned", tid, rets[tid], 9));
  }
  CHECK_VALUE(report, rets[n - 2] == 5, Mismatch("detail printf returned", 0, rets[n - 2], 5));
  CHECK_VALUE(report, rets[n - 1] == 0, Mismatch("no-argument printf returned", 0, rets[n - 1], 0));

  // The small FIFO: some lines, not all, each one whole and printed once.
  const std::map<std::string, int> partial = Lines(overflow);
  int lines = 0;
  std::map<std::string, int> all;
  for (int tid = 0; tid < 1024; ++tid) ++all[GreetLine(tid, 256)];
  for (const auto& [line, count] : partial) {
    CHECK_VALUE(report, all.count(line) == 1 && count == 1, "bad line from a full FIFO: " + line);
    lines += count;
  }
  CHECK_VALUE(report, lines > 0 && lines < 1024,
              std::to_string(lines) + " of 1024 lines printed through a 16 KiB FIFO");
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "printf",
      [](Size size) {
        return std::to_string(Blocks(size)) + " blocks x " + std::to_string(Threads(size)) +
               " threads printing";
      },
      Run);
}
