// PVDRM's wire format, protocol version 3 (docs/PVDRM.md): what a guest's frontend and its dom0
// backend put in the one shared ring page and in the granted page lists beside it.
//
// The ring is Xen's own: DEFINE_RING_TYPES from <xen/io/ring.h> over one request and one response
// struct of 120 bytes each, 32 slots in a 4 KiB page. Payloads mirror the nouveau UAPI structs of
// libdrm's <nouveau_drm.h> and <drm.h> (a struct the ioctl would take is carried as is; user
// pointers, which mean nothing to the peer, must be zero and their arrays travel in granted pages).
// Everything here is plain C layout; the only code that reads it from shared memory is the codec
// (codec.h), which copies first and validates the copy.
//
// Threading: types and constants only.
#ifndef GPUVM_PVDRM_FRONTEND_PROTOCOL_WIRE_H_
#define GPUVM_PVDRM_FRONTEND_PROTOCOL_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

// The current Xen interface, not the legacy one a guest gets by default (whose ring.h would use
// Linux's mb()): then ring.h takes its barriers from the xen_mb() family defined below.
#ifndef __XEN_INTERFACE_VERSION__
#define __XEN_INTERFACE_VERSION__ 0x00040e00
#endif
#if __XEN_INTERFACE_VERSION__ < 0x00030208
#error "include pvdrm-frontend/protocol/wire.h before any other Xen header"
#endif

#include <drm.h>
// nouveau_drm.h names a field of drm_nouveau_grobj_alloc `class`, a C++ keyword: read it here as
// `oclass` (the macro lives only across this include).
#define class oclass
#include <nouveau_drm.h>
#undef class
#include <xen/grant_table.h>
#include <xen/io/xenbus.h>

// <xen/io/ring.h> wants the including program to say what its barriers are (Xen's own tools take
// them from xenctrl.h, which we do not need): a full fence, and acquire/release fences that are
// also compiler barriers, which is what the ring macros rely on.
#ifndef xen_mb
#define xen_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define xen_rmb()                            \
  do {                                       \
    __atomic_thread_fence(__ATOMIC_ACQUIRE); \
    __asm__ __volatile__("" ::: "memory");   \
  } while (0)
#define xen_wmb()                            \
  do {                                       \
    __asm__ __volatile__("" ::: "memory");   \
    __atomic_thread_fence(__ATOMIC_RELEASE); \
  } while (0)
#endif
#include <xen/io/ring.h>

namespace gpuvm::pvdrm {

// 3: GEM_NEW's page list grants pages that hold the object's guest frame numbers (version 2: the
// indirect pages held them, so at most 32 MiB per object; version 1: grant references).
inline constexpr uint32_t kProtocolVersion = 3;
inline constexpr size_t kPageBytes = 4096;

// Operations. Our own ones in 0x00xx; DRM core ioctls as 0x0100 | their number; nouveau's as
// 0x0200 | DRM_NOUVEAU_<name> — the numbers are libdrm's, so a trace reads like an ioctl trace.
enum class Op : uint16_t {
  kFileOpen = 0x0001,         // the guest opened the DRM device: a new file (per-process state)
  kFileClose = 0x0002,        // its last close: free everything of that file
  kGemClose = 0x0100 | 0x09,  // DRM_IOCTL_GEM_CLOSE is DRM_IOW(0x09, struct drm_gem_close)
  kGetParam = 0x0200 | DRM_NOUVEAU_GETPARAM,
  kChannelAlloc = 0x0200 | DRM_NOUVEAU_CHANNEL_ALLOC,
  kChannelFree = 0x0200 | DRM_NOUVEAU_CHANNEL_FREE,
  kGrobjAlloc = 0x0200 | DRM_NOUVEAU_GROBJ_ALLOC,
  kNotifierobjAlloc = 0x0200 | DRM_NOUVEAU_NOTIFIEROBJ_ALLOC,
  kGpuobjFree = 0x0200 | DRM_NOUVEAU_GPUOBJ_FREE,
  kGemNew = 0x0200 | DRM_NOUVEAU_GEM_NEW,
  kGemPushbuf = 0x0200 | DRM_NOUVEAU_GEM_PUSHBUF,
  kGemCpuPrep = 0x0200 | DRM_NOUVEAU_GEM_CPU_PREP,
  kGemCpuFini = 0x0200 | DRM_NOUVEAU_GEM_CPU_FINI,
  kGemInfo = 0x0200 | DRM_NOUVEAU_GEM_INFO,
};

// Guest pages behind a request (a GEM object's backing, a pushbuf's arrays): grant references
// listed in granted "indirect" pages of kRefsPerIndirectPage grant_ref_t each, in order; the
// indirect pages' own references travel here. nr_indirect == ceil(nr_pages / kRefsPerIndirectPage)
// exactly, and unused indirect[] slots are zero. nr_pages == 0: no pages (nr_indirect 0).
inline constexpr uint32_t kRefsPerIndirectPage = kPageBytes / sizeof(grant_ref_t);
inline constexpr uint32_t kMaxIndirectPages = 8;
inline constexpr uint32_t kMaxListedPages = kMaxIndirectPages * kRefsPerIndirectPage;  // 32 MiB
struct pvdrm_page_list {
  uint32_t nr_pages;
  uint32_t nr_indirect;
  grant_ref_t indirect[kMaxIndirectPages];
};

// FILE_OPEN: optionally the file's *arrays area*, pages the frontend grants read-write for the
// file's whole life (a persistent grant, as blkif's feature-persistent): the file's GEM_PUSHBUF
// requests may put their arrays there instead of granting pages per call, so the backend maps
// them once. nr_pages 0: no area; at most kMaxAreaPages. Ended by FILE_CLOSE (or disconnection).
inline constexpr uint32_t kMaxAreaPages = 64;
struct pvdrm_file_open {
  struct pvdrm_page_list area;
};

// GEM_NEW: the ioctl's struct, then (GART objects; VRAM ones have none) a page list of *frame-list
// pages*: granted data pages holding the object's guest frame numbers, kFramesPerListPage u32 per
// page, ceil(size / kPageBytes) of them in order, the rest of the last page zero. Frame numbers,
// not grant references: the GPU reaches them by guest-physical address, which the aggregator
// confines to the VM's own RAM (docs/PVDRM.md).
inline constexpr uint32_t kFramesPerListPage = kPageBytes / sizeof(uint32_t);
inline constexpr uint64_t kMaxGemFrames = uint64_t{kMaxListedPages} * kFramesPerListPage;  // 32 GiB
struct pvdrm_gem_new {
  struct drm_nouveau_gem_new gem;
  struct pvdrm_page_list pages;
};

// GEM_PUSHBUF: the ioctl's struct with `relocs` and `push` zero; the three arrays lie one after
// another: nr_buffers drm_nouveau_gem_pushbuf_bo at byte 0, then nr_relocs
// drm_nouveau_gem_pushbuf_reloc, then (at the next multiple of 8) nr_push
// drm_nouveau_gem_pushbuf_push (PushbufLayout in codec.h), either in `data`'s pages (`buffers`
// zero) or, with `data` empty, in the file's arrays area at byte offset `buffers` (a multiple of
// 8). Granted read-write: the backend writes each bo's `presumed` back, as the kernel does to the
// user's array.
struct pvdrm_gem_pushbuf {
  struct drm_nouveau_gem_pushbuf pushbuf;
  struct pvdrm_page_list data;
};

inline constexpr size_t kPayloadBytes = 104;
union pvdrm_request_payload {
  struct pvdrm_file_open file_open;
  struct drm_nouveau_getparam getparam;
  struct drm_nouveau_channel_alloc channel_alloc;
  struct drm_nouveau_channel_free channel_free;
  struct drm_nouveau_grobj_alloc grobj_alloc;
  struct drm_nouveau_notifierobj_alloc notifierobj_alloc;
  struct drm_nouveau_gpuobj_free gpuobj_free;
  struct pvdrm_gem_new gem_new;
  struct drm_nouveau_gem_info gem_info;
  struct drm_gem_close gem_close;
  struct pvdrm_gem_pushbuf gem_pushbuf;
  struct drm_nouveau_gem_cpu_prep gem_cpu_prep;
  struct drm_nouveau_gem_cpu_fini gem_cpu_fini;
  uint8_t bytes[kPayloadBytes];
};

union pvdrm_response_payload {
  struct drm_nouveau_getparam getparam;
  struct drm_nouveau_channel_alloc channel_alloc;
  struct drm_nouveau_notifierobj_alloc notifierobj_alloc;
  struct drm_nouveau_gem_info gem_info;  // GEM_NEW and GEM_INFO
  struct drm_nouveau_gem_pushbuf gem_pushbuf;
  uint8_t bytes[kPayloadBytes];
};

struct pvdrm_request {
  uint64_t id;                    // chosen by the frontend, unique among its outstanding requests
  uint32_t file;                  // the DRM file (guest process) it acts for; never 0
  uint16_t op;                    // Op
  uint16_t reserved;              // 0
  union pvdrm_request_payload u;  // the op's struct, every byte after it 0
};

struct pvdrm_response {
  uint64_t id;                     // the request's
  int32_t status;                  // 0, or a negative errno as the ioctl would return
  uint16_t op;                     // the request's
  uint16_t reserved;               // 0
  union pvdrm_response_payload u;  // the op's result struct (0 on error), every byte after it 0
};

}  // namespace gpuvm::pvdrm

// At global scope, as Xen's C code has them: pvdrm_sring, pvdrm_front_ring, pvdrm_back_ring.
DEFINE_RING_TYPES(pvdrm, struct gpuvm::pvdrm::pvdrm_request, struct gpuvm::pvdrm::pvdrm_response);

namespace gpuvm::pvdrm {

inline constexpr uint32_t kRingSlots = __CONST_RING_SIZE(pvdrm, kPageBytes);

// The sizes docs/PVDRM.md states, and the facts they rest on.
static_assert(sizeof(grant_ref_t) == 4);
static_assert(sizeof(pvdrm_page_list) == 40);
static_assert(sizeof(drm_nouveau_getparam) == 16);
static_assert(sizeof(drm_nouveau_channel_alloc) == 88);
static_assert(sizeof(drm_nouveau_channel_free) == 4);
static_assert(sizeof(drm_nouveau_grobj_alloc) == 12);
static_assert(sizeof(drm_nouveau_notifierobj_alloc) == 16);
static_assert(sizeof(drm_nouveau_gpuobj_free) == 8);
static_assert(sizeof(drm_nouveau_gem_info) == 40);
static_assert(sizeof(drm_nouveau_gem_new) == 48);
static_assert(sizeof(drm_gem_close) == 8);
static_assert(sizeof(drm_nouveau_gem_pushbuf) == 64);
static_assert(sizeof(drm_nouveau_gem_pushbuf_bo) == 40);
static_assert(sizeof(drm_nouveau_gem_pushbuf_reloc) == 28);
static_assert(sizeof(drm_nouveau_gem_pushbuf_push) == 24);
static_assert(sizeof(drm_nouveau_gem_cpu_prep) == 8);
static_assert(sizeof(drm_nouveau_gem_cpu_fini) == 4);
static_assert(sizeof(pvdrm_gem_new) == 88);
static_assert(sizeof(pvdrm_gem_pushbuf) == kPayloadBytes);
static_assert(sizeof(pvdrm_request_payload) == kPayloadBytes);
static_assert(sizeof(pvdrm_response_payload) == kPayloadBytes);
static_assert(sizeof(pvdrm_request) == 120 && offsetof(pvdrm_request, u) == 16);
static_assert(sizeof(pvdrm_response) == 120 && offsetof(pvdrm_response, u) == 16);
static_assert(offsetof(pvdrm_sring, ring) == 64);
static_assert(kRingSlots == 32);
static_assert(offsetof(pvdrm_sring, ring) + kRingSlots * sizeof(pvdrm_sring_entry) <= kPageBytes,
              "the ring fits one page");

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_PROTOCOL_WIRE_H_
