#!/usr/bin/python3
# gguf_kquant.py LIBZEROTRAIN LIBGGML_BASE [FILE.gguf...] [--pair F32.gguf K.gguf]... - zerotrain's
# k-quant blocks (q4_k, q5_k, q6_k: src/ckpt/gguf_kquant.c) against llama.cpp's own reference
# quantizers in the prebuilt libggml-base.so of node-llama-cpp (quantize_row_q{4,5,6}_K_ref, the
# code llama-quantize runs without an importance matrix; dequantize_row_q{4,5,6}_K), through ctypes:
# the bytes of every block equal, and the decoded floats equal bit for bit, on
#   - every f32 matrix of the given GGUF files (a trained model's real weights, taken flat; its
#     first 16,384 elements: 64 super-blocks),
#   - random data at several scales (normal, uniform, heavy-tailed, all positive, all negative),
#   - edge cases: all-zero blocks, constant blocks (positive, negative), one huge value among small
#     ones, values near fp16's smallest normal, a single non-zero element, alternating signs;
# and with --pair, every k-quant tensor of K.gguf (`export --type q4_k`: the whole path, Llama's
# q/k permutation and the LM head's q6_k included) byte for byte llama.cpp's quantization of the
# same tensor of F32.gguf (the f32 export of the same weights; the first 2,048 super-blocks of each:
# the whole of every block matrix, the first 2,048 rows of the embedding and the LM head).
# Prints one line per case; exits 1 on the first differing byte, naming the case, type, block and
# byte offset.
import ctypes, struct, sys
import numpy as np

zt = ctypes.CDLL(sys.argv[1])
gg = ctypes.CDLL(sys.argv[2])
TYPES = {"q4_k": (12, 144, "q4_K"), "q5_k": (13, 176, "q5_K"), "q6_k": (14, 210, "q6_K")}
f32p, vp, i64 = ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int64
zt.zt_gguf_encode.argtypes = [ctypes.c_int, vp, f32p, i64]
zt.zt_gguf_decode.argtypes = [ctypes.c_int, f32p, vp, i64]
for _, _, s in TYPES.values():
    getattr(gg, f"quantize_row_{s}_ref").argtypes = [f32p, vp, i64]
    getattr(gg, f"dequantize_row_{s}").argtypes = [vp, f32p, i64]


def check(case, x):
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    n = x.size - x.size % 256
    x = x[:n]
    if n == 0:
        return 0
    xp = x.ctypes.data_as(f32p)
    for name, (t, bb, s) in TYPES.items():
        a = np.zeros(n // 256 * bb, np.uint8)
        b = np.zeros(n // 256 * bb, np.uint8)
        zt.zt_gguf_encode(t, a.ctypes.data, xp, n)
        getattr(gg, f"quantize_row_{s}_ref")(xp, b.ctypes.data, n)
        if not np.array_equal(a, b):
            k = int(np.nonzero(a != b)[0][0])
            print(f"FAIL {case} {name}: block {k // bb} byte {k % bb} zerotrain {a[k]} llama.cpp {b[k]} "
                  f"(block values {x[k // bb * 256:k // bb * 256 + 8]} ...)")
            sys.exit(1)
        da, db = np.zeros(n, np.float32), np.zeros(n, np.float32)
        zt.zt_gguf_decode(t, da.ctypes.data_as(f32p), a.ctypes.data, n)
        getattr(gg, f"dequantize_row_{s}")(b.ctypes.data, db.ctypes.data_as(f32p), n)
        if not np.array_equal(da.view(np.uint32), db.view(np.uint32)):
            k = int(np.nonzero(da.view(np.uint32) != db.view(np.uint32))[0][0])
            print(f"FAIL {case} {name} decode: element {k}: zerotrain {da[k]!r} llama.cpp {db[k]!r}")
            sys.exit(1)
    return n // 256


def gguf_tensors(path):
    """(name, ne, ggml type, data bytes) of every tensor of a GGUF file (v3, little-endian)."""
    buf = open(path, "rb").read()
    at = 0

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, buf, at)
        at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal at
        n = take("Q")
        at += n
        return buf[at - n:at].decode()

    SIZES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            it, n = take("I"), take("Q")
            return [value(it) for _ in range(n)]
        return take(SIZES[t])

    assert buf[:4] == b"GGUF", path
    at = 4
    take("I")
    n_t, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        k = string()
        v = value(take("I"))
        if k == "general.alignment":
            align = v
    infos = []
    for _ in range(n_t):
        name = string()
        nd = take("I")
        ne = [take("Q") for _ in range(nd)]
        infos.append((name, ne, take("I"), take("Q")))
    base = (at + align - 1) // align * align
    for name, ne, t, off in infos:
        yield name, ne, t, memoryview(buf)[base + off:]


def gguf_f32_matrices(path):
    for name, ne, t, data in gguf_tensors(path):
        if t == 0 and len(ne) == 2:
            yield name, np.frombuffer(data, np.float32, ne[0] * ne[1])


args, pairs = sys.argv[3:], []
while "--pair" in args:
    k = args.index("--pair")
    pairs.append((args[k + 1], args[k + 2]))
    del args[k:k + 3]
for f32, kq in pairs:
    ref = dict((name, np.frombuffer(data, np.float32, min(ne[0] * ne[1], 2048 * 256)).copy())
               for name, ne, t, data in gguf_tensors(f32) if t == 0 and len(ne) == 2)
    kinds = {}
    for name, ne, t, data in gguf_tensors(kq):
        if t not in (12, 13, 14):
            continue
        kind = {12: "q4_k", 13: "q5_k", 14: "q6_k"}[t]
        _, bb, s_ = TYPES[kind]
        n = min(ne[0] * ne[1], 2048 * 256)
        got = np.frombuffer(data, np.uint8, n // 256 * bb)
        want = np.zeros(n // 256 * bb, np.uint8)
        getattr(gg, f"quantize_row_{s_}_ref")(ref[name].ctypes.data_as(f32p), want.ctypes.data, n)
        if not np.array_equal(got, want):
            k = int(np.nonzero(got != want)[0][0])
            print(f"FAIL {kq}: tensor {name} ({kind}): block {k // bb} byte {k % bb} differs from llama.cpp's "
                  f"quantization of {f32}'s")
            sys.exit(1)
        kinds.setdefault(kind, []).append(name)
    if not kinds:
        print(f"FAIL {kq}: no k-quant tensor")
        sys.exit(1)
    print(f"ok   {kq.split('/')[-1]}: every k-quant tensor (up to 2048 super-blocks each) byte for byte llama.cpp's quantization of "
          f"{f32.split('/')[-1]}'s: " + "; ".join(f"{k} {len(v)} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                                                  for k, v in sorted(kinds.items())))
blocks = 0
for path in args:
    n_before, names = blocks, 0
    for name, w in gguf_f32_matrices(path):
        blocks += check(f"{path.split('/')[-1]}:{name}", w[:64 * 256])
        names += 1
    print(f"ok   {path.split('/')[-1]}: {names} f32 matrices, {blocks - n_before} super-blocks of 256, "
          f"q4_k q5_k q6_k bytes and decoded floats equal to llama.cpp's")
rng = np.random.default_rng(35)
cases = {
    "normal(0, 0.02)": rng.normal(0, 0.02, 256 * 64),
    "normal(0, 1)": rng.normal(0, 1, 256 * 64),
    "normal(3, 100)": rng.normal(3, 100, 256 * 16),
    "uniform(-1e-3, 1e-3)": rng.uniform(-1e-3, 1e-3, 256 * 16),
    "student-t(2)": rng.standard_t(2, 256 * 32) * 0.05,
    "all positive": np.abs(rng.normal(0, 1, 256 * 16)) + 0.5,
    "all negative": -np.abs(rng.normal(0, 1, 256 * 16)) - 0.5,
}
edge = np.zeros((10, 256), np.float32)
edge[1] = 0.25                                        # constant
edge[2] = -3.0                                        # constant, negative
edge[3] = rng.normal(0, 0.01, 256); edge[3, 77] = 1e3 # one huge value
edge[4] = rng.normal(0, 1, 256) * 6.2e-5              # near fp16's smallest normal
edge[5, 200] = 0.5                                    # a single non-zero element
edge[6] = np.where(np.arange(256) % 2, 1.0, -1.0)     # alternating signs
edge[7] = rng.normal(0, 1, 256); edge[7, :32] = 0     # one zero sub-block
edge[8] = np.arange(256, dtype=np.float32) / 255      # a ramp
edge[9] = 1e-20                                       # tiny constant (below every group threshold)
cases["edge cases (zero, constant, huge, subnormal-ish, one value, alternating, ramp, tiny)"] = edge
for case, x in cases.items():
    b = check(case, x)
    print(f"ok   {case}: {b} super-blocks, q4_k q5_k q6_k bytes and decoded floats equal to llama.cpp's")
