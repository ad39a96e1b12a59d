#!/usr/bin/python3
"""onebit_ref.py DIR - 1-bit Adam after its warm-up, defined on one process in numpy float32, replayed
from what tests/tool_onebit_check.c dumped (tests/onebit.sh): N simulated workers, each with its own
gradient of each step (grad-S-R.bin), from the state of the first compressed step (state0.bin). Each
step: every worker's momentum m_r = b1 m + (1 - b1) (g_r N) (N: its share of the sum made its own
mean), the compressed all-reduce of docs/optimizer.md with every worker's error and every server's
error (the blocks of zt_comm_even_counts), then the update with v frozen. Every float32 operation
is written in the engine's order (src/optim/onebit_adam.c, src/comm/compressed_all_reduce.c, both
compiled without fused multiply-adds), the sums of squares in float64 over the same 8 lanes, so the
engine's result must match bit for bit: final-R.bin's parameters, momentum and both errors of every
rank. Prints one line per check; exit 0 when all match, 1 otherwise."""
import ctypes
import os
import sys

import numpy as np

f32 = np.float32
# the C library's powf, as the engine's constants take it (numpy's float32 power differs by an ulp
# at some exponents)
_libm = ctypes.CDLL("libm.so.6")
_libm.powf.restype = ctypes.c_float
_libm.powf.argtypes = [ctypes.c_float, ctypes.c_float]


def powf(b, t):
    return f32(_libm.powf(float(b), float(t)))


def rms_scale(x):
    """||x|| / sqrt(n): squares in float64 summed in 8 lanes (sequentially), lanes combined pairwise,
    the tail added in order, rounded to float32 once."""
    n = x.size
    if n == 0:
        return f32(0)
    x = x.astype(np.float64)
    k = n // 8 * 8
    lanes = np.cumsum((x[:k] * x[:k]).reshape(-1, 8), axis=0)[-1] if k else np.zeros(8)
    s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    for v in x[k:]:
        s += v * v
    return f32(np.sqrt(s) / np.sqrt(np.float64(n)))


def compress(x, scale):
    """sign(x) (+1 for x >= 0, -0, NaN), error = x - scale sign(x)"""
    pos = ~(x < 0)
    c = np.where(pos, scale, -scale).astype(f32)
    return pos, (x - c).astype(f32)


def even_counts(n, N):
    return [n // N + (1 if j < n % N else 0) for j in range(N)]


def compressed_all_reduce(bufs, werr, serr):
    """bufs[r], werr[r]: worker r's n floats; serr[j]: server j's block. Returns the common result."""
    N = len(bufs)
    n = bufs[0].size
    cnt = even_counts(n, N)
    off = np.concatenate([[0], np.cumsum(cnt)]).astype(int)
    signs, scales = [], []
    for r in range(N):
        x = (bufs[r] + werr[r]).astype(f32)
        s = rms_scale(x)
        pos, werr[r] = compress(x, s)
        signs.append(pos)
        scales.append(s)
    inv_n = f32(1) / f32(N)
    out = np.empty(n, f32)
    for j in range(N):
        lo, hi = off[j], off[j + 1]
        y = None
        for r in range(N):
            w = f32(scales[r] * inv_n)
            t = np.where(signs[r][lo:hi], w, -w).astype(f32)
            y = t if y is None else (y + t).astype(f32)
        y = (y + serr[j]).astype(f32)
        t = rms_scale(y)
        pos, serr[j] = compress(y, t)
        out[lo:hi] = np.where(pos, t, -t)
    return out


def main():
    d = sys.argv[1]
    head, *rows = open(os.path.join(d, "meta.txt")).read().split("\n")
    N, F, steps, lr, b1, b2, eps, wd, bc = head.split()
    N, F, steps, bc = int(N), int(F), int(steps), int(bc)
    lr, b1, b2, eps, wd = (f32(float(v)) for v in (lr, b1, b2, eps, wd))
    params = [tuple(int(v) for v in r.split()) for r in rows if r.strip()]
    n = sum(p[0] for p in params)
    s0 = np.fromfile(os.path.join(d, "state0.bin"), f32)
    assert s0.size == 3 * n, (s0.size, n)
    p, m, v = s0[:n].copy(), s0[n:2 * n].copy(), s0[2 * n:].copy()
    werr = [np.zeros(n, f32) for _ in range(N)]
    cnt = even_counts(n, N)
    serr = [np.zeros(c, f32) for c in cnt]
    wdv = np.concatenate([np.full(k, wd if dec else f32(0), f32) for k, dec in params])
    a1 = f32(1) - b1
    gs = f32(N)  # clip_coef 1 x N / loss scale 1
    for s in range(F, steps):
        t = s + 1
        ms = []
        for r in range(N):
            g = np.fromfile(os.path.join(d, "grad-%d-%d.bin" % (s, r)), f32)
            gi = (g * gs).astype(f32)
            ms.append(((b1 * m).astype(f32) + (a1 * gi).astype(f32)).astype(f32))
        m = compressed_all_reduce(ms, werr, serr) if N > 1 else ms[0]
        if bc:
            bc1 = f32(1) - powf(b1, t)
            bc2 = f32(1) - powf(b2, F) if F > 0 else f32(1)
            step = f32(lr / bc1)
            inv = f32(f32(1) / np.sqrt(bc2))
            decay = (f32(1) - (lr * wdv).astype(f32)).astype(f32)
            num = (step * m).astype(f32)
            den = ((np.sqrt(v) * inv).astype(f32) + eps).astype(f32)
            p = ((p * decay).astype(f32) - (num / den).astype(f32)).astype(f32)
        else:
            u = ((m / (np.sqrt(v) + eps).astype(f32)).astype(f32) + (wdv * p).astype(f32)).astype(f32)
            p = (p + (f32(-lr) * u).astype(f32)).astype(f32)
    bad = 0
    for r in range(N):
        fin = np.fromfile(os.path.join(d, "final-%d.bin" % r), f32)
        want = [("parameters", p), ("exp_avg", m)]
        if N > 1:
            want += [("worker error", werr[r]), ("server error", serr[r])]
        at = 0
        for name, ref in want:
            got = fin[at:at + ref.size]
            at += ref.size
            same = got.size == ref.size and np.array_equal(got.view(np.uint32), ref.view(np.uint32))
            if same:
                print("ok   rank %d %s: %d floats bit for bit (max |x| %.3g)" % (r, name, ref.size, float(np.abs(ref).max())))
            else:
                diff = np.abs(got.astype(np.float64) - ref) if got.size == ref.size else None
                print("FAIL rank %d %s: %s" % (r, name, "size %d vs %d" % (got.size, ref.size) if diff is None else
                                                "%d of %d differ, max |diff| %.3g" % (int((got != ref).sum()), ref.size, diff.max())))
                bad = 1
        if at != fin.size:
            print("FAIL rank %d final file: %d floats, the reference %d" % (r, fin.size, at))
            bad = 1
    sys.exit(bad)


if __name__ == "__main__":
    main()
