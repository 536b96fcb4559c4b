// libcuda.so.1, CUDA arrays: an array is pitched device memory of the context — Height rows (at
// least one) a slice, Depth slices (at least one), rows of Width elements of NumChannels channels —
// described as CUDA describes it. The layout of a CUDA array is opaque to programs (only copies
// reach it), so a pitched linear one is a faithful choice; 2D and 3D copies name an array side as
// CU_MEMORYTYPE_ARRAY (driver_api_memory.cc resolves it to its rows). Textures and surfaces, which
// sample arrays, are not implemented; neither are cubemaps, mipmaps and the pre-v2 entry points
// (32-bit descriptors of CUDA 3.1).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <cstring>
#include <limits>

#include "runtime/driver_api.h"

namespace {

// Rows start this far apart (as cuMemAllocPitch's: 256 bytes, every access width aligned).
constexpr size_t kArrayPitchAlignment = 256;

// Bytes of one channel of `format`; 0 for a format arrays here do not have.
size_t ChannelBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
  }
  return 0;
}

CUresult Create(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& d) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr || d.Width == 0 ||
      (d.Height == 0 && d.Depth != 0 && (d.Flags & CUDA_ARRAY3D_LAYERED) == 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((d.Flags & CUDA_ARRAY3D_CUBEMAP) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  if ((d.Flags & ~unsigned(CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST |
                           CUDA_ARRAY3D_TEXTURE_GATHER)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The format is the caller's int: read as one (an unknown value is no CUarray_format).
  int format;
  std::memcpy(&format, &d.Format, sizeof format);
  const size_t channel = ChannelBytes(CUarray_format(format));
  if (channel == 0 || (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t rows_per_slice = d.Height == 0 ? 1 : d.Height;
  const size_t slices = d.Depth == 0 ? 1 : d.Depth;
  constexpr size_t kMax = std::numeric_limits<size_t>::max() / 4;
  if (d.Width > kMax / (channel * d.NumChannels) || rows_per_slice > kMax / slices) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t row_bytes = d.Width * channel * d.NumChannels;
  const size_t pitch =
      (row_bytes + kArrayPitchAlignment - 1) / kArrayPitchAlignment * kArrayPitchAlignment;
  const size_t rows = rows_per_slice * slices;
  if (rows > kMax / pitch) return CUDA_ERROR_INVALID_VALUE;
  auto memory = ctx->gctx->AllocDevice(pitch * rows);
  if (!memory.ok()) return ContextError(ctx, memory.status(), CUDA_ERROR_OUT_OF_MEMORY);
  auto* a = new CUarray_st;
  a->ctx = ctx;
  a->va = memory->va;
  a->pitch = pitch;
  a->row_bytes = row_bytes;
  a->rows = rows;
  a->rows_per_slice = rows_per_slice;
  a->desc = d;
  Track(ctx, ctx->arrays, a, Process::Kind::kArray);
  *out = a;
  return CUDA_SUCCESS;
}

CUresult Describe(CUarray a, CUDA_ARRAY3D_DESCRIPTOR* out) {
  CUresult r = CheckInit(out == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(a, Process::Kind::kArray)) return CUDA_ERROR_INVALID_HANDLE;
  *out = a->desc;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuArrayCreate_v2(CUarray* out, const CUDA_ARRAY_DESCRIPTOR* d) {
  if (d == nullptr) return CheckInit(true);
  // Field by field, the format as bytes: the caller's value may be no CUarray_format, and Create
  // reads it as an int.
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = d->Width;
  d3.Height = d->Height;
  std::memcpy(&d3.Format, &d->Format, sizeof d3.Format);
  d3.NumChannels = d->NumChannels;
  return Create(out, d3);
}

GPUVM_EXPORT CUresult cuArray3DCreate_v2(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  if (d == nullptr) return CheckInit(true);
  return Create(out, *d);
}

GPUVM_EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* out, CUarray a) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  CUresult r = Describe(a, out == nullptr ? nullptr : &d);
  if (r != CUDA_SUCCESS) return r;
  *out = CUDA_ARRAY_DESCRIPTOR{d.Width, d.Height, d.Format, d.NumChannels};
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray a) {
  return Describe(a, out);
}

GPUVM_EXPORT CUresult cuArrayDestroy(CUarray a) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(a, Process::Kind::kArray)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = a->ctx;
  Untrack(ctx, ctx->arrays, a);
  // The memory of a reset primary context went with it.
  Status st = ctx->gctx != nullptr ? ctx->gctx->Free(a->va) : Status::Ok();
  delete a;
  return st.ok() ? CUDA_SUCCESS : ContextError(ctx, st);
}
