#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Writes the seed corpus of the stream fuzzer, fuzz/corpus/stream/: small
# valid record streams (include/uapi/plabel_uapi.h) covering every record
# type, frame-pointer and dwarf samples, and a few near misses.
#   python3 fuzz/stream_seeds.py [DIR]
import os
import struct
import sys

STREAM, LABELSET, SAMPLE, THREAD, LOST, MMAP, EXEC = range(1, 8)
OFFCPU, OFFCPU_END = 16, 17
ALLOC, FREE = 18, 19
LOST_FREES = 16


def rec(rtype, body):
    size = 8 + len(body)
    pad = (-size) % 8
    return struct.pack("<II", rtype, size + pad) + body + b"\0" * pad


def stream(callchain=1, period=1000000):
    return rec(STREAM, struct.pack("<IIQQII", 1, callchain, period, 0, 2, 3))


def labelset(sid, kvs):
    body = struct.pack("<QII", sid, len(kvs), 0)
    body += b"".join(struct.pack("<II", len(k), len(v)) for k, v in kvs)
    body += b"".join(k + v for k, v in kvs)
    return rec(LABELSET, body)


def sample(rtype, sid, pid, kips, uips, regs=None, stack=b"", flags=None,
           time=1000, tid=None, cpu_ns=None, ctx=None):
    """A SAMPLE or THREAD record; cpu_ns sets PLABEL_SAMPLE_CPUTIME; ctx,
    (format, flags, bytes), a thread context (PLABEL_SAMPLE_TLSCTX)."""
    if flags is None:
        flags = (0 if kips else 1) | (2 if regs else 0)
    if ctx is not None:
        flags |= 32
    if cpu_ns is not None:
        flags |= 8
        tail = struct.pack("<Q", cpu_ns)
    else:
        tail = struct.pack("<II", pid + 2 if rtype == THREAD else 0,
                           pid + 3 if rtype == THREAD else 0)
    body = struct.pack("<QQIIII", time, sid, pid,
                       pid + 1 if tid is None else tid, 0, flags) + tail
    body += struct.pack("<HHI", len(kips), len(uips), len(stack))
    body += b"".join(struct.pack("<Q", ip) for ip in kips + uips)
    if regs:
        body += b"".join(struct.pack("<Q", r) for r in regs) + stack
    if ctx is not None:
        body += b"\0" * ((-(8 + len(body))) % 8)
        body += struct.pack("<HHI", ctx[0], ctx[1], len(ctx[2])) + ctx[2]
    return rec(rtype, body)


def otel_rec(attrs, trace=bytes(range(1, 17)), span=bytes(range(161, 169))):
    """An OTEP 4947 record: head, then (key index, value) entries."""
    data = b"".join(struct.pack("<BB", k, len(v)) + v for k, v in attrs)
    return trace + span + struct.pack("<BBH", 1, 1, len(data)) + data


def cl_set(labels):
    """custom-labels v1 as the module copies it: u16 lengths, bytes."""
    return b"".join(struct.pack("<HH", len(k), len(v)) + k + v
                    for k, v in labels)


def lost(n, kind=0):
    return rec(LOST, struct.pack("<IIQ", 1, kind, n))


def alloc(sid, pid, addr, size, uips, time=1000, weight=524288):
    """An ALLOC record: a SAMPLE's fixed part, the block, the chain."""
    body = struct.pack("<QQIIII", time, sid, pid, pid, 0, 1)
    body += struct.pack("<Q", 0)
    body += struct.pack("<HHI", 0, len(uips), 0)
    body += struct.pack("<QQQQ", addr, size, size, weight)
    body += b"".join(struct.pack("<Q", ip) for ip in uips)
    return rec(ALLOC, body)


def free(pid, addr, time=2000):
    return rec(FREE, struct.pack("<QIIQ", time, pid, pid, addr))


def offcpu(sid, pid, tid, uips, time, kind, regs=None, stack=b"",
           flags=None):
    """An OFFCPU record: tid left its CPU at time, wait kind kind."""
    if flags is None:
        flags = 2 if regs else 0
    body = struct.pack("<QQIIIIII", time, sid, pid, tid, 0, flags, kind, 1)
    body += struct.pack("<HHI", 0, len(uips), len(stack))
    body += b"".join(struct.pack("<Q", ip) for ip in uips)
    if regs:
        body += b"".join(struct.pack("<Q", r) for r in regs) + stack
    return rec(OFFCPU, body)


def offcpu_end(pid, tid, out, end):
    return rec(OFFCPU_END, struct.pack("<QQIIII", end, out, pid, tid, 0, 0))


def mmap(pid, start, end, off, path):
    return rec(MMAP, struct.pack("<QIIQQQ", 5, pid, len(path), start, end,
                                 off) + path)


def execrec(pid, comm):
    return rec(EXEC, struct.pack("<QII16s", 7, pid, pid, comm))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/stream"
    os.makedirs(out, exist_ok=True)
    kip = 0xffffffff81000000
    seeds = {
        "fp": stream() + labelset(5, [(b"worker", b"alpha"),
                                      (b"tenant", b"acme")]) +
        mmap(42, 0x400000, 0x401000, 0, b"/bin/true") +
        sample(SAMPLE, 5, 42, [kip + 16, kip + 32], [0x400010, 0x400020]) +
        sample(SAMPLE, 5, 42, [], [0x400010]) + lost(3),
        "thread": stream() + labelset(9, [(b"phase", b"spawn")]) +
        sample(THREAD, 9, 42, [], [0x400100, 0x400200]) +
        execrec(42, b"true") +
        mmap(42, 0x500000, 0x501000, 0x1000, b"/usr/bin/env"),
        "dwarf": stream(callchain=2) +
        mmap(7, 0x400000, 0x402000, 0, b"/bin/true") +
        sample(SAMPLE, 0, 7, [], [0x400010],
               regs=[i * 8 for i in range(16)] + [0x400010],
               stack=struct.pack("<4Q", 0x400020, 0x400030, 0, 0x7ffd0000)),
        # the same sample twice (the unwinder's memo answers the second)
        # with a stack pointer of bit 63 set, as only a forged stream has
        "dwarf_high_sp": stream(callchain=2) +
        mmap(7, 0x400000, 0x402000, 0, b"/bin/true") +
        b"".join(sample(SAMPLE, 0, 7, [], [0x400010], time=1000 + i,
                        regs=[i * 8 for i in range(7)] +
                        [0xffff800000001000] + [0] * 8 + [0x400010],
                        stack=struct.pack("<4Q", 0x400020, 0x400030, 0,
                                          0x7ffd0000))
                 for i in range(2)),
        "unknown": rec(99, b"\1" * 24) + lost(1) + rec(LABELSET, b""),
        "unresolved": sample(SAMPLE, 77, 3, [], [0x1000, 0x2000]),
        # heap: a FREE before its ALLOC (another CPU's ring), an address
        # sampled twice, a FREE of a block never sampled, lost FREEs
        "heap": stream() + labelset(5, [(b"endpoint", b"alpha")]) +
        mmap(42, 0x400000, 0x401000, 0, b"/bin/true") +
        free(42, 0x10000, time=3000) +
        alloc(5, 42, 0x10000, 100, [0x400010, 0x400020], time=1000) +
        alloc(5, 42, 0x20000, 4000, [0x400030], time=1100) +
        alloc(0, 42, 0x20000, 64, [0x400030], time=4000) +
        free(42, 0x90000) + lost(2, LOST_FREES),
        # thread CPU times, two CPUs' records out of time order, a thread
        # created (tid 44) before its samples
        "cputime": stream() + labelset(5, [(b"worker", b"alpha")]) +
        mmap(42, 0x400000, 0x401000, 0, b"/bin/true") +
        sample(SAMPLE, 5, 42, [], [0x400010], time=3000, cpu_ns=2500) +
        sample(SAMPLE, 5, 42, [], [0x400010], time=5000, cpu_ns=4000) +
        sample(THREAD, 5, 42, [], [0x400100], time=1500) +
        sample(SAMPLE, 5, 42, [], [0x400020], time=2000, tid=44,
               cpu_ns=300) +
        sample(SAMPLE, 5, 42, [], [0x400010], time=1000, cpu_ns=1000) +
        sample(SAMPLE, 5, 42, [], [0x400020], time=4000, tid=44,
               cpu_ns=200),
        # waits: joined in order, END first, one short (no END), one END
        # whose OFFCPU record was lost
        "offcpu": stream() + labelset(5, [(b"endpoint", b"/api/search")]) +
        mmap(42, 0x400000, 0x401000, 0, b"/bin/true") +
        offcpu(5, 42, 43, [0x400010, 0x400020], 1000, 1) +
        offcpu_end(42, 43, 1000, 31000) +
        offcpu_end(42, 44, 2000, 4000) +
        offcpu(5, 42, 44, [0x400030], 2000, 3,
               regs=[i * 8 for i in range(16)] + [0x400030],
               stack=struct.pack("<2Q", 0x400020, 0)) +
        offcpu(5, 42, 43, [0x400010], 40000, 2) +
        # fp mode's ip, sp and bp only (PLABEL_SAMPLE_FP_REGS)
        offcpu(5, 42, 44, [0x400030, 0x400020, 0x400010], 50000, 1,
               regs=[0x400030, 0x7ffd0000, 0x7ffd0010],
               stack=struct.pack("<4Q", 0x400020, 0, 0x7ffd0040, 0x400020),
               flags=2 | 16) +
        offcpu_end(42, 45, 500, 900),
        # thread contexts: OTel (no key map here: the span only; a cut
        # entry), custom-labels (a key twice, a control byte, partial),
        # a dwarf sample with its stack before the context
        "tlsctx": stream() + labelset(5, [(b"endpoint", b"alpha")]) +
        mmap(42, 0x400000, 0x401000, 0, b"/bin/true") +
        sample(SAMPLE, 5, 42, [], [0x400010],
               ctx=(1, 0, otel_rec([(0, b"/a"), (1, b"acme")]))) +
        sample(SAMPLE, 0, 42, [], [0x400010], time=1100,
               ctx=(1, 0, otel_rec([(0, b"/a")])[:-1])) +
        sample(SAMPLE, 5, 42, [], [0x400020], time=1200,
               ctx=(2, 1, cl_set([(b"job", b"x"), (b"job", b"y"),
                                  (b"bad", b"\x01"), (b"", b"e")]))) +
        sample(SAMPLE, 0, 42, [], [0x400010], time=1300,
               regs=[i * 8 for i in range(16)] + [0x400010],
               stack=b"\x10\x00\x40\x00\x00",
               ctx=(2, 0, cl_set([(b"endpoint", b"beta")]))),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
