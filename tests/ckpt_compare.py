#!/usr/bin/python3
"""ckpt_compare.py A B - reads two zerotrain checkpoint commits (any world size or strategy),
assembles every logical tensor of every kind (param, exp_avg, exp_avg_sq) from its slices, and
requires them to be equal byte for byte. Also checks both describe the same step and sample."""
import json
import sys

import numpy as np


def load(commit):
    with open(f"{commit}/manifest.json") as f:
        man = json.load(f)
    files = [open(f"{commit}/{fe['name']}", "rb").read() for fe in man["files"]]
    out = {}
    for t in man["tensors"]:
        shape = t["shape"]
        row_len = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        for sl in t["slices"]:
            arr = out.setdefault((t["name"], sl["kind"]), np.full(shape[0] * row_len, np.nan, np.float32))
            n = sl["rows"] * row_len
            data = np.frombuffer(files[sl["file"]], np.float32, n, sl["offset"])
            arr[sl["row0"] * row_len: sl["row0"] * row_len + n] = data
    return man, out


def main():
    ma, a = load(sys.argv[1])
    mb, b = load(sys.argv[2])
    bad = 0
    for key in ("step", "samples_consumed"):
        if ma[key] != mb[key]:
            print(f"FAIL {key}: {ma[key]} vs {mb[key]}")
            bad += 1
    if set(a) != set(b):
        print(f"FAIL different tensors/kinds: {sorted(set(a) ^ set(b))[:5]}")
        bad += 1
    for k in sorted(set(a) & set(b)):
        if np.isnan(a[k]).any() or np.isnan(b[k]).any():
            print(f"FAIL {k}: rows not covered by any slice")
            bad += 1
        elif a[k].tobytes() != b[k].tobytes():
            print(f"FAIL {k}: {np.count_nonzero(a[k] != b[k])} elements differ")
            bad += 1
    print(f"{len(a)} tensor kinds compared: {ma['strategy']} x{ma['world']} vs {mb['strategy']} x{mb['world']}: "
          f"{'equal' if not bad else 'DIFFERENT'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
