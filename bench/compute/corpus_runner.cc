#include "bench/compute/corpus_runner.h"

#include <chrono>
#include <cstring>
#include <ctime>

#include "base/align.h"
#include "gpu/isa/encoding.h"
#include "gpu/sim/compute/test_support.h"
#include "ptx/translator/translator.h"

namespace gpuvm::compute_bench {
namespace {

using sim::compute::FakeChannelMemory;

// The address-space layout of a run (our choice): code, constants and globals low, buffers from 256
// MiB up, each buffer on its own pages followed by an unmapped guard page.
constexpr uint64_t kCodeBase = 0x0010'0000;
constexpr uint64_t kConstBase = 0x0100'0000;  // bank 1 image, then bank 2 (global addresses)
constexpr uint64_t kParamBase = 0x0200'0000;  // bank 0, one page per launch
constexpr uint64_t kGlobalsBase = 0x0400'0000;
constexpr uint64_t kBufferBase = 0x1000'0000;
constexpr uint32_t kSharedWindow = 0xfe00'0000;
constexpr uint32_t kLocalWindow = 0xff00'0000;
constexpr uint64_t kPage = sim::ChannelMemory::kPageSize;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Layout {
  std::vector<uint64_t> buffer_va;
  std::vector<uint64_t> kernel_offset;  // per module kernel: offset from kCodeBase
  uint64_t const_image_va = 0, globals_table_va = 0;
};

Result<Layout> Place(const kernels::Case& c, const isa::Module& m, FakeChannelMemory* mem) {
  Layout l;
  uint64_t code = 0;
  for (const isa::ModuleKernel& k : m.kernels) {
    code = AlignUp(code, 256);
    l.kernel_offset.push_back(code);
    mem->Map(kCodeBase + code, k.image.size());
    mem->Write(kCodeBase + code, k.image.data(), k.image.size());
    code += k.image.size();
  }
  l.const_image_va = kConstBase;
  if (!m.const_image.empty()) {
    mem->Map(kConstBase, m.const_image.size());
    mem->Write(kConstBase, m.const_image.data(), m.const_image.size());
  }
  l.globals_table_va = kConstBase + AlignUp(m.const_image.size() + 1, kPage);
  std::vector<uint64_t> global_va;
  uint64_t g = kGlobalsBase;
  for (const isa::ModuleGlobal& v : m.globals) {
    g = AlignUp(g, std::max<uint64_t>(v.align, 256));
    global_va.push_back(g);
    mem->Map(g, std::max<uint64_t>(v.size, 1));
    if (!v.init.empty()) mem->Write(g, v.init.data(), v.init.size());
    g += v.size;
  }
  for (size_t i = 0; i < m.globals.size(); ++i) {
    for (const isa::ModuleRelocation& r : m.globals[i].relocations) {
      uint64_t value = global_va[r.target] + static_cast<uint64_t>(r.addend);
      mem->Write(global_va[i] + r.offset, &value, r.size);
    }
  }
  if (!global_va.empty()) {
    mem->Map(l.globals_table_va, global_va.size() * 8);
    mem->Write(l.globals_table_va, global_va.data(), global_va.size() * 8);
  }
  uint64_t b = kBufferBase;
  for (const kernels::Buffer& buf : c.buffers) {
    l.buffer_va.push_back(b);
    const uint64_t size = std::max<uint64_t>(buf.initial.size(), 1);
    mem->Map(b, size);
    b = AlignUp(b + size, kPage) + kPage;  // guard page
  }
  return l;
}

void Fill(const kernels::Case& c, const Layout& l, FakeChannelMemory* mem) {
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const std::vector<uint8_t>& init = c.buffers[i].initial;
    if (!init.empty()) mem->Write(l.buffer_va[i], init.data(), init.size());
  }
}

Result<std::vector<uint8_t>> Params(const kernels::Launch& launch, const isa::ModuleKernel& k,
                                    const Layout& l) {
  if (launch.args.size() != k.params.size()) {
    return Status::InvalidArgument(
        "kernel '" + k.name + "' takes " + std::to_string(k.params.size()) +
        " parameters, the launch passes " + std::to_string(launch.args.size()));
  }
  uint32_t size = 0;
  for (const isa::ModuleParam& p : k.params) size = std::max(size, p.offset + p.size);
  std::vector<uint8_t> bytes(size, 0);
  for (size_t i = 0; i < launch.args.size(); ++i) {
    const kernels::Arg& a = launch.args[i];
    const isa::ModuleParam& p = k.params[i];
    if (a.Size() != p.size) {
      return Status::InvalidArgument("kernel '" + k.name + "' parameter " + std::to_string(i) +
                                     " is " + std::to_string(p.size) + " bytes, the argument " +
                                     std::to_string(a.Size()));
    }
    if (a.kind != kernels::Arg::Kind::kValue && a.buffer >= l.buffer_va.size()) {
      return Status::InvalidArgument("argument names a missing buffer");
    }
    a.WriteTo(bytes.data() + p.offset,
              a.kind == kernels::Arg::Kind::kValue ? 0 : l.buffer_va[a.buffer]);
  }
  return bytes;
}

}  // namespace

Result<CaseResult> RunTranslatedCase(const kernels::Case& c, const isa::Module& m,
                                     sim::ComputeEngine& engine, const RunOptions& options) {
  FakeChannelMemory mem;
  GPUVM_ASSIGN_OR_RETURN(Layout l, Place(c, m, &mem));
  // Parameter pages, one per launch.
  std::vector<sim::ComputeLaunch> launches;
  for (size_t li = 0; li < c.launches.size(); ++li) {
    const kernels::Launch& launch = c.launches[li];
    size_t ki = 0;
    while (ki < m.kernels.size() && m.kernels[ki].name != launch.kernel) ++ki;
    if (ki == m.kernels.size())
      return Status::NotFound("no kernel '" + launch.kernel + "' in " + c.ptx_file);
    const isa::ModuleKernel& k = m.kernels[ki];
    GPUVM_ASSIGN_OR_RETURN(isa::KernelHeader header, isa::DecodeKernelHeader(k.image));
    GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> params, Params(launch, k, l));
    const uint64_t param_va = kParamBase + li * kPage;
    sim::ComputeLaunch cl;
    if (!params.empty()) {
      mem.Map(param_va, params.size());
      mem.Write(param_va, params.data(), params.size());
      cl.const_buffers[isa::kParamBank] = {true, param_va, static_cast<uint32_t>(params.size())};
    }
    if (!m.const_image.empty()) {
      cl.const_buffers[isa::kUserConstBank] = {true, l.const_image_va,
                                               static_cast<uint32_t>(m.const_image.size())};
    }
    if (!m.globals.empty()) {
      cl.const_buffers[isa::kGlobalsBank] = {true, l.globals_table_va,
                                             static_cast<uint32_t>(m.globals.size() * 8)};
    }
    cl.grid_x = launch.grid[0];
    cl.grid_y = launch.grid[1];
    cl.grid_z = launch.grid[2];
    cl.block_x = launch.block[0];
    cl.block_y = launch.block[1];
    cl.block_z = launch.block[2];
    cl.shared_size = header.shared_bytes + launch.dynamic_shared;
    cl.code_address = kCodeBase;
    cl.entry_offset = static_cast<uint32_t>(l.kernel_offset[ki]);
    cl.shared_base = kSharedWindow;
    cl.local_base = kLocalWindow;
    launches.push_back(cl);
  }
  CaseResult result;
  for (int rep = 0; rep < std::max(options.repeat, 1); ++rep) {
    Fill(c, l, &mem);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = CpuSeconds();
    for (const sim::ComputeLaunch& cl : launches) {
      std::unique_ptr<sim::ComputeJob> job = engine.Start(cl, &mem);
      sim::SliceOutcome outcome;
      do {
        outcome = job->RunSlice();
        ++result.slices;
      } while (outcome == sim::SliceOutcome::kMore);
      result.thread_instructions += job->thread_instructions();
      ++result.launches;
      if (outcome == sim::SliceOutcome::kFaulted) {
        return Status::Aborted(c.name + ": " + job->fault().message);
      }
    }
    result.kernel_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.cpu_seconds += CpuSeconds() - c0;
  }
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    std::vector<uint8_t> bytes(c.buffers[i].initial.size());
    if (!bytes.empty()) mem.Read(l.buffer_va[i], bytes.data(), bytes.size());
    contents.push_back(std::move(bytes));
  }
  if (options.verify) GPUVM_RETURN_IF_ERROR(c.Verify(contents));
  if (options.contents) *options.contents = std::move(contents);
  return result;
}

Result<CaseResult> RunCase(const kernels::Case& c, sim::ComputeEngine& engine,
                           const RunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  GPUVM_ASSIGN_OR_RETURN(isa::Module m, ptx::CompilePtx(c.ptx));
  const double jit = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  GPUVM_ASSIGN_OR_RETURN(CaseResult r, RunTranslatedCase(c, m, engine, options));
  r.jit_seconds = jit;
  return r;
}

}  // namespace gpuvm::compute_bench
