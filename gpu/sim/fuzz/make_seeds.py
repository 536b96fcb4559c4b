#!/usr/bin/env python3
"""Writes the seed corpora of the device fuzz targets (gpu_sim_pushbuf_fuzz, gpu_sim_registers_fuzz).

Run from the repository root: python3 gpu/sim/fuzz/make_seeds.py. The addresses and methods match
gpu/sim/fuzz/fuzz_world.h and gpu/hw/*.h.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA, SYS, RO, PRIV, LARGE = 0x1000000, 0x1100000, 0x1200000, 0x1300000, 0x1400000


def inc(subc, method, data):
    return [(1 << 29) | (len(data) << 16) | (subc << 13) | (method >> 2)] + list(data)


def noninc(subc, method, data):
    return [(3 << 29) | (len(data) << 16) | (subc << 13) | (method >> 2)] + list(data)


def imm(subc, method, value):
    return [(4 << 29) | (value << 16) | (subc << 13) | (method >> 2)]


def release(va, value, short=True):
    return inc(0, 0x10, [va >> 32, va & 0xffffffff, value, 2 | ((1 << 24) if short else 0)])


def acquire(va, value, op=1):
    return inc(0, 0x10, [va >> 32, va & 0xffffffff, value, op])


def pushbuf_seed(name, control, words, raw_ib=None):
    blob = bytes([control])
    if raw_ib is not None:
        blob += struct.pack('<II', *raw_ib)
    blob += struct.pack('<%dI' % len(words), *words)
    d = os.path.join(HERE, 'gpu_sim_pushbuf_fuzz')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(blob)


copy = (inc(4, 0, [0x90b5]) + inc(4, 0x240, [0, SYS, 0x77]) +
        inc(4, 0x400, [0, DATA, 0, LARGE + 0x100]) + inc(4, 0x418, [0x3000]) +
        inc(4, 0x300, [0x181 | (1 << 3) | (1 << 5)]) + release(SYS + 16, 5) +
        release(DATA + 32, 6, False) + imm(0, 0x50, 42) + inc(0, 0x20, [0]))
pushbuf_seed('copy_semaphore', 0, copy)
pushbuf_seed('copy_faults', 2, inc(4, 0, [0x90b5]) + inc(4, 0x400, [0, PRIV, 0, RO]) +
             inc(4, 0x418, [0x100]) + inc(4, 0x300, [0x181]))
m2mf = (inc(2, 0, [0x9039]) + inc(2, 0x238, [0, DATA + 4]) + inc(2, 0x31c, [10, 1]) +
        inc(2, 0x300, [0x111]) + noninc(2, 0x304, [0x03020100, 0x07060504, 0x0908]) +
        inc(2, 0x30c, [0, SYS, 16, 32, 8, 2]) + inc(2, 0x238, [0, LARGE]) +
        inc(2, 0x32c, [0, DATA + 0x100, 0xabcd]) + inc(2, 0x300, [0x2110]))
pushbuf_seed('m2mf', 1, m2mf)
compute = (inc(1, 0, [0x90c0]) + inc(1, 0x238, [(3 << 16) | 2, 1]) + inc(1, 0x3ac, [32, 1]) +
           inc(1, 0x1608, [0, DATA]) + inc(1, 0x3b4, [0x40]) +
           inc(1, 0x2380, [256, 0, DATA + 0x200, 0]) + inc(1, 0x2390, [1, 2, 3]) +
           inc(1, 0x1694, [1]) + inc(1, 0x1698, [1]) + inc(1, 0x368, [0]) +
           inc(1, 0x1b00, [0, SYS + 0x40, 9, 1 << 28]))
pushbuf_seed('compute', 0, compute)
sync = (release(DATA, 1) + acquire(DATA, 1) + acquire(DATA, 1, 4) + acquire(DATA, 1, 8) +
        [7 << 29] + release(DATA, 2))
pushbuf_seed('semaphores', 3, sync)
pushbuf_seed('raw_ib', 8, release(SYS, 3), raw_ib=(DATA, 4 << 10))
pushbuf_seed('bad_headers', 0, [6 << 29, 0x00040100, (2 << 29)])


def reg(bar, write, width, selector, offset, value):
    barbits = {0: 0, 1: 1, 3: 2}[bar]
    widthbits = {1: 0, 2: 1, 4: 2, 8: 3}[width]
    op = barbits | (4 if write else 0) | (widthbits << 3) | (selector << 5)
    return struct.pack('<BIQ', op, offset, value)


def registers_seed(name, records):
    d = os.path.join(HERE, 'gpu_sim_registers_fuzz')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(b''.join(records))


RUN = reg(0, False, 1, 7, 0, 0)
registers_seed('identity_and_interrupts', [
    reg(0, False, 4, 0, 0, 0), reg(0, True, 4, 0, 0x140, 3), reg(0, True, 4, 0, 0x100, 1 << 31),
    reg(0, True, 4, 0, 0x640, 0), reg(0, True, 4, 0, 0x100, 0), reg(0, True, 4, 0, 0x200, 0),
    RUN, reg(0, True, 4, 0, 0x200, 0xffffffff)])
registers_seed('mmu', [
    reg(0, True, 4, 4, 0x00, 1), reg(0, True, 4, 4, 0x38, 0x100), reg(0, True, 4, 4, 0x3c, 0x80000001),
    reg(0, True, 4, 4, 0x3c, 0x80000002), reg(0, False, 4, 4, 0x00, 0), reg(0, True, 4, 4, 0x00, 0)])
registers_seed('pramin_and_bars', [
    reg(0, True, 4, 1, 0x00, 0x1), reg(0, True, 8, 5, 0x200, 0x1000), reg(0, True, 4, 5, 0x208, 0xfffff),
    reg(0, True, 4, 1, 0x14, 0x80000010), reg(3, True, 4, 0, 0x1000, 7), reg(3, False, 8, 0, 0xffc, 0),
    reg(1, True, 4, 0, 0x1000000 + 0x108c, 1), RUN])
registers_seed('channel_table', [
    reg(0, True, 4, 2, 0x1008, 0xc0000123), reg(0, True, 4, 2, 0x100c, 0x1f0001),
    reg(0, True, 4, 2, 0x270, 0x20), reg(0, True, 4, 2, 0x274, 0x1f00003),
    reg(0, True, 4, 2, 0x634, 1), RUN, reg(0, False, 4, 2, 0x100, 0), reg(0, True, 4, 2, 0x100, ~0 & 0xffffffff),
    reg(0, True, 4, 2, 0x59c, 0xffffffff), reg(0, True, 4, 3, 0x108, 0xffffffff)])
registers_seed('kick_user_page', [
    reg(1, True, 4, 0, 0x1000000 + 0x1000 + 0x8c, 3), RUN, reg(1, False, 4, 0, 0x1000000 + 0x1088, 0)])
# The PGRAPH trap chain and the kick: acknowledge in nouveau's order, read back, kick and poll.
registers_seed('pgraph_trap_and_kick', [
    reg(0, True, 4, 6, 0x40013c, 0xffffffff), RUN, RUN,
    reg(0, False, 4, 6, 0x400100, 0), reg(0, False, 4, 6, 0x409b00, 0),
    reg(0, False, 4, 6, 0x504648, 0), reg(0, False, 4, 6, 0x504650, 0), reg(0, False, 4, 6, 0x504508, 0),
    reg(0, True, 4, 6, 0x504648, 0), reg(0, True, 4, 6, 0x504650, 0xffffffff),
    reg(0, True, 4, 6, 0x502c90, 0xffffffff), reg(0, True, 4, 6, 0x400118, 0xffffffff),
    reg(0, True, 4, 6, 0x400108, 0xffffffff), reg(0, True, 4, 6, 0x400100, 0xffffffff),
    reg(0, False, 4, 2, 0x640, 0), reg(0, False, 4, 2, 0x790, 0),
    reg(0, True, 4, 2, 0x634, 0), reg(0, False, 4, 2, 0x634, 0), RUN, reg(0, False, 4, 2, 0x634, 0),
    reg(0, False, 4, 3, 0x120, 0), reg(0, True, 4, 3, 0x108, 0xffffffff), reg(0, False, 4, 3, 0x120, 0)])
