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
rank.

Hybrid (meta-R.txt per rank, tests/onebit_hybrid.sh): the same replay once per replica group (the
ranks holding the same pieces: one shard index, R = world / S ranks ordered by their replica rank),
its N = R workers being those ranks with their pieces: each one's gradient is its shard group's
reduced piece (the group's share of the sum; R times it the group's mean), the momentum pieces
averaged by the compressed all-reduce across the group, the pieces updated. The replicas must start
the first compressed step from the same state (checked too).
onebit_ref.py --pieces HYBRID_DIR DDP_DIR STEP: the hybrid dump's gradient pieces of compressed step
STEP against the shard groups' sums of a ddp dump's own gradients (same ranks, data, warm-up).
Prints one line per check; exit 0 when all match, 1 otherwise."""
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


def replay(d, N, F, steps, hyper, params, s0, ranks):
    """N workers (the dump's ranks `ranks`, in worker order) from state s0 over params [(numel,
    decay)]: the final parameters, momentum, worker errors (per worker) and server errors (per block)"""
    lr, b1, b2, eps, wd, bc = hyper
    n = sum(p[0] for p in params)
    assert s0.size == 3 * n, (s0.size, n)
    p, m, v = s0[:n].copy(), s0[n:2 * n].copy(), s0[2 * n:].copy()
    werr = [np.zeros(n, f32) for _ in range(N)]
    cnt = even_counts(n, N)
    serr = [np.zeros(c, f32) for c in cnt]
    wdv = np.concatenate([np.full(k, wd if dec else f32(0), f32) for k, dec, *_ in params] + [np.zeros(0, f32)])
    a1 = f32(1) - b1
    gs = f32(N)  # clip_coef 1 x N / loss scale 1
    for s in range(F, steps):
        t = s + 1
        ms = []
        for r in ranks:
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
    return p, m, werr, serr


def check(d, r, want):
    """final-r.bin against want [(name, array)]: 0 when every array matches to the bit"""
    bad = 0
    fin = np.fromfile(os.path.join(d, "final-%d.bin" % r), f32)
    at = 0
    for name, ref in want:
        got = fin[at:at + ref.size]
        at += ref.size
        same = got.size == ref.size and np.array_equal(got.view(np.uint32), ref.view(np.uint32))
        if same:
            print("ok   rank %d %s: %d floats bit for bit (max |x| %.3g)" % (r, name, ref.size,
                                                                       float(np.abs(ref).max()) if ref.size else 0.0))
        else:
            diff = np.abs(got.astype(np.float64) - ref) if got.size == ref.size else None
            print("FAIL rank %d %s: %s" % (r, name, "size %d vs %d" % (got.size, ref.size) if diff is None else
                                            "%d of %d differ, max |diff| %.3g" % (int((got != ref).sum()), ref.size, diff.max())))
            bad = 1
    if at != fin.size:
        print("FAIL rank %d final file: %d floats, the reference %d" % (r, fin.size, at))
        bad = 1
    return bad


def read_meta(path, nhead):
    head, *rows = open(path).read().split("\n")
    h = head.split()
    ints = [int(v) for v in h[:nhead]]
    lr, b1, b2, eps, wd = (f32(float(v)) for v in h[nhead:nhead + 5])
    bc = int(h[nhead + 5])
    params = [tuple(int(v) for v in r.split()) for r in rows if r.strip()]
    return ints, (lr, b1, b2, eps, wd, bc), params


def main_ddp(d):
    (N, F, steps), hyper, params = read_meta(os.path.join(d, "meta.txt"), 3)
    s0 = np.fromfile(os.path.join(d, "state0.bin"), f32)
    p, m, werr, serr = replay(d, N, F, steps, hyper, params, s0, list(range(N)))
    bad = 0
    for r in range(N):
        want = [("parameters", p), ("exp_avg", m)]
        if N > 1:
            want += [("worker error", werr[r]), ("server error", serr[r])]
        bad |= check(d, r, want)
    return bad


def main_hybrid(d):
    metas = {}
    r = 0
    while os.path.exists(os.path.join(d, "meta-%d.txt" % r)):
        metas[r] = read_meta(os.path.join(d, "meta-%d.txt" % r), 6)
        r += 1
    world = len(metas)
    (N, S, R, _, F, steps), hyper, _ = metas[0]
    assert N == world and S * R == N, (N, S, R, world)
    bad = 0
    for shard in range(S):  # a replica group: the ranks holding shard `shard`'s pieces, consecutive shard groups
        ranks = sorted((r for r in range(world) if r % S == shard), key=lambda r: metas[r][0][3])
        if [metas[r][0][3] for r in ranks] != list(range(R)):
            print("FAIL shard %d: replica ranks %s" % (shard, [metas[r][0][3] for r in ranks]))
            bad = 1
            continue
        params = metas[ranks[0]][2]
        s0s = [np.fromfile(os.path.join(d, "state0-%d.bin" % r), f32) for r in ranks]
        if any(not np.array_equal(x.view(np.uint32), s0s[0].view(np.uint32)) for x in s0s):
            print("FAIL shard %d: the replicas %s start the compressed steps from different states" % (shard, ranks))
            bad = 1
            continue
        p, m, werr, serr = replay(d, R, F, steps, hyper, params, s0s[0], ranks)
        group_bad = 0
        for k, r in enumerate(ranks):
            want = [("parameters", p), ("exp_avg", m)]
            if R > 1:
                want += [("worker error", werr[k]), ("server error", serr[k])]
            group_bad |= check(d, r, want)
        if not group_bad:
            print("ok   replica group of shard %d: ranks %s, %d floats each" % (shard, ranks, p.size))
        bad |= group_bad
    return bad


def main_pieces(hd, dd, step):
    """The hybrid run's gradient pieces of its first compressed step (index `step`) against the ddp
    run's own gradients of the same step on the same ranks and data (both runs' warm-ups are AdamW's
    bits, so the parameters are the same there): each piece must be its shard group's ranks' own
    gradients summed in fp32 (rank order), on the piece's elements, to the bit; and the replicas'
    pieces must differ (the replica all-reduce was skipped)."""
    (N, _, _), _, full = read_meta(os.path.join(dd, "meta.txt"), 3)
    foff = np.concatenate([[0], np.cumsum([k for k, *_ in full])]).astype(int)
    own = [np.fromfile(os.path.join(dd, "grad-%d-%d.bin" % (step, r)), f32) for r in range(N)]
    bad = 0
    pieces = {}
    for r in range(N):
        (_, S, _, _, _, _), _, params = read_meta(os.path.join(hd, "meta-%d.txt" % r), 6)
        group = [q for q in range(N) if q // S == r // S]
        total = own[group[0]].copy()
        for q in group[1:]:
            total = (total + own[q]).astype(f32)
        want = np.concatenate([total[foff[i] + b:foff[i] + b + k] for i, (k, _, b) in enumerate(params)] + [np.zeros(0, f32)])
        got = np.fromfile(os.path.join(hd, "grad-%d-%d.bin" % (step, r)), f32)
        pieces[r] = got
        if got.size == want.size and np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            print("ok   rank %d: its gradient piece = ranks %s's own gradients summed, %d floats bit for bit" % (r, group, got.size))
        else:
            print("FAIL rank %d: its gradient piece is not ranks %s's own gradients summed" % (r, group))
            bad = 1
        for q in range(r):
            if q % S == r % S and np.array_equal(pieces[q], got):
                print("FAIL ranks %d and %d (replicas) hold the same gradient piece: reduced across the replicas?" % (q, r))
                bad = 1
    return bad


def main():
    if sys.argv[1] == "--pieces":
        sys.exit(main_pieces(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    d = sys.argv[1]
    hybrid = os.path.exists(os.path.join(d, "meta-0.txt"))
    sys.exit(main_hybrid(d) if hybrid else main_ddp(d))


if __name__ == "__main__":
    main()
