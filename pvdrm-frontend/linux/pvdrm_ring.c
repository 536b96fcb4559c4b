// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pvdrm's transport: the xenbus frontend of a "vgpu-drm" device, its one ring page, its event
 * channel and the calls that travel on them (docs/PVDRM.md, "Handshake", "The ring", "Trust").
 *
 * Every response is copied out of the shared page once (RING_COPY_RESPONSE) and checked before
 * anything reads it: its id must be one we sent and have not seen answered, its op the request's,
 * its status 0 or -1..-4095, its reserved field and every payload byte past the op's result struct
 * zero (all of them on error). A backend that breaks any of this, or whose response producer runs
 * past what we asked, breaks the link: every call in flight and every later one fails with
 * -ENODEV, and the frontend writes "error" and goes Closing.
 */
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <xen/events.h>
#include <xen/grant_table.h>
#include <xen/interface/io/protocols.h>
#include <xen/xen.h>
#include <xen/xenbus.h>

#include "pvdrm.h"

#define PVDRM_SLOT_BITS 5	/* ids are (generation << 5) | slot */

static void pvdrm_break_locked(struct pvdrm_front *front, const char *why)
{
	unsigned int i;

	if (front->link == PVDRM_LINK_BROKEN || front->link == PVDRM_LINK_DOWN)
		return;
	front->link = PVDRM_LINK_BROKEN;
	front->broken_reason = why;
	for (i = 0; i < PVDRM_RING_SLOTS; i++) {
		struct pvdrm_slot *slot = &front->slots[i];

		if (slot->busy && !slot->answered) {
			memset(&slot->rsp, 0, sizeof(slot->rsp));
			slot->rsp.status = -ENODEV;
			slot->answered = true;
			complete(&slot->done);
		}
	}
	wake_up_all(&front->slot_wq);
	schedule_work(&front->broken_work);
}

static void pvdrm_broken_work(struct work_struct *work)
{
	struct pvdrm_front *front = container_of(work, struct pvdrm_front, broken_work);
	const char *why;
	unsigned long flags;

	spin_lock_irqsave(&front->lock, flags);
	why = front->broken_reason;
	spin_unlock_irqrestore(&front->lock, flags);
	if (!why)
		return;
	dev_err(&front->xb->dev, "backend broke the protocol: %s\n", why);
	mutex_lock(&front->xb_mutex);
	if (front->xb->state < XenbusStateClosing) {
		xenbus_printf(XBT_NIL, front->xb->nodename, "error", "%s", why);
		xenbus_switch_state(front->xb, XenbusStateClosing);
	}
	mutex_unlock(&front->xb_mutex);
}

/* The size of the result struct a successful response of `op` carries. */
static size_t pvdrm_result_bytes(u16 op)
{
	switch (op) {
	case PVDRM_OP_GETPARAM:
		return sizeof(struct drm_nouveau_getparam);
	case PVDRM_OP_CHANNEL_ALLOC:
		return sizeof(struct drm_nouveau_channel_alloc);
	case PVDRM_OP_NOTIFIEROBJ_ALLOC:
		return sizeof(struct drm_nouveau_notifierobj_alloc);
	case PVDRM_OP_GEM_NEW:
	case PVDRM_OP_GEM_INFO:
		return sizeof(struct drm_nouveau_gem_info);
	case PVDRM_OP_GEM_PUSHBUF:
		return sizeof(struct drm_nouveau_gem_pushbuf);
	default:
		return 0;
	}
}

/* Checks a private copy of a response to the request in `slot`; NULL when it is acceptable. */
static const char *pvdrm_check_response(const struct pvdrm_slot *slot,
					const struct pvdrm_response *rsp)
{
	size_t used = 0;
	size_t i;

	if (rsp->op != slot->op)
		return "a response of another op than its request";
	if (rsp->reserved)
		return "a response with reserved bits set";
	if (rsp->status > 0 || rsp->status < -MAX_ERRNO)
		return "a response status that is no errno";
	if (rsp->status == 0)
		used = pvdrm_result_bytes(rsp->op);
	for (i = used; i < PVDRM_PAYLOAD_BYTES; i++)
		if (rsp->u.bytes[i])
			return "a response with bytes past its result";
	return NULL;
}

static irqreturn_t pvdrm_interrupt(int irq, void *data)
{
	struct pvdrm_front *front = data;
	struct pvdrm_response rsp;
	unsigned long flags;
	RING_IDX i, rp;
	int more;

	spin_lock_irqsave(&front->lock, flags);
	if (front->link != PVDRM_LINK_UP && front->link != PVDRM_LINK_WAITING)
		goto out;
	do {
		rp = READ_ONCE(front->ring.sring->rsp_prod);
		virt_rmb();	/* the responses, after the index that says they are there */
		if (RING_RESPONSE_PROD_OVERFLOW(&front->ring, rp)) {
			pvdrm_break_locked(front, "a response producer past the requests");
			goto out;
		}
		for (i = front->ring.rsp_cons; i != rp; i++) {
			struct pvdrm_slot *slot;
			const char *bad;

			RING_COPY_RESPONSE(&front->ring, i, &rsp);
			slot = &front->slots[rsp.id & (PVDRM_RING_SLOTS - 1)];
			if (!slot->busy || slot->answered || slot->id != rsp.id) {
				pvdrm_break_locked(front, "a response to an id nobody asked about");
				goto out;
			}
			bad = pvdrm_check_response(slot, &rsp);
			if (bad) {
				pvdrm_break_locked(front, bad);
				goto out;
			}
			slot->rsp = rsp;
			slot->answered = true;
			complete(&slot->done);
		}
		front->ring.rsp_cons = rp;
		RING_FINAL_CHECK_FOR_RESPONSES(&front->ring, more);
	} while (more);
out:
	spin_unlock_irqrestore(&front->lock, flags);
	return IRQ_HANDLED;
}

/* A free slot, marked busy, or NULL when the link is not up (lock held). */
static struct pvdrm_slot *pvdrm_take_slot(struct pvdrm_front *front, bool *down)
{
	unsigned int i;

	*down = front->link != PVDRM_LINK_UP;
	if (*down || front->busy_slots == PVDRM_RING_SLOTS)
		return NULL;
	for (i = 0; i < PVDRM_RING_SLOTS; i++) {
		struct pvdrm_slot *slot = &front->slots[i];

		if (!slot->busy) {
			slot->busy = true;
			slot->answered = false;
			slot->id = (front->next_gen++ << PVDRM_SLOT_BITS) | i;
			reinit_completion(&slot->done);
			front->busy_slots++;
			return slot;
		}
	}
	return NULL;
}

int pvdrm_call(struct pvdrm_front *front, u32 file, struct pvdrm_request *req,
	       struct pvdrm_response *rsp)
{
	struct pvdrm_slot *slot = NULL;
	struct pvdrm_request *out;
	unsigned long flags;
	bool down = false;
	int notify;
	int status;

	might_sleep();
	for (;;) {
		spin_lock_irqsave(&front->lock, flags);
		slot = pvdrm_take_slot(front, &down);
		if (slot)
			break;
		spin_unlock_irqrestore(&front->lock, flags);
		if (down)
			return -ENODEV;
		/* 32 calls in flight: wait for one to finish (rechecked under the lock above). */
		wait_event(front->slot_wq, READ_ONCE(front->busy_slots) < PVDRM_RING_SLOTS ||
					   READ_ONCE(front->link) != PVDRM_LINK_UP);
	}
	/* Lock held. Our outstanding slots bound the ring's: it has room for this request. */
	req->id = slot->id;
	req->file = file;
	req->reserved = 0;
	slot->op = req->op;
	out = RING_GET_REQUEST(&front->ring, front->ring.req_prod_pvt);
	memcpy(out, req, sizeof(*out));
	front->ring.req_prod_pvt++;
	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&front->ring, notify);
	spin_unlock_irqrestore(&front->lock, flags);
	if (notify)
		notify_remote_via_irq(front->irq);
	atomic64_inc(&front->requests);

	wait_for_completion(&slot->done);

	spin_lock_irqsave(&front->lock, flags);
	memcpy(rsp, &slot->rsp, sizeof(*rsp));
	status = slot->rsp.status;
	slot->busy = false;
	front->busy_slots--;
	spin_unlock_irqrestore(&front->lock, flags);
	wake_up(&front->slot_wq);
	return status;
}

/* ---- the handshake ------------------------------------------------------------------------- */

static void pvdrm_free_ring(struct pvdrm_front *front)
{
	unsigned long flags;

	spin_lock_irqsave(&front->lock, flags);
	if (front->link != PVDRM_LINK_DOWN)
		pvdrm_break_locked(front, NULL);
	front->link = PVDRM_LINK_DOWN;
	spin_unlock_irqrestore(&front->lock, flags);
	wake_up_all(&front->slot_wq);

	if (front->irq > 0) {
		unbind_from_irqhandler(front->irq, front);
		front->irq = 0;
		front->evtchn = 0;
	} else if (front->evtchn) {
		xenbus_free_evtchn(front->xb, front->evtchn);
		front->evtchn = 0;
	}
	/* The backend unmaps the ring before it says Closing (docs/PVDRM.md); we end its grant and
	 * free the page as every Xen frontend does. */
	xenbus_teardown_ring(&front->ring_page, 1, &front->ring_ref);
}

static int pvdrm_offer_ring(struct pvdrm_front *front)
{
	struct xenbus_device *xb = front->xb;
	struct xenbus_transaction xbt;
	struct pvdrm_sring *sring;
	unsigned int version;
	const char *what;
	int err;

	version = xenbus_read_unsigned(xb->otherend, "protocol-version", 0);
	if (version < PVDRM_PROTOCOL_VERSION) {
		xenbus_dev_fatal(xb, -EPROTONOSUPPORT, "backend speaks protocol-version %u, need %u",
				 version, PVDRM_PROTOCOL_VERSION);
		return -EPROTONOSUPPORT;
	}
	err = xenbus_setup_ring(xb, GFP_KERNEL, &front->ring_page, 1, &front->ring_ref);
	if (err)
		return err;
	sring = front->ring_page;
	SHARED_RING_INIT(sring);
	FRONT_RING_INIT(&front->ring, sring, XEN_PAGE_SIZE);

	err = xenbus_alloc_evtchn(xb, &front->evtchn);
	if (err)
		goto fail;
	err = bind_evtchn_to_irqhandler(front->evtchn, pvdrm_interrupt, 0, "pvdrm", front);
	if (err < 0) {
		xenbus_dev_fatal(xb, err, "binding the event channel");
		goto fail;
	}
	front->irq = err;

again:
	err = xenbus_transaction_start(&xbt);
	if (err) {
		xenbus_dev_fatal(xb, err, "starting a transaction");
		goto fail;
	}
	what = "ring-ref";
	err = xenbus_printf(xbt, xb->nodename, "ring-ref", "%u", front->ring_ref);
	if (!err) {
		what = "event-channel";
		err = xenbus_printf(xbt, xb->nodename, "event-channel", "%u", front->evtchn);
	}
	if (!err) {
		what = "protocol";
		err = xenbus_printf(xbt, xb->nodename, "protocol", "%s", XEN_IO_PROTO_ABI_NATIVE);
	}
	if (!err) {
		what = "protocol-version";
		err = xenbus_printf(xbt, xb->nodename, "protocol-version", "%u",
				    PVDRM_PROTOCOL_VERSION);
	}
	if (err) {
		xenbus_transaction_end(xbt, 1);
		xenbus_dev_fatal(xb, err, "writing %s", what);
		goto fail;
	}
	err = xenbus_transaction_end(xbt, 0);
	if (err == -EAGAIN)
		goto again;
	if (err) {
		xenbus_dev_fatal(xb, err, "ending the transaction");
		goto fail;
	}
	spin_lock_irq(&front->lock);
	front->link = PVDRM_LINK_WAITING;
	front->broken_reason = NULL;
	spin_unlock_irq(&front->lock);
	xenbus_switch_state(xb, XenbusStateInitialised);
	return 0;
fail:
	pvdrm_free_ring(front);
	return err;
}

static void pvdrm_backend_changed(struct xenbus_device *xb, enum xenbus_state backend_state)
{
	struct pvdrm_front *front = dev_get_drvdata(&xb->dev);
	int err;

	mutex_lock(&front->xb_mutex);
	dev_dbg(&xb->dev, "backend %s, we are %s\n", xenbus_strstate(backend_state),
		xenbus_strstate(xb->state));
	switch (backend_state) {
	case XenbusStateInitialising:
	case XenbusStateInitialised:
	case XenbusStateReconfiguring:
	case XenbusStateReconfigured:
	case XenbusStateUnknown:
		break;
	case XenbusStateInitWait:
		if (xb->state != XenbusStateInitialising)
			break;
		err = pvdrm_offer_ring(front);
		if (err)
			dev_err(&xb->dev, "offering the ring failed: %d\n", err);
		break;
	case XenbusStateConnected:
		if (xb->state != XenbusStateInitialised)
			break;
		spin_lock_irq(&front->lock);
		if (front->link == PVDRM_LINK_WAITING)
			front->link = PVDRM_LINK_UP;
		spin_unlock_irq(&front->lock);
		xenbus_switch_state(xb, XenbusStateConnected);
		if (!front->drm_registered) {
			err = pvdrm_drm_register(front);
			if (err)
				dev_err(&xb->dev, "registering the DRM device failed: %d\n", err);
			else
				front->drm_registered = true;
		}
		dev_info(&xb->dev, "connected to backend %s (domain %d)\n", xb->otherend,
			 xb->otherend_id);
		break;
	case XenbusStateClosing:
	case XenbusStateClosed:
		if (xb->state == XenbusStateClosed)
			break;
		/* Fail every call first, then let go of the ring (the backend unmapped it). */
		spin_lock_irq(&front->lock);
		pvdrm_break_locked(front, NULL);
		spin_unlock_irq(&front->lock);
		pvdrm_free_ring(front);
		if (front->drm_registered)
			pvdrm_drm_unplug(front);
		xenbus_frontend_closed(xb);
		break;
	}
	mutex_unlock(&front->xb_mutex);
}

static int pvdrm_probe(struct xenbus_device *xb, const struct xenbus_device_id *id)
{
	struct pvdrm_front *front;
	struct drm_device *drm;
	unsigned int i;

	pvdrm_wire_check();
	/* The DRM device owns the frontend's memory: open files keep both alive after remove. */
	front = kzalloc(sizeof(*front), GFP_KERNEL);
	if (!front)
		return -ENOMEM;
	front->xb = xb;
	spin_lock_init(&front->lock);
	init_waitqueue_head(&front->slot_wq);
	mutex_init(&front->xb_mutex);
	INIT_WORK(&front->broken_work, pvdrm_broken_work);
	for (i = 0; i < PVDRM_RING_SLOTS; i++)
		init_completion(&front->slots[i].done);
	front->link = PVDRM_LINK_DOWN;
	front->ring_ref = INVALID_GRANT_REF;
	atomic64_set(&front->requests, 0);

	drm = pvdrm_drm_create(front);	/* owns front from here on, also when it fails */
	if (IS_ERR(drm))
		return PTR_ERR(drm);
	front->drm = drm;
	dev_set_drvdata(&xb->dev, front);
	return 0;
}

static void pvdrm_remove(struct xenbus_device *xb)
{
	struct pvdrm_front *front = dev_get_drvdata(&xb->dev);

	mutex_lock(&front->xb_mutex);
	if (front->drm_registered)
		pvdrm_drm_unplug(front);
	pvdrm_free_ring(front);
	mutex_unlock(&front->xb_mutex);
	cancel_work_sync(&front->broken_work);
	dev_info(&xb->dev, "removed after %lld requests\n",
		 (long long)atomic64_read(&front->requests));
	/* front itself goes with the DRM device's last reference (pvdrm_drv.c). */
	drm_dev_put(front->drm);
}

static const struct xenbus_device_id pvdrm_ids[] = {
	{ "vgpu-drm" },
	{ "" }
};

static struct xenbus_driver pvdrm_xenbus_driver = {
	.ids = pvdrm_ids,
	.probe = pvdrm_probe,
	.remove = pvdrm_remove,
	.otherend_changed = pvdrm_backend_changed,
	.not_essential = true,
};

static int __init pvdrm_init(void)
{
	int err;

	if (!xen_domain())
		return -ENODEV;
	err = pvdrm_drm_init();
	if (err)
		return err;
	err = xenbus_register_frontend(&pvdrm_xenbus_driver);
	if (err)
		pvdrm_drm_exit();
	return err;
}

static void __exit pvdrm_exit(void)
{
	xenbus_unregister_driver(&pvdrm_xenbus_driver);
	pvdrm_drm_exit();
}

module_init(pvdrm_init);
module_exit(pvdrm_exit);

MODULE_DESCRIPTION("gpuvm PVDRM frontend: nouveau's DRM ioctls over a Xen ring");
MODULE_LICENSE("Dual MIT/GPL");
MODULE_ALIAS("xen:vgpu-drm");
