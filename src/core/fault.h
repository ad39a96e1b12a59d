/* fault.h - fault injection for the reliability tests (docs/reliability.md, tests/fault/): compiled
 * in, inert unless the environment variable ZT_FAULT is set.
 *
 *   ZT_FAULT = SPEC[,SPEC...]   SPEC = KIND[:key=value...]
 *   kinds   sigkill sigterm sigint abort hang (the process acts on itself), exit (code=C),
 *           sleep (ms=M), nan inf (the micro-batch's loss gradient becomes NaN / +Inf),
 *           spike (x=F: the micro-batch's reported loss is multiplied by F; its gradient is not),
 *           bitflip (one bit of this rank's copy of the first parameter, as a step begins),
 *           skipcoll (this rank skips the step's agreement collective: a desync),
 *           eio enospc (a checkpoint file write, or at=offload an NVMe offload block, fails with
 *           EIO / ENOSPC), shortwrite (a write(2) of the checkpoint file is cut short: the writer
 *           must go on from where it stopped),
 *           oom (an engine allocation fails as if memory were out: exit 7 naming the buffer)
 *   keys    rank=R  only on world rank R (default: every rank)
 *           step=S  only in step S (1-based, the step being computed; default: every step)
 *           from=S  in step S and every later one
 *           at=P    where: step (a step begins), fwd (a micro-batch's forward/backward),
 *                   agree (the step's agreement collective), optim (before the optimizer step), save_shard (this rank's checkpoint file
 *                   written, not yet synced), save_manifest (rank 0: every file written, no
 *                   manifest yet), save_commit (rank 0: the commit renamed, `latest` not yet
 *                   moved), save_purge (rank 0, checkpoint.keep_last: an old commit renamed to
 *                   step-N.purge, not yet deleted; step= is the step being saved), save_write (one
 *                   write(2) call of this rank's checkpoint file), offload (an NVMe offload block
 *                   read or written by the I/O threads: memory.offload_*), router (nan/inf: a
 *                   mixture-of-experts layer's router logits, in its forward), alloc (an
 *                   engine allocation; step 0: before the first step); each kind has a default (docs/reliability.md)
 *           n=K     fire at most K times in this process (default: no limit)
 *           attempt=A  only in launch attempt A of `--max-restarts` (0: the first; default: all)
 *
 * Example: ZT_FAULT=sigkill:rank=1:step=3 kills rank 1 as step 3 begins. A malformed ZT_FAULT is a
 * usage error (zt_fault_init), never ignored. */
#ifndef ZT_FAULT_H
#define ZT_FAULT_H

#include "zerotrain/zerotrain.h"

typedef enum zt_fault_phase {
    ZT_FAULT_AT_STEP = 0,
    ZT_FAULT_AT_FWD,
    ZT_FAULT_AT_AGREE,
    ZT_FAULT_AT_OPTIM,
    ZT_FAULT_AT_SAVE_SHARD,
    ZT_FAULT_AT_SAVE_MANIFEST,
    ZT_FAULT_AT_SAVE_COMMIT,
    ZT_FAULT_AT_SAVE_PURGE,
    ZT_FAULT_AT_ALLOC,
    ZT_FAULT_AT_SAVE_WRITE,
    ZT_FAULT_AT_OFFLOAD,
    ZT_FAULT_AT_ROUTER,
    ZT_FAULT_PHASES
} zt_fault_phase;

typedef enum zt_fault_kind {
    ZT_FAULT_NONE = 0,
    ZT_FAULT_SIGKILL,
    ZT_FAULT_SIGTERM,
    ZT_FAULT_SIGINT,
    ZT_FAULT_ABORT,
    ZT_FAULT_HANG,
    ZT_FAULT_EXIT,
    ZT_FAULT_SLEEP,
    ZT_FAULT_NAN,
    ZT_FAULT_INF,
    ZT_FAULT_EIO,
    ZT_FAULT_SPIKE,
    ZT_FAULT_BITFLIP,
    ZT_FAULT_SKIPCOLL,
    ZT_FAULT_OOM,
    ZT_FAULT_ENOSPC,
    ZT_FAULT_SHORTWRITE,
} zt_fault_kind;

/* Parses ZT_FAULT (unset or empty: nothing armed) for this world rank. ZT_ERR_USAGE naming the
 * spec and the bad part. Call once per process before training; not thread-safe. */
int zt_fault_init(int rank, zt_error *err);

/* True when any fault is armed (a cheap test for the hooks). */
bool zt_fault_armed(void);

/* The hook at phase P of the current step (zt_fault_set_step): performs the process-level kinds armed there (kills, exits, hangs, sleeps: may not return) and
 * returns the data kind armed there (NAN, INF, EIO, ENOSPC, SHORTWRITE, SPIKE, BITFLIP, SKIPCOLL, OOM) for the caller to apply, else
 * ZT_FAULT_NONE; *arg (may be NULL) receives its argument (spike: the factor). Thread-safe for the
 * data kinds (the checkpoint writer thread calls it). */
zt_fault_kind zt_fault_point(zt_fault_phase phase, long *arg);
/* The same for a given step (a background writer's save belongs to the step it was taken at). */
zt_fault_kind zt_fault_point_step(zt_fault_phase phase, int64_t step, long *arg);

/* The step the hooks attribute to, 1-based (the trainer sets it as a step begins). */
void zt_fault_set_step(int64_t step);

#endif
