#!/usr/bin/env python3
"""cp_trace.py - context parallelism's communication and balance from a run's trace (docs/parallelism.md).

    python3 bench/cp_trace.py TRACE.json [--ranks N] [--skip-steps K] [--json]

TRACE.json is what `zerotrain train --trace TRACE.json` was given: the per-rank files
TRACE.rank<r>.json are read (one process: TRACE.json itself) (one event per line; a file cut short keeps its complete lines). Within
each rank's "step" spans (the first K skipped), it sums on the main thread:

  attention  the attention kernel's spans (category "attention": context_parallel.c's per head group
             or ring step, the one-process kernel's "whole forward/backward")
  comm       the spans of category "cp": the time the rank spent posting its exchanges and waiting
             for them to land (ring shift waits, posted exchanges' waits, blocking exchanges). The
             transfers themselves are not spans: this is the communication the rank was exposed to
             (the rest moved behind the attention, or cost nothing), and it includes waiting for the
             other rank's lag, so it bounds the exposed transfer from above.

and prints per rank: steps, step time, attention time and share, exposed communication and share of
the step, the number of cp waits, the bytes they moved and the median and longest wait (a few long
waits are the other rank's lag or the scheduler; the median is what one exchange costs exposed); then the halves' balance: the spread of
the ranks' attention times, (max - min) / mean (the issue asks within 5%). The hidden share of the
communication needs what the same exchanges cost exposed: run once with ZT_CP_HEAD_GROUPS=1 (the
exchange posted and waited at once, no pipelining) and compare the two exposed times
(bench/cp_overlap.sh does)."""
import json
import os
import sys


def events(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip().rstrip(',')
            if not line.startswith('{"ts"'):
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def rank_path(path, r):
    base, ext = os.path.splitext(path)
    if ext != '.json':
        base, ext = path, '.json'
    return f"{base}.rank{r}{ext}"


def summarize(evs, skip):
    steps = sorted((e for e in evs if e.get('cat') == 'step' and e.get('ph') == 'X'), key=lambda e: e['ts'])
    steps = steps[skip:]
    if not steps:  # no step spans: the whole trace
        t0 = min(e['ts'] for e in evs)
        t1 = max(e['ts'] + e.get('dur', 0) for e in evs)
        windows = [(t0, t1)]
    else:
        windows = [(e['ts'], e['ts'] + e['dur']) for e in steps]

    def inside(e):
        return any(a <= e['ts'] and e['ts'] + e.get('dur', 0) <= b for a, b in windows)

    main = [e for e in evs if e.get('ph') == 'X' and e.get('tid') == 1 and inside(e)]
    att = [e for e in main if e.get('cat') == 'attention']
    cp = [e for e in main if e.get('cat') == 'cp']
    waits = [e for e in cp if (e.get('args') or {}).get('op') in ('wait', 'shift', 'exchange')]
    step_us = sum(b - a for a, b in windows)
    durs = sorted(e['dur'] for e in waits)
    return {
        'steps': len(steps),
        'step_s': step_us / 1e6,
        'attention_s': sum(e['dur'] for e in att) / 1e6,
        'attention_calls': len(att),
        'comm_exposed_s': sum(e['dur'] for e in cp) / 1e6,
        'comm_waits': len(waits),
        'comm_bytes': sum((e.get('args') or {}).get('bytes', 0) for e in waits),
        'comm_wait_median_ms': durs[len(durs) // 2] / 1e3 if durs else 0.0,
        'comm_wait_max_ms': durs[-1] / 1e3 if durs else 0.0,
    }


def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    if not args or '-h' in argv or '--help' in argv:
        print(__doc__.strip())
        return 0 if args or '-h' in argv or '--help' in argv else 2
    path = args[0]
    ranks = None
    skip = 0
    for i, a in enumerate(argv):
        if a == '--ranks':
            ranks = int(argv[i + 1])
        if a == '--skip-steps':
            skip = int(argv[i + 1])
    rows = []
    r = 0
    if not os.path.exists(rank_path(path, 0)) and os.path.exists(path) and ranks in (None, 1):
        evs = events(path)  # one process: the trace under the name it was given
        if evs:
            d = summarize(evs, skip)
            d['rank'] = 0
            rows.append(d)
            ranks = 1
            r = 1
    while ranks is None or r < ranks:
        p = rank_path(path, r)
        if not os.path.exists(p):
            if ranks is None:
                break
            print(f"cp_trace.py: no {p}", file=sys.stderr)
            return 2
        evs = events(p)
        if not evs:
            print(f"cp_trace.py: no events in {p}", file=sys.stderr)
            return 2
        d = summarize(evs, skip)
        d['rank'] = r
        rows.append(d)
        r += 1
    if not rows:
        print(f"cp_trace.py: no {rank_path(path, 0)}", file=sys.stderr)
        return 2
    att = [d['attention_s'] for d in rows]
    mean = sum(att) / len(att)
    balance = (max(att) - min(att)) / mean if mean > 0 else 0.0
    total = {
        'ranks': len(rows),
        'step_s': max(d['step_s'] for d in rows),
        'attention_s_per_rank': att,
        'attention_spread': balance,
        'comm_exposed_s_per_rank': [d['comm_exposed_s'] for d in rows],
        'comm_exposed_share': max(d['comm_exposed_s'] / d['step_s'] for d in rows if d['step_s'] > 0),
        'attention_share': max(d['attention_s'] / d['step_s'] for d in rows if d['step_s'] > 0),
    }
    if '--json' in argv:
        print(json.dumps({'ranks': rows, 'total': total}))
        return 0
    print("| rank | steps | step s | attention s (share) | exposed cp comm s (share of step) | cp waits | MB they moved | "
          "wait median / max ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for d in rows:
        s = d['step_s'] or 1
        print(f"| {d['rank']} | {d['steps']} | {d['step_s']:.2f} | {d['attention_s']:.2f} ({100 * d['attention_s'] / s:.1f}%) | "
              f"{d['comm_exposed_s']:.3f} ({100 * d['comm_exposed_s'] / s:.2f}%) | {d['comm_waits']} | "
              f"{d['comm_bytes'] / 1e6:.1f} | {d['comm_wait_median_ms']:.2f} / {d['comm_wait_max_ms']:.0f} |")
    print(f"attention per rank {', '.join(f'{a:.2f}' for a in att)} s: spread (max - min) / mean "
          f"{100 * balance:.2f}%; exposed communication at most {100 * total['comm_exposed_share']:.2f}% of a step")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
