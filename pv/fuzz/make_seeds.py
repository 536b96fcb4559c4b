#!/usr/bin/env python3
"""Writes the seeds of pv_call_page_fuzz (batches laid out as docs/PARAVIRT.md specifies) and the
pv seed of aggregator_fv_fuzz.

Run from anywhere: python3 pv/fuzz/make_seeds.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pv_call_page_fuzz")
MAGIC = 0x42435650


def op(code, payload):
    return struct.pack("<HHIII", code, 0, 16 + len(payload), 0, 0) + payload


def attach(directory, limit, kind):
    return op(1, struct.pack("<QQII", directory, limit, kind, 0))


def detach(directory):
    return op(2, struct.pack("<Q", directory))


def write(space, table, first, entries):
    return op(3, struct.pack("<QQQII", space, table, first, len(entries), 0) +
              b"".join(struct.pack("<Q", e) for e in entries))


def write_linear(space, table, first, count, value, step):
    return op(4, struct.pack("<QQQIIQQ", space, table, first, count, 0, value, step))


def clear(space, table, first, count):
    return op(5, struct.pack("<QQQII", space, table, first, count, 0))


def flush(space):
    return op(6, struct.pack("<Q", space))


def bar_write(bar, offset, data):
    return op(7, struct.pack("<QII", offset, bar, len(data)) + data + b"\0" * ((-len(data)) % 8))


def bar_fill(bar, offset, length, pattern):
    return op(8, struct.pack("<QIIII", offset, bar, length, pattern, 0))


def batch(*ops):
    body = b"".join(ops)
    return struct.pack("<IHHIIIIQ", MAGIC, 1, 0, len(ops), 32 + len(body), 0, 0, 0) + body


def pte(address, target=0):
    return 1 | ((address >> 12) << 4) | (target << 33) | ((1 << 32) if target == 2 else 0)


def pde(large, small, pt_size=0):
    return (1 if large else 0) | (pt_size << 2) | ((large >> 12) << 4) | \
        ((1 << 32) if small else 0) | ((small >> 12) << 36)


PD = 0x100000
SEEDS = {
    "every_op": batch(attach(PD, (1 << 40) - 1, 0),
                      write(PD, PD, 288, [pde(0x120000, 0x140000)]),
                      write(PD, 0x140000, 0, [pte(0x200000), pte(0x201000), pte(0x4000, 2)]),
                      write_linear(PD, 0x120000, 0, 8, pte(0x400000), 1 << 21),
                      clear(PD, 0x140000, 1, 2), flush(PD), detach(PD)),
    "bar3_bootstrap": batch(attach(0x200000, (64 << 20) - 1, 3),
                            write(0x200000, 0x180000, 34, [pte(0x300000 + i * 4096)
                                                           for i in range(256)]),
                            flush(0x200000)),
    "bar_stores": batch(bar_fill(3, 0x10000, 4096, 0), bar_write(3, 0x10200, bytes(range(12))),
                        bar_write(0, 0x1700, struct.pack("<I", 0x10)),
                        bar_fill(1, 0x1000, 0x1000, 0x01010101)),
    "naive_one_op": batch(flush(PD)),
    "bad_kind": batch(attach(PD, 0, 2)),
    "foreign_vram": batch(write(PD, 0x140000, 0, [pte(1 << 39)])),
}


# aggregator_fv_fuzz (aggregator/fuzz/aggregator_fv_fuzz.cc) with a pv attacker: its call area holds
# the input's first bytes, so a seed is a batch, then a record ringing the doorbell with its length
# (op 4 | 32 | 64), padded so that the size picks pv-multicall (size % 4 == 3).
FV_FUZZ_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "aggregator",
                           "fuzz", "aggregator_fv_fuzz")


def fv_fuzz_pv_seed():
    b = batch(attach(PD, (1 << 40) - 1, 0), write(PD, PD, 0, [pde(0, 0x140000)]),
              write(PD, 0x140000, 0, [pte(0x10000), pte(1 << 30)]), flush(PD))
    data = b + b"\0" * ((-len(b)) % 12)
    data += struct.pack("<BBHII", 4 | 32 | 64, 0, 0, 0, len(b))
    while len(data) % 4 != 3:
        data += b"\0"
    return data


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    with open(os.path.join(FV_FUZZ_OUT, "pv_calls"), "wb") as f:
        f.write(fv_fuzz_pv_seed())


if __name__ == "__main__":
    main()
