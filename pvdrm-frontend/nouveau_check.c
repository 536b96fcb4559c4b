/*
 * gpuvm-pvdrm-nouveau-check: shows that the pvdrm kernel frontend's render node is nouveau's UAPI
 * by driving it with the distribution's own libdrm_nouveau, as Mesa's nouveau driver would
 * (docs/PVDRM.md, "The Linux kernel frontend"):
 *
 *   nouveau_drm_new + nouveau_device_new    DRM_IOCTL_VERSION, GETPARAMs
 *   nouveau_bo_new(GART | MAP) + bo_map     GEM_NEW, mmap of map_handle: write, read back
 *   GEM_INFO + a second mmap                the same pages through another mapping
 *   a channel and a pushbuffer              CHANNEL_ALLOC, GEM_PUSHBUF: a semaphore release
 *   nouveau_bo_wait                         GEM_CPU_PREP: the fence, then the GPU's write is read
 *
 *   gpuvm-pvdrm-nouveau-check [/dev/dri/renderDN]     (default: the first pvdrm render node)
 *
 * Prints "nouveau-check: PASS" and exits 0, or says what failed and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xf86drm.h>
#include <nouveau_drm.h>
#include <nouveau.h>
#include <nvif/class.h>
#include <nvif/cl0080.h>

#define BO_BYTES (64 * 1024)
#define FENCE_OFFSET 0x1000
#define FENCE_VALUE 0xfeedf00du

static int fail(const char *what, int err)
{
	fprintf(stderr, "nouveau-check: FAIL: %s: %s\n", what, err ? strerror(err < 0 ? -err : err) : "");
	return 1;
}

static int open_pvdrm_node(const char *path)
{
	char name[64];
	int minor;

	if (path)
		return open(path, O_RDWR | O_CLOEXEC);
	for (minor = 128; minor < 192; minor++) {
		drmVersionPtr v;
		int fd;

		snprintf(name, sizeof(name), "/dev/dri/renderD%d", minor);
		fd = open(name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		v = drmGetVersion(fd);
		if (v && strcmp(v->name, "pvdrm") == 0) {
			drmFreeVersion(v);
			printf("nouveau-check: %s\n", name);
			return fd;
		}
		if (v)
			drmFreeVersion(v);
		close(fd);
	}
	errno = ENOENT;
	return -1;
}

int main(int argc, char **argv)
{
	struct nouveau_drm *drm = NULL;
	struct nouveau_device *dev = NULL;
	struct nouveau_client *client = NULL;
	struct nouveau_bo *bo = NULL;
	struct nouveau_object *chan = NULL;
	struct nouveau_pushbuf *push = NULL;
	struct nouveau_bufctx *bctx = NULL;
	struct nvc0_fifo fifo = { 0 };
	struct drm_nouveau_gem_info info = { 0 };
	uint32_t *words, *again;
	uint64_t addr;
	unsigned int i;
	int fd, ret;

	fd = open_pvdrm_node(argc > 1 ? argv[1] : NULL);
	if (fd < 0)
		return fail("no pvdrm render node", errno);
	ret = nouveau_drm_new(fd, &drm);
	if (ret)
		return fail("nouveau_drm_new", ret);
	ret = nouveau_device_new(&drm->client, NV_DEVICE,
				 &(struct nv_device_v0){ .device = ~0ULL },
				 sizeof(struct nv_device_v0), &dev);
	if (ret)
		return fail("nouveau_device_new", ret);
	printf("nouveau-check: chipset %#x, vram %llu MiB, gart %llu MiB\n", dev->chipset,
	       (unsigned long long)(dev->vram_size >> 20), (unsigned long long)(dev->gart_size >> 20));
	if (dev->chipset != 0xc0)
		return fail("chipset is not GF100 (0xc0)", 0);
	ret = nouveau_client_new(dev, &client);
	if (ret)
		return fail("nouveau_client_new", ret);

	/* A mappable GART object: write through one mapping, read through another. */
	ret = nouveau_bo_new(dev, NOUVEAU_BO_GART | NOUVEAU_BO_MAP, 0, BO_BYTES, NULL, &bo);
	if (ret)
		return fail("nouveau_bo_new", ret);
	ret = nouveau_bo_map(bo, NOUVEAU_BO_RDWR, client);
	if (ret)
		return fail("nouveau_bo_map", ret);
	words = bo->map;
	for (i = 0; i < BO_BYTES / 4; i++)
		if (words[i] != 0)
			return fail("a new object does not read as zeroes", 0);
	for (i = 0; i < BO_BYTES / 4; i++)
		words[i] = 0x9e000000u + i;
	info.handle = bo->handle;
	ret = drmCommandWriteRead(fd, DRM_NOUVEAU_GEM_INFO, &info, sizeof(info));
	if (ret)
		return fail("GEM_INFO", ret);
	if (info.size != BO_BYTES || info.offset != bo->offset || !info.map_handle)
		return fail("GEM_INFO disagrees with GEM_NEW", 0);
	again = mmap(NULL, BO_BYTES, PROT_READ, MAP_SHARED, fd, (off_t)info.map_handle);
	if (again == MAP_FAILED)
		return fail("a second mmap", errno);
	for (i = 0; i < BO_BYTES / 4; i++)
		if (again[i] != 0x9e000000u + i)
			return fail("the second mapping reads other bytes", 0);
	munmap(again, BO_BYTES);
	printf("nouveau-check: GART object %u at GPU %#llx: written and read back\n", bo->handle,
	       (unsigned long long)bo->offset);

	/* A channel and a pushbuffer: the GPU releases a semaphore into the object. */
	ret = nouveau_object_new(&dev->object, 0, NOUVEAU_FIFO_CHANNEL_CLASS, &fifo, sizeof(fifo),
				 &chan);
	if (ret)
		return fail("channel (CHANNEL_ALLOC)", ret);
	ret = nouveau_pushbuf_new(client, chan, 4, 32 * 1024, true, &push);
	if (ret)
		return fail("nouveau_pushbuf_new", ret);
	ret = nouveau_bufctx_new(client, 1, &bctx);
	if (ret)
		return fail("nouveau_bufctx_new", ret);
	nouveau_bufctx_refn(bctx, 0, bo, NOUVEAU_BO_GART | NOUVEAU_BO_WR);
	nouveau_pushbuf_bufctx(push, bctx);
	ret = nouveau_pushbuf_validate(push);
	if (ret)
		return fail("nouveau_pushbuf_validate", ret);
	ret = nouveau_pushbuf_space(push, 8, 0, 0);
	if (ret)
		return fail("nouveau_pushbuf_space", ret);
	addr = bo->offset + FENCE_OFFSET;
	/* GF100 method header, incrementing: SEMAPHORE_A..D (0x10..0x1c) on subchannel 0. */
	*push->cur++ = 0x20000000u | (4u << 16) | (0x10u >> 2);
	*push->cur++ = (uint32_t)(addr >> 32);
	*push->cur++ = (uint32_t)addr;
	*push->cur++ = FENCE_VALUE;
	*push->cur++ = 0x2u | (1u << 24);	/* RELEASE, 4-byte payload */
	ret = nouveau_pushbuf_kick(push, chan);
	if (ret)
		return fail("nouveau_pushbuf_kick (GEM_PUSHBUF)", ret);
	ret = nouveau_bo_wait(bo, NOUVEAU_BO_RD, client);
	if (ret)
		return fail("nouveau_bo_wait (GEM_CPU_PREP)", ret);
	if (words[FENCE_OFFSET / 4] != FENCE_VALUE) {
		fprintf(stderr, "nouveau-check: semaphore word %#x\n", words[FENCE_OFFSET / 4]);
		return fail("the GPU's semaphore release did not arrive", 0);
	}
	printf("nouveau-check: pushbuffer fenced, semaphore %#x read back\n", FENCE_VALUE);

	nouveau_bufctx_del(&bctx);
	nouveau_pushbuf_del(&push);
	nouveau_object_del(&chan);
	nouveau_bo_ref(NULL, &bo);
	nouveau_client_del(&client);
	nouveau_device_del(&dev);
	nouveau_drm_del(&drm);
	close(fd);
	printf("nouveau-check: PASS\n");
	return 0;
}
