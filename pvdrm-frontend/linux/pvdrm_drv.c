// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pvdrm's DRM driver: a render node that speaks nouveau's ioctls (the pre-NVIF ABI libdrm_nouveau
 * uses below DRM version 1.3.1, and the GEM ioctls), each one a request on the ring
 * (docs/PVDRM.md, "The Linux kernel frontend").
 *
 * Files. Each DRM file is one file on the wire (FILE_OPEN at open, FILE_CLOSE at its last close),
 * so the backend keeps every process's objects apart and frees them when the process goes, also
 * on kill -9 (the kernel closes its files).
 *
 * Objects. A GEM object is one backend object of one file: user space sees the DRM handle, the
 * wire carries the backend's, and every handle an ioctl names is looked up in the caller's file
 * and must be that file's own. A GART object's memory is guest pages this driver allocates; the
 * backend reaches them by guest frame number (protocol version 3: the frame numbers in granted
 * frame-list pages, for the one call) and user space by mmap of the
 * object's fake offset (GEM_INFO's map_handle). The pages are freed only once the backend let go
 * of the object (GEM_CLOSE answered, the file closed, or the link down). VRAM objects have no CPU
 * mapping.
 *
 * Arrays. GEM_PUSHBUF's three arrays travel in pages granted to the backend for the one call.
 *
 * Threading: ioctls run concurrently (pvdrm_call is thread-safe); a file's pool is guarded by
 * its pool_mutex.
 */
#include <linux/highmem.h>
#include <linux/idr.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_vma_manager.h>
#include <xen/grant_table.h>
#include <xen/page.h>

#include "pvdrm.h"

unsigned long pvdrm_pool_bytes;
module_param_named(pool_bytes, pvdrm_pool_bytes, ulong, 0444);
MODULE_PARM_DESC(pool_bytes,
		 "GEM pooling: bytes of closed objects per file kept open for reuse (0: off)");

#define PVDRM_KNOWN_DOMAINS                                                           \
	(NOUVEAU_GEM_DOMAIN_CPU | NOUVEAU_GEM_DOMAIN_VRAM | NOUVEAU_GEM_DOMAIN_GART | \
	 NOUVEAU_GEM_DOMAIN_MAPPABLE | NOUVEAU_GEM_DOMAIN_COHERENT)
/* (our choice) objects up to 4 GiB (a GART one: 1024 frame-list pages, well inside a list). */
#define PVDRM_MAX_OBJECT_BYTES (4ULL << 30)

static DEFINE_IDA(pvdrm_file_ids);

static struct pvdrm_front *pvdrm_front_of(struct drm_device *drm)
{
	return drm->dev_private;
}

static struct pvdrm_bo *to_pvdrm_bo(struct drm_gem_object *obj)
{
	return container_of(obj, struct pvdrm_bo, base);
}

/* ---- granted page lists -------------------------------------------------------------------- */

/*
 * A page list for one call: `nr` entries (grant references or frame numbers, the caller's)
 * written into indirect pages granted read-only to the backend.
 */
struct pvdrm_list {
	unsigned int nr_indirect;
	struct page *indirect[PVDRM_MAX_INDIRECT_PAGES];
	grant_ref_t refs[PVDRM_MAX_INDIRECT_PAGES];
};

static void pvdrm_list_end(struct pvdrm_list *list)
{
	unsigned int i;

	for (i = 0; i < list->nr_indirect; i++) {
		if (list->refs[i] != INVALID_GRANT_REF)
			gnttab_end_foreign_access(list->refs[i], list->indirect[i]);
		else if (list->indirect[i])
			__free_page(list->indirect[i]);
	}
	list->nr_indirect = 0;
}

static int pvdrm_list_make(struct pvdrm_front *front, struct pvdrm_list *list, const u32 *entries,
			   unsigned long nr, struct pvdrm_page_list *wire)
{
	unsigned int i;

	memset(list, 0, sizeof(*list));
	memset(wire, 0, sizeof(*wire));
	if (nr > PVDRM_MAX_LISTED_PAGES)
		return -EINVAL;
	list->nr_indirect = DIV_ROUND_UP(nr, PVDRM_REFS_PER_INDIRECT_PAGE);
	for (i = 0; i < list->nr_indirect; i++)
		list->refs[i] = INVALID_GRANT_REF;
	for (i = 0; i < list->nr_indirect; i++) {
		unsigned long first = i * PVDRM_REFS_PER_INDIRECT_PAGE;
		unsigned long count = min_t(unsigned long, nr - first,
					    PVDRM_REFS_PER_INDIRECT_PAGE);
		u32 *page;
		int ref;

		list->indirect[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!list->indirect[i])
			goto nomem;
		page = kmap_local_page(list->indirect[i]);
		memcpy(page, entries + first, count * sizeof(u32));
		kunmap_local(page);
		ref = gnttab_grant_foreign_access(front->xb->otherend_id,
						  xen_page_to_gfn(list->indirect[i]), 1);
		if (ref < 0) {
			pvdrm_list_end(list);
			return ref;
		}
		list->refs[i] = ref;
		wire->indirect[i] = ref;
	}
	wire->nr_pages = nr;
	wire->nr_indirect = list->nr_indirect;
	return 0;
nomem:
	pvdrm_list_end(list);
	return -ENOMEM;
}

/*
 * Grants `nr` pages to the backend (read-only or read-write) into refs[], which the caller set to
 * INVALID_GRANT_REF; the caller ends them (pvdrm_end_pages) after the call, granted or not.
 */
static int pvdrm_grant_pages(struct pvdrm_front *front, struct page **pages, unsigned int nr,
			     int readonly, grant_ref_t *refs)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		int ref = gnttab_grant_foreign_access(front->xb->otherend_id,
						      xen_page_to_gfn(pages[i]), readonly);

		if (ref < 0)
			return ref;
		refs[i] = ref;
	}
	return 0;
}

/* Ends the grants of pages[] and frees the pages (each once the backend no longer maps it). */
static void pvdrm_end_pages(struct page **pages, grant_ref_t *refs, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		if (refs[i] != INVALID_GRANT_REF)
			gnttab_end_foreign_access(refs[i], pages[i]);
		else if (pages[i])
			__free_page(pages[i]);
		pages[i] = NULL;
		refs[i] = INVALID_GRANT_REF;
	}
}

/* ---- files --------------------------------------------------------------------------------- */

static void pvdrm_free_pages(struct page **pages, unsigned long nr)
{
	unsigned long i;

	if (!pages)
		return;
	for (i = 0; i < nr; i++)
		if (pages[i])
			__free_page(pages[i]);
	kvfree(pages);
}

static void pvdrm_file_release(struct kref *ref)
{
	struct pvdrm_file *pf = container_of(ref, struct pvdrm_file, ref);

	ida_free(&pvdrm_file_ids, pf->id);
	kfree(pf);
}

/*
 * Asks the backend to free object `remote` of `pf`. Returns whether its pages may be freed: the
 * backend let go of it (answered, or forgot the file, or the link is down). Otherwise the GPU may
 * still reach them and they are leaked, which the kernel log says.
 */
static bool pvdrm_remote_close(struct pvdrm_file *pf, u32 remote)
{
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_CLOSE };
	struct pvdrm_response rsp;
	int status;

	if (READ_ONCE(pf->closed))
		return true;
	req.u.gem_close.handle = remote;
	status = pvdrm_call(pf->front, pf->id, &req, &rsp);
	if (status == 0 || status == -ENOENT || status == -EBADF || status == -ENODEV)
		return true;
	dev_warn(&pf->front->xb->dev, "GEM_CLOSE of object %u failed (%d): its pages are kept\n",
		 remote, status);
	return false;
}

static int pvdrm_open(struct drm_device *drm, struct drm_file *dfile)
{
	struct pvdrm_front *front = pvdrm_front_of(drm);
	struct pvdrm_request req = { .op = PVDRM_OP_FILE_OPEN };
	struct pvdrm_response rsp;
	struct pvdrm_file *pf;
	int id, err;

	pf = kzalloc(sizeof(*pf), GFP_KERNEL);
	if (!pf)
		return -ENOMEM;
	id = ida_alloc_range(&pvdrm_file_ids, 1, INT_MAX, GFP_KERNEL);
	if (id < 0) {
		kfree(pf);
		return id;
	}
	kref_init(&pf->ref);
	pf->front = front;
	pf->id = id;
	mutex_init(&pf->pool_mutex);
	INIT_LIST_HEAD(&pf->pool);
	err = pvdrm_call(front, pf->id, &req, &rsp);
	if (err) {
		pvdrm_file_release(&pf->ref);
		return err;
	}
	dfile->driver_priv = pf;
	return 0;
}

/* After drm_gem_release: the file's handles are gone, objects still mmapped may remain. */
static void pvdrm_postclose(struct drm_device *drm, struct drm_file *dfile)
{
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_FILE_CLOSE };
	struct pvdrm_response rsp;
	struct pvdrm_pooled *entry, *next;
	LIST_HEAD(pooled);

	mutex_lock(&pf->pool_mutex);
	list_splice_init(&pf->pool, &pooled);
	pf->pooled_bytes = 0;
	mutex_unlock(&pf->pool_mutex);

	/* The backend frees every object of the file (and waits for its channels) before it
	 * answers; then nothing of the GPU reaches the pooled pages. */
	(void)pvdrm_call(pf->front, pf->id, &req, &rsp);
	WRITE_ONCE(pf->closed, true);
	list_for_each_entry_safe(entry, next, &pooled, link) {
		pvdrm_free_pages(entry->pages, entry->nr_pages);
		kfree(entry);
	}
	kref_put(&pf->ref, pvdrm_file_release);
}

/* ---- GEM objects --------------------------------------------------------------------------- */

/* Keeps bo's backend object for the file's next GEM_NEW of its domain and size (pool_bytes). */
static bool pvdrm_pool_put(struct pvdrm_bo *bo)
{
	struct pvdrm_file *pf = bo->file;
	struct pvdrm_pooled *entry;
	bool kept = false;

	if (!pvdrm_pool_bytes)
		return false;
	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return false;
	mutex_lock(&pf->pool_mutex);
	if (!pf->closed && pf->pooled_bytes + bo->base.size <= pvdrm_pool_bytes) {
		entry->remote = bo->remote;
		entry->domain = bo->domain;
		entry->size = bo->base.size;
		entry->gpu_offset = bo->gpu_offset;
		entry->nr_pages = bo->nr_pages;
		entry->pages = bo->pages;
		list_add(&entry->link, &pf->pool);
		pf->pooled_bytes += entry->size;
		bo->pages = NULL;
		kept = true;
	}
	mutex_unlock(&pf->pool_mutex);
	if (!kept)
		kfree(entry);
	return kept;
}

static struct pvdrm_pooled *pvdrm_pool_take(struct pvdrm_file *pf, u32 domain, u64 size)
{
	struct pvdrm_pooled *entry, *found = NULL;

	if (!pvdrm_pool_bytes)
		return NULL;
	mutex_lock(&pf->pool_mutex);
	list_for_each_entry(entry, &pf->pool, link) {
		if (entry->domain == domain && entry->size == size) {
			list_del(&entry->link);
			pf->pooled_bytes -= entry->size;
			found = entry;
			break;
		}
	}
	mutex_unlock(&pf->pool_mutex);
	return found;
}

static void pvdrm_bo_free(struct drm_gem_object *obj)
{
	struct pvdrm_bo *bo = to_pvdrm_bo(obj);
	struct pvdrm_file *pf = bo->file;

	if (bo->remote && !pvdrm_pool_put(bo)) {
		if (!pvdrm_remote_close(pf, bo->remote)) {
			kvfree(bo->pages);	/* the pages themselves stay the backend's */
			bo->pages = NULL;
		}
	}
	pvdrm_free_pages(bo->pages, bo->nr_pages);
	drm_gem_object_release(obj);
	kref_put(&pf->ref, pvdrm_file_release);
	kfree(bo);
}

static int pvdrm_bo_mmap(struct drm_gem_object *obj, struct vm_area_struct *vma)
{
	struct pvdrm_bo *bo = to_pvdrm_bo(obj);

	if (!bo->pages)
		return -EINVAL;	/* VRAM: no CPU mapping in this protocol version */
	/* drm_gem_mmap found us by the fake offset: from here on offsets are the object's. */
	vma->vm_pgoff -= drm_vma_node_start(&obj->vma_node);
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	return vm_map_pages(vma, bo->pages, bo->nr_pages);
}

static const struct vm_operations_struct pvdrm_vm_ops = {
	.open = drm_gem_vm_open,
	.close = drm_gem_vm_close,
};

static const struct drm_gem_object_funcs pvdrm_bo_funcs = {
	.free = pvdrm_bo_free,
	.mmap = pvdrm_bo_mmap,
	.vm_ops = &pvdrm_vm_ops,
};

/* The caller's object `handle`, when it is one of the caller's own; NULL otherwise. */
static struct pvdrm_bo *pvdrm_lookup(struct drm_file *dfile, u32 handle)
{
	struct drm_gem_object *obj = drm_gem_object_lookup(dfile, handle);

	if (!obj)
		return NULL;
	if (obj->funcs != &pvdrm_bo_funcs || to_pvdrm_bo(obj)->file != dfile->driver_priv) {
		drm_gem_object_put(obj);
		return NULL;
	}
	return to_pvdrm_bo(obj);
}

/* ---- ioctls -------------------------------------------------------------------------------- */

static int pvdrm_ioctl_getparam(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_getparam *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GETPARAM };
	struct pvdrm_response rsp;
	int err;

	req.u.getparam.param = arg->param;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	if (err)
		return err;
	if (rsp.u.getparam.param != arg->param)
		return -EIO;
	arg->value = rsp.u.getparam.value;
	return 0;
}

static int pvdrm_ioctl_channel_alloc(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_channel_alloc *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_CHANNEL_ALLOC };
	struct pvdrm_response rsp;
	const struct drm_nouveau_channel_alloc *got = &rsp.u.channel_alloc;
	int err;

	req.u.channel_alloc.fb_ctxdma_handle = arg->fb_ctxdma_handle;
	req.u.channel_alloc.tt_ctxdma_handle = arg->tt_ctxdma_handle;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	if (err)
		return err;
	if (got->channel < 0 || got->nr_subchan > ARRAY_SIZE(got->subchan) ||
	    got->fb_ctxdma_handle != arg->fb_ctxdma_handle ||
	    got->tt_ctxdma_handle != arg->tt_ctxdma_handle)
		return -EIO;
	*arg = *got;
	return 0;
}

static int pvdrm_ioctl_channel_free(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_channel_free *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_CHANNEL_FREE };
	struct pvdrm_response rsp;

	if (arg->channel < 0)
		return -EINVAL;
	req.u.channel_free.channel = arg->channel;
	return pvdrm_call(pf->front, pf->id, &req, &rsp);
}

static int pvdrm_ioctl_grobj_alloc(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_grobj_alloc *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GROBJ_ALLOC };
	struct pvdrm_response rsp;

	if (arg->channel < 0)
		return -EINVAL;
	req.u.grobj_alloc = *arg;
	return pvdrm_call(pf->front, pf->id, &req, &rsp);
}

static int pvdrm_ioctl_notifierobj_alloc(struct drm_device *drm, void *data,
					 struct drm_file *dfile)
{
	struct drm_nouveau_notifierobj_alloc *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_NOTIFIEROBJ_ALLOC };
	struct pvdrm_response rsp;
	const struct drm_nouveau_notifierobj_alloc *got = &rsp.u.notifierobj_alloc;
	int err;

	if (!arg->size)
		return -EINVAL;
	req.u.notifierobj_alloc.channel = arg->channel;
	req.u.notifierobj_alloc.handle = arg->handle;
	req.u.notifierobj_alloc.size = arg->size;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	if (err)
		return err;
	if (got->channel != arg->channel || got->handle != arg->handle || got->size != arg->size)
		return -EIO;
	arg->offset = got->offset;
	return 0;
}

static int pvdrm_ioctl_gpuobj_free(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gpuobj_free *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GPUOBJ_FREE };
	struct pvdrm_response rsp;

	if (arg->channel < 0)
		return -EINVAL;
	req.u.gpuobj_free = *arg;
	return pvdrm_call(pf->front, pf->id, &req, &rsp);
}

/* What user space sees of bo (its handle, our mmap offset). */
static void pvdrm_bo_info(struct pvdrm_bo *bo, u32 handle, struct drm_nouveau_gem_info *info)
{
	memset(info, 0, sizeof(*info));
	info->handle = handle;
	info->domain = bo->domain;
	info->size = bo->base.size;
	info->offset = bo->gpu_offset;
	if (bo->pages)
		info->map_handle = drm_vma_node_offset_addr(&bo->base.vma_node);
}

/* GEM_NEW at the backend for bo (size and domain set; GART: pages allocated). */
static int pvdrm_remote_new(struct pvdrm_file *pf, struct pvdrm_bo *bo,
			    const struct drm_nouveau_gem_new *arg)
{
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_NEW };
	struct pvdrm_response rsp;
	const struct drm_nouveau_gem_info *got = &rsp.u.gem_info;
	struct pvdrm_gem_new *wire = &req.u.gem_new;
	struct pvdrm_list list = { 0 };
	struct page **fl_pages = NULL;
	grant_ref_t *fl_refs = NULL;
	unsigned int nr_fl = 0;
	unsigned long i;
	int err;

	wire->gem.info.size = bo->base.size;
	wire->gem.info.domain = arg->info.domain;
	wire->gem.info.tile_mode = arg->info.tile_mode;
	/* NONCONTIG only allows a scattered placement, which every object of ours may have anyway
	 * (libdrm_nouveau sets it on every object it does not ask to be contiguous). */
	wire->gem.info.tile_flags = arg->info.tile_flags & ~NOUVEAU_GEM_TILE_NONCONTIG;
	wire->gem.channel_hint = arg->channel_hint;
	wire->gem.align = arg->align;
	if (bo->pages) {
		/* The frame numbers in frame-list pages, whose grants the page list lists. */
		nr_fl = DIV_ROUND_UP(bo->nr_pages, PVDRM_FRAMES_PER_LIST_PAGE);
		fl_pages = kcalloc(nr_fl, sizeof(*fl_pages), GFP_KERNEL);
		fl_refs = kmalloc_array(nr_fl, sizeof(*fl_refs), GFP_KERNEL);
		err = -ENOMEM;
		if (!fl_pages || !fl_refs)
			goto out;
		for (i = 0; i < nr_fl; i++)
			fl_refs[i] = INVALID_GRANT_REF;
		for (i = 0; i < bo->nr_pages; i++) {
			unsigned long gfn = xen_page_to_gfn(bo->pages[i]);
			unsigned long page = i / PVDRM_FRAMES_PER_LIST_PAGE;
			u32 *entries;

			err = -ENOMEM;	/* the wire's frame numbers are 32 bits */
			if (gfn > U32_MAX)
				goto out;
			if (!fl_pages[page]) {
				fl_pages[page] = alloc_page(GFP_KERNEL | __GFP_ZERO);
				if (!fl_pages[page])
					goto out;
			}
			entries = kmap_local_page(fl_pages[page]);
			entries[i % PVDRM_FRAMES_PER_LIST_PAGE] = gfn;
			kunmap_local(entries);
		}
		err = pvdrm_grant_pages(pf->front, fl_pages, nr_fl, 1, fl_refs);
		if (err)
			goto out;
		err = pvdrm_list_make(pf->front, &list, fl_refs, nr_fl, &wire->pages);
		if (err)
			goto out;
	}
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
out:
	pvdrm_list_end(&list);
	if (fl_pages && fl_refs)
		pvdrm_end_pages(fl_pages, fl_refs, nr_fl);
	kfree(fl_pages);
	kfree(fl_refs);
	if (err)
		return err;
	bo->remote = got->handle;
	if (!got->handle || got->size != bo->base.size || got->domain != bo->domain ||
	    got->map_handle || got->tile_mode || got->tile_flags) {
		/* A backend that answers with another object than we asked for: drop it. */
		dev_warn(&pf->front->xb->dev, "GEM_NEW answered with a foreign object\n");
		return -EIO;
	}
	bo->gpu_offset = got->offset;
	return 0;
}

static int pvdrm_ioctl_gem_new(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gem_new *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	u32 domain = arg->info.domain;
	struct pvdrm_pooled *pooled;
	struct pvdrm_bo *bo;
	bool gart;
	u64 size;
	u32 handle;
	int err;

	if (!arg->info.size || arg->info.size > PVDRM_MAX_OBJECT_BYTES || !domain ||
	    (domain & ~PVDRM_KNOWN_DOMAINS))
		return -EINVAL;
	size = PAGE_ALIGN(arg->info.size);
	/* Host-visible memory is GART (the guest's pages); VRAM has no CPU mapping here. */
	gart = (domain & NOUVEAU_GEM_DOMAIN_GART) &&
	       (!(domain & NOUVEAU_GEM_DOMAIN_VRAM) || (domain & NOUVEAU_GEM_DOMAIN_MAPPABLE));
	if (!gart && !(domain & NOUVEAU_GEM_DOMAIN_VRAM))
		return -EINVAL;

	bo = kzalloc(sizeof(*bo), GFP_KERNEL);
	if (!bo)
		return -ENOMEM;
	drm_gem_private_object_init(drm, &bo->base, size);
	bo->base.funcs = &pvdrm_bo_funcs;
	kref_get(&pf->ref);
	bo->file = pf;
	bo->domain = gart ? NOUVEAU_GEM_DOMAIN_GART : NOUVEAU_GEM_DOMAIN_VRAM;
	bo->nr_pages = size >> PAGE_SHIFT;

	pooled = pvdrm_pool_take(pf, bo->domain, size);
	if (pooled) {
		unsigned long i;

		bo->remote = pooled->remote;
		bo->gpu_offset = pooled->gpu_offset;
		bo->pages = pooled->pages;
		kfree(pooled);
		/* A new object reads as zeroes, as a fresh one would. */
		for (i = 0; bo->pages && i < bo->nr_pages; i++)
			clear_highpage(bo->pages[i]);
	} else {
		if (gart) {
			unsigned long i;

			bo->pages = kvcalloc(bo->nr_pages, sizeof(*bo->pages), GFP_KERNEL);
			if (!bo->pages) {
				err = -ENOMEM;
				goto put;
			}
			for (i = 0; i < bo->nr_pages; i++) {
				bo->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN);
				if (!bo->pages[i]) {
					err = -ENOMEM;
					goto put;
				}
			}
		}
		err = pvdrm_remote_new(pf, bo, arg);
		if (err)
			goto put;
	}
	if (bo->pages) {
		err = drm_gem_create_mmap_offset(&bo->base);
		if (err)
			goto put;
	}
	err = drm_gem_handle_create(dfile, &bo->base, &handle);
	if (err)
		goto put;
	pvdrm_bo_info(bo, handle, &arg->info);
	drm_gem_object_put(&bo->base);	/* the handle holds it */
	return 0;
put:
	drm_gem_object_put(&bo->base);	/* frees the backend's object too (pvdrm_bo_free) */
	return err;
}

static int pvdrm_ioctl_gem_info(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gem_info *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_INFO };
	struct pvdrm_response rsp;
	const struct drm_nouveau_gem_info *got = &rsp.u.gem_info;
	struct pvdrm_bo *bo;
	int err;

	bo = pvdrm_lookup(dfile, arg->handle);
	if (!bo)
		return -ENOENT;
	req.u.gem_info.handle = bo->remote;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	if (!err && (got->handle != bo->remote || got->size != bo->base.size ||
		     got->domain != bo->domain || got->offset != bo->gpu_offset || got->map_handle))
		err = -EIO;
	if (!err)
		pvdrm_bo_info(bo, arg->handle, arg);
	drm_gem_object_put(&bo->base);
	return err;
}

static int pvdrm_ioctl_cpu_prep(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gem_cpu_prep *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_CPU_PREP };
	struct pvdrm_response rsp;
	struct pvdrm_bo *bo;
	int err;

	if (arg->flags & ~(NOUVEAU_GEM_CPU_PREP_NOWAIT | NOUVEAU_GEM_CPU_PREP_WRITE))
		return -EINVAL;
	bo = pvdrm_lookup(dfile, arg->handle);
	if (!bo)
		return -ENOENT;
	req.u.gem_cpu_prep.handle = bo->remote;
	req.u.gem_cpu_prep.flags = arg->flags;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	drm_gem_object_put(&bo->base);
	return err;
}

static int pvdrm_ioctl_cpu_fini(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gem_cpu_fini *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_CPU_FINI };
	struct pvdrm_response rsp;
	struct pvdrm_bo *bo;
	int err;

	bo = pvdrm_lookup(dfile, arg->handle);
	if (!bo)
		return -ENOENT;
	req.u.gem_cpu_fini.handle = bo->remote;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	drm_gem_object_put(&bo->base);
	return err;
}

/* The arrays' pages at nouveau's limits: 81920 bytes (docs/PVDRM.md). */
#define PVDRM_PUSHBUF_MAX_PAGES                                                  \
	DIV_ROUND_UP(PVDRM_MAX_BUFFERS * sizeof(struct drm_nouveau_gem_pushbuf_bo) + \
			     PVDRM_MAX_RELOCS * sizeof(struct drm_nouveau_gem_pushbuf_reloc) + 8 + \
			     PVDRM_MAX_PUSH * sizeof(struct drm_nouveau_gem_pushbuf_push),  \
		     PVDRM_PAGE_BYTES)

/* GEM_PUSHBUF's state for one call: the arrays, the objects they name, the granted pages. */
struct pvdrm_pushbuf {
	struct drm_nouveau_gem_pushbuf_bo *bos;
	struct drm_gem_object **objs;
	void *relocs;
	struct drm_nouveau_gem_pushbuf_push *push;
	struct page *pages[PVDRM_PUSHBUF_MAX_PAGES];
	grant_ref_t refs[PVDRM_PUSHBUF_MAX_PAGES];
	unsigned int nr_pages;
	void *data;
};

static void pvdrm_pushbuf_free(struct pvdrm_pushbuf *pb, unsigned int nr_buffers)
{
	unsigned int i;

	if (pb->data)
		vunmap(pb->data);
	pvdrm_end_pages(pb->pages, pb->refs, pb->nr_pages);
	for (i = 0; pb->objs && i < nr_buffers; i++)
		if (pb->objs[i])
			drm_gem_object_put(pb->objs[i]);
	kvfree(pb->objs);
	kvfree(pb->bos);
	kvfree(pb->relocs);
	kvfree(pb->push);
	kfree(pb);
}

static int pvdrm_ioctl_pushbuf(struct drm_device *drm, void *data, struct drm_file *dfile)
{
	struct drm_nouveau_gem_pushbuf *arg = data;
	struct pvdrm_file *pf = dfile->driver_priv;
	struct pvdrm_request req = { .op = PVDRM_OP_GEM_PUSHBUF };
	struct pvdrm_response rsp;
	const struct drm_nouveau_gem_pushbuf *got = &rsp.u.gem_pushbuf;
	struct pvdrm_gem_pushbuf *wire = &req.u.gem_pushbuf;
	size_t bos_bytes, relocs_bytes, push_bytes, push_offset, bytes;
	struct drm_nouveau_gem_pushbuf_bo __user *ubos;
	struct pvdrm_list list = { 0 };
	struct pvdrm_pushbuf *pb;
	unsigned int i;
	int err;

	if (arg->nr_buffers > PVDRM_MAX_BUFFERS || arg->nr_relocs > PVDRM_MAX_RELOCS ||
	    arg->nr_push > PVDRM_MAX_PUSH)
		return -EINVAL;
	bos_bytes = arg->nr_buffers * sizeof(struct drm_nouveau_gem_pushbuf_bo);
	relocs_bytes = arg->nr_relocs * sizeof(struct drm_nouveau_gem_pushbuf_reloc);
	push_bytes = arg->nr_push * sizeof(struct drm_nouveau_gem_pushbuf_push);
	push_offset = ALIGN(bos_bytes + relocs_bytes, 8);
	bytes = push_offset + push_bytes;	/* the layout of docs/PVDRM.md, exactly */

	pb = kzalloc(sizeof(*pb), GFP_KERNEL);
	if (!pb)
		return -ENOMEM;
	for (i = 0; i < ARRAY_SIZE(pb->refs); i++)
		pb->refs[i] = INVALID_GRANT_REF;
	ubos = u64_to_user_ptr(arg->buffers);
	pb->bos = kvmalloc(bos_bytes ?: 1, GFP_KERNEL);
	pb->objs = kvcalloc(arg->nr_buffers ?: 1, sizeof(*pb->objs), GFP_KERNEL);
	pb->relocs = kvmalloc(relocs_bytes ?: 1, GFP_KERNEL);
	pb->push = kvmalloc(push_bytes ?: 1, GFP_KERNEL);
	err = -ENOMEM;
	if (!pb->bos || !pb->objs || !pb->relocs || !pb->push)
		goto out;
	err = -EFAULT;
	if (copy_from_user(pb->bos, ubos, bos_bytes) ||
	    copy_from_user(pb->relocs, u64_to_user_ptr(arg->relocs), relocs_bytes) ||
	    copy_from_user(pb->push, u64_to_user_ptr(arg->push), push_bytes))
		goto out;
	for (i = 0; i < arg->nr_push; i++) {
		err = -EINVAL;
		if (pb->push[i].bo_index >= arg->nr_buffers)
			goto out;
	}
	/* The wire names the backend's handles: each must be one of the caller's own objects. */
	for (i = 0; i < arg->nr_buffers; i++) {
		struct pvdrm_bo *bo = pvdrm_lookup(dfile, pb->bos[i].handle);

		err = -ENOENT;
		if (!bo)
			goto out;
		pb->objs[i] = &bo->base;
		pb->bos[i].handle = bo->remote;
	}

	pb->nr_pages = DIV_ROUND_UP(bytes, PVDRM_PAGE_BYTES);
	if (pb->nr_pages) {
		err = -ENOMEM;
		for (i = 0; i < pb->nr_pages; i++) {
			pb->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
			if (!pb->pages[i])
				goto out;
		}
		pb->data = vmap(pb->pages, pb->nr_pages, VM_MAP, PAGE_KERNEL);
		if (!pb->data)
			goto out;
		memcpy(pb->data, pb->bos, bos_bytes);
		memcpy(pb->data + bos_bytes, pb->relocs, relocs_bytes);
		memcpy(pb->data + push_offset, pb->push, push_bytes);
		err = pvdrm_grant_pages(pf->front, pb->pages, pb->nr_pages, 0, pb->refs);
		if (err)
			goto out;
		err = pvdrm_list_make(pf->front, &list, pb->refs, pb->nr_pages, &wire->data);
		if (err)
			goto out;
	}
	wire->pushbuf.channel = arg->channel;
	wire->pushbuf.nr_buffers = arg->nr_buffers;
	wire->pushbuf.nr_relocs = arg->nr_relocs;
	wire->pushbuf.nr_push = arg->nr_push;
	err = pvdrm_call(pf->front, pf->id, &req, &rsp);
	pvdrm_list_end(&list);
	if (err)
		goto out;
	if (got->channel != arg->channel || got->nr_buffers != arg->nr_buffers ||
	    got->nr_relocs != arg->nr_relocs || got->nr_push != arg->nr_push || got->buffers ||
	    got->relocs || got->push) {
		err = -EIO;
		goto out;
	}
	arg->suffix0 = got->suffix0;
	arg->suffix1 = got->suffix1;
	arg->vram_available = got->vram_available;
	arg->gart_available = got->gart_available;
	/* The backend wrote each bo's presumed placement back, as nouveau writes the user's. */
	err = 0;
	for (i = 0; i < arg->nr_buffers; i++) {
		struct drm_nouveau_gem_pushbuf_bo_presumed presumed;

		memcpy(&presumed,
		       pb->data + i * sizeof(struct drm_nouveau_gem_pushbuf_bo) +
			       offsetof(struct drm_nouveau_gem_pushbuf_bo, presumed),
		       sizeof(presumed));
		if (copy_to_user(&ubos[i].presumed, &presumed, sizeof(presumed))) {
			err = -EFAULT;
			break;
		}
	}
out:
	pvdrm_pushbuf_free(pb, arg->nr_buffers);
	return err;
}

static const struct drm_ioctl_desc pvdrm_ioctls[] = {
	DRM_IOCTL_DEF_DRV(NOUVEAU_GETPARAM, pvdrm_ioctl_getparam, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_CHANNEL_ALLOC, pvdrm_ioctl_channel_alloc, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_CHANNEL_FREE, pvdrm_ioctl_channel_free, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GROBJ_ALLOC, pvdrm_ioctl_grobj_alloc, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_NOTIFIEROBJ_ALLOC, pvdrm_ioctl_notifierobj_alloc,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GPUOBJ_FREE, pvdrm_ioctl_gpuobj_free, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GEM_NEW, pvdrm_ioctl_gem_new, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GEM_PUSHBUF, pvdrm_ioctl_pushbuf, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GEM_CPU_PREP, pvdrm_ioctl_cpu_prep, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GEM_CPU_FINI, pvdrm_ioctl_cpu_fini, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(NOUVEAU_GEM_INFO, pvdrm_ioctl_gem_info, DRM_RENDER_ALLOW),
};

DEFINE_DRM_GEM_FOPS(pvdrm_fops);

static const struct drm_driver pvdrm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_RENDER,
	.open = pvdrm_open,
	.postclose = pvdrm_postclose,
	.ioctls = pvdrm_ioctls,
	.num_ioctls = ARRAY_SIZE(pvdrm_ioctls),
	.fops = &pvdrm_fops,
	.name = "pvdrm",
	.desc = "gpuvm PVDRM frontend (nouveau ABI)",
	.date = "20261128",
	/* 1.0.0: below 1.3.1, libdrm_nouveau speaks the pre-NVIF ABI we forward. */
	.major = 1,
	.minor = 0,
	.patchlevel = 0,
};

static void pvdrm_free_front(struct drm_device *drm, void *data)
{
	kfree(data);
}

struct drm_device *pvdrm_drm_create(struct pvdrm_front *front)
{
	struct drm_device *drm;
	int err;

	drm = drm_dev_alloc(&pvdrm_driver, &front->xb->dev);
	if (IS_ERR(drm)) {
		kfree(front);
		return drm;
	}
	drm->dev_private = front;
	/* The frontend lives as long as the DRM device: open files may outlive the xenbus device. */
	err = drmm_add_action_or_reset(drm, pvdrm_free_front, front);
	if (err) {
		drm_dev_put(drm);	/* the action ran: front is freed */
		return ERR_PTR(err);
	}
	return drm;
}

int pvdrm_drm_register(struct pvdrm_front *front)
{
	return drm_dev_register(front->drm, 0);
}

void pvdrm_drm_unplug(struct pvdrm_front *front)
{
	if (front->drm_registered) {
		drm_dev_unplug(front->drm);
		front->drm_registered = false;
	}
}

int pvdrm_drm_init(void)
{
	return 0;
}

void pvdrm_drm_exit(void)
{
	ida_destroy(&pvdrm_file_ids);
}
