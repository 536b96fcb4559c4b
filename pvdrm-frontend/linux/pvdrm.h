/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * pvdrm: gpuvm's PVDRM kernel frontend for Linux guests on Xen (docs/PVDRM.md, "The Linux kernel
 * frontend"). A xenbus frontend of device type "vgpu-drm" that serves a DRM device with a render
 * node speaking nouveau's ioctls; every ioctl becomes one request on the shared ring to the
 * guest's dom0 backend (gpuvm-pvdrm-backend).
 *
 * pvdrm_ring.c: the xenbus state machine, the ring, the event channel and pvdrm_call().
 * pvdrm_drv.c:  the DRM driver (files, ioctls, GEM objects, mmap, the GEM pool).
 *
 * Threading: pvdrm_call() may be called from any number of threads at once (process context, it
 * sleeps); the ring and the in-flight slots are guarded by pvdrm_front.lock, taken from the event
 * channel's interrupt handler too. The xenbus callbacks run on the xenwatch thread.
 */
#ifndef PVDRM_H
#define PVDRM_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <drm/drm_device.h>
#include <drm/drm_gem.h>
#include <xen/xenbus.h>

#include "pvdrm_wire.h"

/* One request in flight: its ring id and, once answered, the validated response. */
struct pvdrm_slot {
	bool busy;
	bool answered;
	u64 id;
	u16 op;
	struct pvdrm_response rsp;
	struct completion done;
};

enum pvdrm_link {
	PVDRM_LINK_DOWN,	/* no ring yet, or torn down */
	PVDRM_LINK_WAITING,	/* ring offered (Initialised), backend not Connected yet */
	PVDRM_LINK_UP,		/* both Connected: calls go out */
	PVDRM_LINK_BROKEN,	/* a lying backend or its Closing: every call fails */
};

struct pvdrm_front {
	struct xenbus_device *xb;
	struct drm_device *drm;
	bool drm_registered;

	spinlock_t lock;		/* ring, slots, link, next_gen */
	enum pvdrm_link link;
	const char *broken_reason;	/* static string, why the link broke */
	struct pvdrm_front_ring ring;
	void *ring_page;
	grant_ref_t ring_ref;
	evtchn_port_t evtchn;
	int irq;
	u64 next_gen;
	unsigned int busy_slots;
	struct pvdrm_slot slots[PVDRM_RING_SLOTS];
	wait_queue_head_t slot_wq;	/* a slot became free, or the link changed */

	struct work_struct broken_work;	/* writes "error" and Closing from process context */
	struct mutex xb_mutex;		/* xenbus transitions */

	/* Statistics (debugfs-free: the counters show in the kernel log on unload). */
	atomic64_t requests;
};

/* Per DRM file: its id on the wire, alive until its last GEM object let go of it. */
struct pvdrm_file {
	struct kref ref;
	struct pvdrm_front *front;
	u32 id;
	bool closed;			/* FILE_CLOSE sent: the backend forgot every object */
	struct mutex pool_mutex;
	struct list_head pool;		/* pvdrm_pooled, most recent first */
	u64 pooled_bytes;
};

/* A GEM object: the backend's object of one file, and for GART objects the guest's pages. */
struct pvdrm_bo {
	struct drm_gem_object base;
	struct pvdrm_file *file;	/* holds a reference */
	u32 remote;			/* the backend's handle, in file */
	u32 domain;			/* NOUVEAU_GEM_DOMAIN_VRAM or _GART */
	u64 gpu_offset;
	unsigned long nr_pages;
	struct page **pages;		/* GART only */
};

/* An object kept for reuse (pool_bytes > 0): closed by user space, still open at the backend. */
struct pvdrm_pooled {
	struct list_head link;
	u32 remote;
	u32 domain;
	u64 size;
	u64 gpu_offset;
	unsigned long nr_pages;
	struct page **pages;
};

extern unsigned long pvdrm_pool_bytes;

/*
 * One request on behalf of DRM file `file`: req's op and payload are the caller's, the id and
 * file are filled in. Waits (uninterruptibly: the backend's answer is bounded, as a GPU's is) for
 * the validated response. Returns the response's status (0 or -errno), -ENODEV when the link is
 * not up or breaks meanwhile.
 */
int pvdrm_call(struct pvdrm_front *front, u32 file, struct pvdrm_request *req,
	       struct pvdrm_response *rsp);

/* pvdrm_drv.c. pvdrm_drm_create takes ownership of front (freed with the DRM device). */
struct drm_device *pvdrm_drm_create(struct pvdrm_front *front);
int pvdrm_drm_register(struct pvdrm_front *front);
void pvdrm_drm_unplug(struct pvdrm_front *front);
int pvdrm_drm_init(void);
void pvdrm_drm_exit(void);

#endif /* PVDRM_H */
