#include "runtime/core/module_image.h"

#include <cstring>

#include "gpu/isa/encoding.h"

namespace gpuvm::runtime {
namespace {

void Put32(std::vector<uint8_t>* out, uint32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out->insert(out->end(), b, b + 4);
}

// A bounds-checked little-endian reader over untrusted bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool U32(uint32_t* v) {
    if (bytes_.size() - pos_ < 4) return false;
    std::memcpy(v, bytes_.data() + pos_, 4);
    pos_ += 4;
    return true;
  }
  bool Bytes(uint64_t n, std::span<const uint8_t>* out) {
    if (bytes_.size() - pos_ < n) return false;
    *out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

constexpr uint32_t kMaxKernels = 1u << 14;
constexpr uint32_t kMaxParams = 1024;
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxParamBytes = 4096;  // docs/ISA.md: bank 0 <= 4 KiB

}  // namespace

std::vector<uint8_t> EncodeNativeModule(const CompiledModule& module) {
  std::vector<uint8_t> out;
  Put32(&out, kNativeModuleMagic);
  Put32(&out, 1u | (16u << 16));
  Put32(&out, uint32_t(module.kernels.size()));
  Put32(&out, 0);  // total_bytes, patched below
  for (const CompiledKernel& k : module.kernels) {
    Put32(&out, uint32_t(k.name.size()));
    out.insert(out.end(), k.name.begin(), k.name.end());
    Put32(&out, uint32_t(k.params.size()));
    for (const KernelParam& p : k.params) {
      Put32(&out, p.offset);
      Put32(&out, p.size);
    }
    Put32(&out, uint32_t(k.image.size()));
    out.insert(out.end(), k.image.begin(), k.image.end());
  }
  uint32_t total = uint32_t(out.size());
  std::memcpy(&out[12], &total, 4);
  return out;
}

Result<CompiledModule> DecodeNativeModule(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  uint32_t magic, version_and_header, count, total;
  if (!r.U32(&magic) || !r.U32(&version_and_header) || !r.U32(&count) || !r.U32(&total)) {
    return Status::InvalidArgument("GVMD module header is truncated");
  }
  if (magic != kNativeModuleMagic) return Status::InvalidArgument("not a GVMD module");
  if (version_and_header != (1u | (16u << 16))) {
    return Status::InvalidArgument("GVMD module has an unsupported version or header");
  }
  if (total != bytes.size()) {
    return Status::InvalidArgument("GVMD module claims " + std::to_string(total) + " bytes, has " +
                                   std::to_string(bytes.size()));
  }
  if (count == 0 || count > kMaxKernels) {
    return Status::InvalidArgument("GVMD module has " + std::to_string(count) + " kernels");
  }
  CompiledModule module;
  for (uint32_t i = 0; i < count; ++i) {
    CompiledKernel k;
    uint32_t name_bytes, params, image_bytes;
    std::span<const uint8_t> name, image;
    if (!r.U32(&name_bytes) || name_bytes == 0 || name_bytes > kMaxNameBytes ||
        !r.Bytes(name_bytes, &name)) {
      return Status::InvalidArgument("GVMD kernel " + std::to_string(i) + " has a bad name");
    }
    k.name.assign(name.begin(), name.end());
    if (k.name.find('\0') != std::string::npos) {
      return Status::InvalidArgument("GVMD kernel name contains NUL");
    }
    if (!r.U32(&params) || params > kMaxParams) {
      return Status::InvalidArgument("GVMD kernel '" + k.name + "' has a bad parameter count");
    }
    for (uint32_t p = 0; p < params; ++p) {
      KernelParam param;
      if (!r.U32(&param.offset) || !r.U32(&param.size)) {
        return Status::InvalidArgument("GVMD kernel '" + k.name + "' is truncated");
      }
      if (param.size == 0 || param.offset > kMaxParamBytes ||
          param.size > kMaxParamBytes - param.offset || param.offset < k.param_bytes) {
        return Status::InvalidArgument("GVMD kernel '" + k.name + "' has a bad parameter layout");
      }
      k.param_bytes = param.offset + param.size;
      k.params.push_back(param);
    }
    if (!r.U32(&image_bytes) || !r.Bytes(image_bytes, &image)) {
      return Status::InvalidArgument("GVMD kernel '" + k.name + "' is truncated");
    }
    k.image.assign(image.begin(), image.end());
    auto decoded = isa::DecodeKernel(k.image);
    if (!decoded.ok()) {
      return Status::InvalidArgument("GVMD kernel '" + k.name +
                                     "' is not valid GVISA: " + decoded.status().message());
    }
    if (decoded->header.param_bytes > k.param_bytes) {
      return Status::InvalidArgument(
          "GVMD kernel '" + k.name + "' reads " + std::to_string(decoded->header.param_bytes) +
          " parameter bytes but declares " + std::to_string(k.param_bytes));
    }
    for (const CompiledKernel& other : module.kernels) {
      if (other.name == k.name)
        return Status::InvalidArgument("GVMD kernel '" + k.name + "' twice");
    }
    module.kernels.push_back(std::move(k));
  }
  if (r.remaining() != 0) return Status::InvalidArgument("GVMD module has trailing bytes");
  return module;
}

Result<uint64_t> NativeModuleSize(std::span<const uint8_t> header) {
  Reader r(header);
  uint32_t magic, version_and_header, count, total;
  if (!r.U32(&magic) || !r.U32(&version_and_header) || !r.U32(&count) || !r.U32(&total) ||
      magic != kNativeModuleMagic) {
    return Status::InvalidArgument("not a GVMD module");
  }
  if (total < 16 || total > (256u << 20)) {
    return Status::InvalidArgument("GVMD module claims an implausible size " +
                                   std::to_string(total));
  }
  return uint64_t(total);
}

}  // namespace gpuvm::runtime
