"""tolerance.py DIR ARCH REF ULP RUN=inside|outside=LABEL ... - the rounding-level tolerance that
tests/tp.sh and tests/sp.sh derive in the run itself. DIR holds each run's final logical parameters
(NAME.bin, fp32, tool_dist_check --dump) and its losses line (NAME.losses). REF is the reference run,
ULP the same run with every initial parameter moved one ulp (--ulp): the yardstick of a rounding-level
perturbation after the same steps (ULP:F, e.g. yard:2, takes F instead of 8: tests/moe.sh's bf16
yardstick, an fp32 run from bf16-rounded parameters). The tolerance is 8 (or F) x the yardstick's
divergence from REF (with a floor of one fp32 ulp of the loss); each RUN must fall inside or outside
it as named. Exit 1 when
one does not. Not a test by itself (ctest runs tests/*.sh)."""
import array
import sys

T, arch, ref_name, ulp_name = sys.argv[1:5]
ulp_name, _, factor = ulp_name.partition(":")
factor = float(factor) if factor else 8.0


def params(n):
    a = array.array('f')
    a.frombytes(open(f"{T}/{n}.bin", "rb").read())
    return a


def losses(n):
    return [float.fromhex(x) for x in open(f"{T}/{n}.losses").read().split()[1:]]


ref, rl = params(ref_name), losses(ref_name)


def dist(n):
    p, l = params(n), losses(n)
    assert len(p) == len(ref) and len(l) == len(rl), n
    return max(abs(x - y) for x, y in zip(p, ref)), max(abs(x - y) / y for x, y in zip(l, rl))


ulp_p, ulp_l = dist(ulp_name)
tol_p, tol_l = factor * ulp_p, max(factor * ulp_l, 2.0 ** -23)
ok = True
for spec in sys.argv[5:]:
    n, want, label = spec.split("=", 2)
    dp, dl = dist(n)
    inside = dp <= tol_p and dl <= tol_l
    good = inside == (want == "inside")
    ok &= good
    print(("ok   " if good else "FAIL ") + f"{arch} {label}: params max |diff| {dp:.3g} (tolerance {tol_p:.3g}), "
          f"losses max rel diff {dl:.3g} (tolerance {tol_l:.3g}): " + ("inside" if inside else "outside"))
sys.exit(0 if ok else 1)
