#!/usr/bin/env python3
"""Writes the seeds of aggregator_session_fuzz (aggregator_session_fuzz.cc explains the record format).

Messages are encoded as docs/IPC.md specifies (16-byte header, little-endian payloads). Run from
anywhere: python3 aggregator/fuzz/make_seeds.py
"""
import os
import struct

MAGIC = 0x4D445647
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aggregator_session_fuzz")


def message(mtype, seq, payload):
    return struct.pack("<IHHII", MAGIC, mtype, 0, seq, 16 + len(payload)) + payload


def name(text):
    return text.encode().ljust(32, b"\0")


def hello(seq, min_version=5, max_version=5):
    return message(0x0001, seq, struct.pack("<HHI", min_version, max_version, 0) + name("gpuvm-dm"))


# session_fuzz.cc registers this token for domain 1 before every input.
FUZZ_TOKEN = bytes([0x5A] * 32)


def auth(seq, token=FUZZ_TOKEN):
    return message(0x0009, seq, token)


def vm_config(seq, domid=1, ram=1 << 20):
    payload = struct.pack("<HBBIQQQQ", domid, 1, 1, 2, ram, 16 << 20, 128 << 20, 64 << 20)
    return message(0x0003, seq, payload + name("fuzz"))


def guest_memory(seq, ram=1 << 20):
    return message(0x0005, seq, struct.pack("<B7xQ", 1, ram))


def fast_lane(seq):
    return message(0x0007, seq, struct.pack("<II", 1, 0))


def mmio_read(seq, bar, size, offset, vcpu=0):
    return message(0x0010, seq, struct.pack("<BBHIQ", bar, size, 0, vcpu, offset))


def mmio_write(seq, bar, size, offset, value, vcpu=0):
    return message(0x0012, seq, struct.pack("<BBHIQQ", bar, size, 0, vcpu, offset, value))


def mmio_write_block(seq, bar, size, offset, data, vcpu=0):
    count = len(data) // size
    return message(0x0014, seq, struct.pack("<BBHIQ", bar, size, count, vcpu, offset) + data)


def mmio_write_fill(seq, bar, size, count, offset, value, vcpu=0):
    return message(0x0017, seq, struct.pack("<BBHIQIIQ", bar, size, 0, vcpu, offset, count, 0, value))


def mmio_read_block(seq, bar, size, count, offset, vcpu=0):
    return message(0x0015, seq, struct.pack("<BBHIQ", bar, size, count, vcpu, offset))


def ping(seq):
    return message(0x00F3, seq, struct.pack("<Q", 7))


def teardown(seq):
    return message(0x00F1, seq, struct.pack("<II", 0, 0))


def record(op, data):
    return struct.pack("<BH", op, len(data)) + data


def handshake():
    return (
        record(0, hello(1))
        + record(0, auth(2))
        + record(0, vm_config(3))
        + record(1, guest_memory(4))
    )


SEEDS = {
    "handshake_only": handshake(),
    "registers": handshake()
    + record(0, mmio_write(4, 0, 4, 0x1700, 0x10))
    + record(0, mmio_read(5, 0, 4, 0x700040))
    + record(0, mmio_read(6, 0, 4, 0x0))
    + record(0, ping(7))
    + record(0, teardown(8)),
    "fast_lane": handshake()
    + record(1, fast_lane(4))
    + record(2, mmio_write(5, 0, 4, 0x1700, 0x1))
    + record(2, mmio_read(6, 0, 4, 0x1700))
    + record(2, ping(7)),
    "interrupt": handshake()
    + record(0, mmio_write(4, 0, 4, 0x140, 1))
    + record(0, mmio_write(5, 0, 4, 0x2140, 1))
    + record(0, mmio_write(6, 0, 4, 0x3000, 0xBFFFFFFF))
    + record(3, b"")
    + record(0, mmio_write(7, 0, 4, 0x2100, 1))
    + record(3, b""),
    "out_of_turn": record(0, mmio_read(1, 0, 4, 0)) + handshake(),
    "no_auth": record(0, hello(1)) + record(0, vm_config(2)) + record(1, guest_memory(3)),
    "wrong_token": record(0, hello(1)) + record(0, auth(2, bytes(range(32)))) + record(0, vm_config(3)),
    "other_domain": record(0, hello(1)) + record(0, auth(2)) + record(0, vm_config(3, domid=2)),
    "old_version": record(0, hello(1, min_version=1, max_version=4)) + record(0, vm_config(2)),
    "mmio_before_auth": record(0, hello(1)) + record(0, mmio_write(2, 0, 4, 0x1700, 0x10)),
    "bad_access": handshake()
    + record(0, mmio_read(4, 3, 8, (64 << 20) - 4))
    + record(0, mmio_write(5, 1, 1, 0x123, 0xFF, vcpu=9)),
    "blocks": handshake()
    + record(0, mmio_write(4, 0, 4, 0x1700, 0x2))
    + record(0, mmio_write_block(5, 0, 8, 0x700100, bytes(range(64))))
    + record(0, mmio_read_block(6, 0, 4, 16, 0x700100))
    + record(1, fast_lane(7))
    + record(2, mmio_write_block(8, 1, 1, 0x10, bytes(range(40))))
    + record(2, mmio_read_block(9, 3, 8, 60, 0x1000)),
    "fills": handshake()
    + record(0, mmio_write(4, 0, 4, 0x1700, 0x2))
    + record(0, mmio_write_fill(5, 0, 4, 16, 0x700100, 0xA5A5A5A5))
    + record(0, mmio_read_block(6, 0, 4, 16, 0x700100))
    + record(1, fast_lane(7))
    + record(2, mmio_write_fill(8, 3, 8, 4096, 0x2000, 0))
    + record(2, mmio_write_fill(9, 3, 8, 2, (64 << 20) - 8, 0)),
    "wrong_memory": record(0, hello(1))
    + record(0, auth(2))
    + record(0, vm_config(3))
    + record(5, guest_memory(4)),
}

os.makedirs(OUT, exist_ok=True)
for seed_name, data in SEEDS.items():
    with open(os.path.join(OUT, seed_name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(SEEDS), OUT))
