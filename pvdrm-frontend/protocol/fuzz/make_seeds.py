#!/usr/bin/env python3
"""Writes the seeds of pvdrm_request_fuzz (docs/PVDRM.md): one valid request slot per kind of
payload, laid out as protocol/wire.h says (120 bytes: id u64, file u32, op u16, reserved u16,
104 payload bytes), and a pushbuf followed by its data page."""
import os
import struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pvdrm_request_fuzz")
os.makedirs(here, exist_ok=True)


def slot(op, payload=b"", ident=1, file=1):
    assert len(payload) <= 104
    return struct.pack("<QIHH", ident, file, op, 0) + payload + bytes(104 - len(payload))


def page_list(nr_pages, indirect):
    return struct.pack("<II", nr_pages, len(indirect)) + b"".join(
        struct.pack("<I", r) for r in indirect + [0] * (8 - len(indirect)))


seeds = {
    "file_open": slot(0x0001),
    "getparam": slot(0x0200, struct.pack("<QQ", 11, 0)),
    "channel_alloc": slot(0x0202, struct.pack("<II", 0xbeef0001, 0xbeef0002) + bytes(80)),
    "grobj_alloc": slot(0x0204, struct.pack("<iIi", 1, 0xcafe, 0x90c0)),
    # gem_info {handle, domain, size, offset, map_handle, tile_mode, tile_flags} + channel_hint, align
    "gem_new_gart": slot(0x0240, struct.pack("<IIQQQII", 0, 4, 3 * 4096, 0, 0, 0, 0) +
                         struct.pack("<II", 0, 4096) + page_list(1, [42])),  # 1 frame-list page
    "gem_new_vram": slot(0x0240, struct.pack("<IIQQQII", 0, 2, 1 << 20, 0, 0, 0, 0) +
                         struct.pack("<II", 0, 0) + page_list(0, [])),
    "cpu_prep": slot(0x0242, struct.pack("<II", 5, 1)),
    "unknown_op": slot(0x0207),
}
# pushbuf {channel, nr_buffers, buffers, nr_relocs, nr_push, relocs, push, suffix0, suffix1,
# vram_available, gart_available}: 2 bos, 1 reloc, 1 push in one data page.
pushbuf = struct.pack("<IIQIIQQIIQQ", 1, 2, 0, 1, 1, 0, 0, 0, 0, 0, 0) + page_list(1, [43])
bo = struct.pack("<QIIIIIIQ", 0, 7, 2, 0, 2, 0, 0, 0)
reloc = struct.pack("<7I", 1, 0, 0, 1, 0, 0, 0)
push = struct.pack("<IIQQ", 1, 0, 0, 256)
data = bo + bo + reloc + bytes(4) + push  # relocs end at 108: push at 112
seeds["pushbuf"] = slot(0x0241, pushbuf) + data + bytes(4096 - len(data))

for name, body in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(body)
