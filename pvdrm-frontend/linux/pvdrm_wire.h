/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * PVDRM's wire format, protocol version 3, for the Linux kernel frontend (docs/PVDRM.md).
 *
 * The same layout as pvdrm-frontend/protocol/wire.h (the user-space ends' C++ header), written for
 * the kernel: the ring is Xen's DEFINE_RING_TYPES from the kernel's <xen/interface/io/ring.h>, the
 * GEM structs are the kernel's <uapi/drm/nouveau_drm.h>, and the pre-GEM nouveau ioctl structs the
 * kernel's uapi header no longer carries (GETPARAM, CHANNEL_ALLOC, ...) are declared here with the
 * layout libdrm's <nouveau_drm.h> gives them. Every size is asserted in pvdrm_wire_check().
 *
 * Threading: types and constants only.
 */
#ifndef PVDRM_WIRE_H
#define PVDRM_WIRE_H

#include <linux/build_bug.h>
#include <linux/types.h>
#include <drm/drm.h>
#include <drm/nouveau_drm.h>
#include <xen/interface/grant_table.h>
#include <xen/interface/io/ring.h>

#define PVDRM_PROTOCOL_VERSION 3
#define PVDRM_PAGE_BYTES 4096

/* The pre-GEM ioctls nouveau once had; libdrm_nouveau still uses them below DRM version 1.3.1. */
struct drm_nouveau_getparam {
	__u64 param;
	__u64 value;
};

struct drm_nouveau_channel_alloc {
	__u32 fb_ctxdma_handle;
	__u32 tt_ctxdma_handle;
	__s32 channel;
	__u32 pushbuf_domains;
	__u32 notifier_handle;
	struct {
		__u32 handle;
		__u32 grclass;
	} subchan[8];
	__u32 nr_subchan;
};

struct drm_nouveau_channel_free {
	__s32 channel;
};

struct drm_nouveau_grobj_alloc {
	__s32 channel;
	__u32 handle;
	__s32 class;
};

struct drm_nouveau_notifierobj_alloc {
	__u32 channel;
	__u32 handle;
	__u32 size;
	__u32 offset;
};

struct drm_nouveau_gpuobj_free {
	__s32 channel;
	__u32 handle;
};

/*
 * Their ioctl numbers. libdrm issues some as write-only (DRM_IOW); the DRM core copies in and out
 * only the directions both the caller's number and ours name, so read-write here serves both.
 */
#define DRM_IOCTL_NOUVEAU_GETPARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_GETPARAM, struct drm_nouveau_getparam)
#define DRM_IOCTL_NOUVEAU_CHANNEL_ALLOC \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_CHANNEL_ALLOC, struct drm_nouveau_channel_alloc)
#define DRM_IOCTL_NOUVEAU_CHANNEL_FREE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_CHANNEL_FREE, struct drm_nouveau_channel_free)
#define DRM_IOCTL_NOUVEAU_GROBJ_ALLOC \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_GROBJ_ALLOC, struct drm_nouveau_grobj_alloc)
#define DRM_IOCTL_NOUVEAU_NOTIFIEROBJ_ALLOC \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_NOTIFIEROBJ_ALLOC, \
		 struct drm_nouveau_notifierobj_alloc)
#define DRM_IOCTL_NOUVEAU_GPUOBJ_FREE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NOUVEAU_GPUOBJ_FREE, struct drm_nouveau_gpuobj_free)

/* Ops (docs/PVDRM.md): our own in 0x00xx, DRM core ioctls 0x0100 | nr, nouveau's 0x0200 | nr. */
enum pvdrm_op {
	PVDRM_OP_FILE_OPEN = 0x0001,
	PVDRM_OP_FILE_CLOSE = 0x0002,
	PVDRM_OP_GEM_CLOSE = 0x0109,
	PVDRM_OP_GETPARAM = 0x0200 | DRM_NOUVEAU_GETPARAM,
	PVDRM_OP_CHANNEL_ALLOC = 0x0200 | DRM_NOUVEAU_CHANNEL_ALLOC,
	PVDRM_OP_CHANNEL_FREE = 0x0200 | DRM_NOUVEAU_CHANNEL_FREE,
	PVDRM_OP_GROBJ_ALLOC = 0x0200 | DRM_NOUVEAU_GROBJ_ALLOC,
	PVDRM_OP_NOTIFIEROBJ_ALLOC = 0x0200 | DRM_NOUVEAU_NOTIFIEROBJ_ALLOC,
	PVDRM_OP_GPUOBJ_FREE = 0x0200 | DRM_NOUVEAU_GPUOBJ_FREE,
	PVDRM_OP_GEM_NEW = 0x0200 | DRM_NOUVEAU_GEM_NEW,
	PVDRM_OP_GEM_PUSHBUF = 0x0200 | DRM_NOUVEAU_GEM_PUSHBUF,
	PVDRM_OP_GEM_CPU_PREP = 0x0200 | DRM_NOUVEAU_GEM_CPU_PREP,
	PVDRM_OP_GEM_CPU_FINI = 0x0200 | DRM_NOUVEAU_GEM_CPU_FINI,
	PVDRM_OP_GEM_INFO = 0x0200 | DRM_NOUVEAU_GEM_INFO,
};

/* Page lists: the references of up to 8 indirect pages, each holding 1024 32-bit entries. */
#define PVDRM_REFS_PER_INDIRECT_PAGE (PVDRM_PAGE_BYTES / sizeof(grant_ref_t))
#define PVDRM_MAX_INDIRECT_PAGES 8
#define PVDRM_MAX_LISTED_PAGES (PVDRM_MAX_INDIRECT_PAGES * PVDRM_REFS_PER_INDIRECT_PAGE)

struct pvdrm_page_list {
	__u32 nr_pages;
	__u32 nr_indirect;
	grant_ref_t indirect[PVDRM_MAX_INDIRECT_PAGES];
};

/* FILE_OPEN: optionally the file's arrays area, pages granted for the file's life (none here). */
#define PVDRM_MAX_AREA_PAGES 64
struct pvdrm_file_open {
	struct pvdrm_page_list area;
};

/*
 * GEM_NEW: a page list of frame-list pages, granted pages holding the object's guest frame
 * numbers, PVDRM_FRAMES_PER_LIST_PAGE to a page, in order, the rest of the last page zero.
 */
#define PVDRM_FRAMES_PER_LIST_PAGE (PVDRM_PAGE_BYTES / sizeof(__u32))
struct pvdrm_gem_new {
	struct drm_nouveau_gem_new gem;
	struct pvdrm_page_list pages;
};

/*
 * GEM_PUSHBUF: the arrays in data's pages (bos at 0, relocs, push at the next multiple of 8),
 * `buffers` zero; or in the file's arrays area at offset `buffers` (not used here).
 */
struct pvdrm_gem_pushbuf {
	struct drm_nouveau_gem_pushbuf pushbuf;
	struct pvdrm_page_list data;
};

#define PVDRM_PAYLOAD_BYTES 104

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
	__u8 bytes[PVDRM_PAYLOAD_BYTES];
};

union pvdrm_response_payload {
	struct drm_nouveau_getparam getparam;
	struct drm_nouveau_channel_alloc channel_alloc;
	struct drm_nouveau_notifierobj_alloc notifierobj_alloc;
	struct drm_nouveau_gem_info gem_info;
	struct drm_nouveau_gem_pushbuf gem_pushbuf;
	__u8 bytes[PVDRM_PAYLOAD_BYTES];
};

struct pvdrm_request {
	__u64 id;
	__u32 file;
	__u16 op;
	__u16 reserved;
	union pvdrm_request_payload u;
};

struct pvdrm_response {
	__u64 id;
	__s32 status;
	__u16 op;
	__u16 reserved;
	union pvdrm_response_payload u;
};

DEFINE_RING_TYPES(pvdrm, struct pvdrm_request, struct pvdrm_response);

#define PVDRM_RING_SLOTS __CONST_RING_SIZE(pvdrm, PVDRM_PAGE_BYTES)

/* nouveau's limits on GEM_PUSHBUF's arrays (nouveau_gem.c). */
#define PVDRM_MAX_BUFFERS 1024
#define PVDRM_MAX_RELOCS 1024
#define PVDRM_MAX_PUSH 512

static inline void pvdrm_wire_check(void)
{
	BUILD_BUG_ON(sizeof(grant_ref_t) != 4);
	BUILD_BUG_ON(sizeof(struct pvdrm_page_list) != 40);
	BUILD_BUG_ON(sizeof(struct pvdrm_file_open) != 40);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_getparam) != 16);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_channel_alloc) != 88);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_channel_free) != 4);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_grobj_alloc) != 12);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_notifierobj_alloc) != 16);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gpuobj_free) != 8);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_info) != 40);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_new) != 48);
	BUILD_BUG_ON(sizeof(struct drm_gem_close) != 8);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_pushbuf) != 64);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_pushbuf_bo) != 40);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_pushbuf_reloc) != 28);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_pushbuf_push) != 24);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_cpu_prep) != 8);
	BUILD_BUG_ON(sizeof(struct drm_nouveau_gem_cpu_fini) != 4);
	BUILD_BUG_ON(sizeof(struct pvdrm_gem_new) != 88);
	BUILD_BUG_ON(sizeof(struct pvdrm_gem_pushbuf) != PVDRM_PAYLOAD_BYTES);
	BUILD_BUG_ON(sizeof(union pvdrm_request_payload) != PVDRM_PAYLOAD_BYTES);
	BUILD_BUG_ON(sizeof(union pvdrm_response_payload) != PVDRM_PAYLOAD_BYTES);
	BUILD_BUG_ON(sizeof(struct pvdrm_request) != 120);
	BUILD_BUG_ON(sizeof(struct pvdrm_response) != 120);
	BUILD_BUG_ON(PVDRM_RING_SLOTS != 32);
}

#endif /* PVDRM_WIRE_H */
