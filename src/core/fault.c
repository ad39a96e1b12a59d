/* fault.c - fault injection (fault.h has the ZT_FAULT grammar): the parsed specs and the one hook
 * the trainer and the checkpoint writer call at their phases. Inert unless ZT_FAULT is set: with no
 * spec armed, zt_fault_point is one load and a return.
 *
 * Invariants: a spec fires only on its rank and step; `n` counts firings per process (atomic, so
 * the checkpoint writer thread and the main thread never both take the last one). */
#include "core/fault.h"
#include "core/env.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_SPECS = 8 };

typedef struct spec {
    zt_fault_kind kind;
    zt_fault_phase at;
    int rank;      /* -1: every rank */
    int64_t step;  /* -1: every step */
    bool from;     /* step and every later one */
    long arg;      /* exit code, milliseconds or factor */
    long attempt;  /* only in this launch attempt ($ZT_RESTART_ATTEMPT, 0 first); -1: every one */
    atomic_long left; /* firings left; < 0: no limit */
} spec;

static spec g_specs[MAX_SPECS];
static int g_n;
static _Atomic int64_t g_step;

static const struct {
    const char *name;
    zt_fault_kind kind;
    zt_fault_phase at;
} KINDS[] = {
    {"sigkill", ZT_FAULT_SIGKILL, ZT_FAULT_AT_STEP}, {"sigterm", ZT_FAULT_SIGTERM, ZT_FAULT_AT_STEP},
    {"sigint", ZT_FAULT_SIGINT, ZT_FAULT_AT_STEP},   {"abort", ZT_FAULT_ABORT, ZT_FAULT_AT_STEP},
    {"hang", ZT_FAULT_HANG, ZT_FAULT_AT_STEP},       {"exit", ZT_FAULT_EXIT, ZT_FAULT_AT_STEP},
    {"sleep", ZT_FAULT_SLEEP, ZT_FAULT_AT_STEP},     {"nan", ZT_FAULT_NAN, ZT_FAULT_AT_FWD},
    {"inf", ZT_FAULT_INF, ZT_FAULT_AT_FWD},          {"eio", ZT_FAULT_EIO, ZT_FAULT_AT_SAVE_SHARD},
    {"spike", ZT_FAULT_SPIKE, ZT_FAULT_AT_FWD},       {"bitflip", ZT_FAULT_BITFLIP, ZT_FAULT_AT_STEP},
    {"skipcoll", ZT_FAULT_SKIPCOLL, ZT_FAULT_AT_AGREE}, {"oom", ZT_FAULT_OOM, ZT_FAULT_AT_ALLOC},
    {"enospc", ZT_FAULT_ENOSPC, ZT_FAULT_AT_SAVE_SHARD}, {"shortwrite", ZT_FAULT_SHORTWRITE, ZT_FAULT_AT_SAVE_WRITE},
};
static const char *const PHASES[ZT_FAULT_PHASES] = {"step", "fwd", "agree", "optim", "save_shard", "save_manifest",
                                                     "save_commit", "save_purge", "alloc", "save_write", "offload", "router"};

static int bad(const char *whole, const char *part, const char *why, zt_error *err) {
    return zt_error_set(err, ZT_ERR_USAGE, "ZT_FAULT='%s': %s '%s' (fault.h: KIND[:rank=R][:step=S][:at=PHASE][:n=K]"
                        "[:from=S][:attempt=A][:ms=M][:code=C][:x=F], kinds sigkill sigterm sigint abort hang exit sleep nan inf spike bitflip skipcoll eio enospc shortwrite oom)",
                        whole, why, part);
}

static bool parse_long(const char *s, long lo, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo) return false;
    *out = v;
    return true;
}

/* One SPEC (a writable copy) into g_specs[g_n]. */
static int parse_spec(const char *whole, char *text, int rank, zt_error *err) {
    spec *s = &g_specs[g_n];
    char *save = NULL, *tok = strtok_r(text, ":", &save);
    if (!tok) return bad(whole, "", "empty spec", err);
    size_t k = 0;
    while (k < sizeof KINDS / sizeof *KINDS && strcmp(KINDS[k].name, tok)) k++;
    if (k == sizeof KINDS / sizeof *KINDS) return bad(whole, tok, "unknown kind", err);
    *s = (spec){.kind = KINDS[k].kind, .at = KINDS[k].at, .rank = -1, .step = -1, .arg = 1, .attempt = -1};
    long n = -1;
    while ((tok = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(tok, '=');
        long v;
        if (!eq) return bad(whole, tok, "expected key=value, got", err);
        *eq = '\0';
        const char *val = eq + 1;
        if (!strcmp(tok, "at")) {
            int p = 0;
            while (p < ZT_FAULT_PHASES && strcmp(PHASES[p], val)) p++;
            if (p == ZT_FAULT_PHASES) return bad(whole, val, "unknown phase (step fwd agree optim save_shard save_manifest save_commit save_purge alloc save_write offload router)", err);
            s->at = (zt_fault_phase)p;
        } else if (!parse_long(val, 0, &v)) {
            return bad(whole, val, "expected a non-negative integer, got", err);
        } else if (!strcmp(tok, "rank")) {
            s->rank = (int)v;
        } else if (!strcmp(tok, "step") || !strcmp(tok, "from")) {
            s->step = v;
            s->from = tok[0] == 'f';
        } else if (!strcmp(tok, "n")) {
            n = v;
        } else if (!strcmp(tok, "attempt")) {
            s->attempt = v;
        } else if (!strcmp(tok, "ms") || !strcmp(tok, "code") || !strcmp(tok, "x")) {
            s->arg = v;
        } else {
            return bad(whole, tok, "unknown key", err);
        }
    }
    atomic_store(&s->left, n);
    const char *att = zt_env(ZT_ENV_RESTART_ATTEMPT); /* set by the launcher (--max-restarts) */
    long this_attempt = att && *att ? strtol(att, NULL, 10) : 0;
    /* another rank's or another attempt's spec is not armed here */
    if ((s->rank < 0 || s->rank == rank) && (s->attempt < 0 || s->attempt == this_attempt)) g_n++;
    return ZT_OK;
}

int zt_fault_init(int rank, zt_error *err) {
    g_n = 0;
    const char *env = zt_env(ZT_ENV_FAULT);
    if (!env || !*env) return ZT_OK;
    char buf[512];
    if (strlen(env) >= sizeof buf) return bad(env, "", "longer than 511 characters", err);
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (g_n == MAX_SPECS) return bad(env, t, "more than 8 specs at", err);
        int rc = parse_spec(env, t, rank, err);
        if (rc) return rc;
    }
    return ZT_OK;
}

bool zt_fault_armed(void) { return g_n > 0; }

void zt_fault_set_step(int64_t step) { atomic_store(&g_step, step); }

/* Takes one firing of s if any are left. */
static bool take(spec *s) {
    long left = atomic_load(&s->left);
    while (left != 0) {
        if (left < 0) return true;
        if (atomic_compare_exchange_weak(&s->left, &left, left - 1)) return true;
    }
    return false;
}

zt_fault_kind zt_fault_point(zt_fault_phase phase, long *arg) {
    return zt_fault_point_step(phase, atomic_load(&g_step), arg);
}

zt_fault_kind zt_fault_point_step(zt_fault_phase phase, int64_t step, long *arg) {
    for (int i = 0; i < g_n; i++) {
        spec *s = &g_specs[i];
        bool when = s->step < 0 || s->step == step || (s->from && step > s->step);
        if (s->at != phase || !when || !take(s)) continue;
        if (s->kind != ZT_FAULT_SLEEP || step <= 1) /* a sleep every step says so once */
            fprintf(stderr, "zerotrain: ZT_FAULT: injecting %s at %s of step %lld (pid %d)\n",
                KINDS[s->kind - 1].name, PHASES[phase], (long long)step, (int)getpid());
        fflush(stderr);
        switch (s->kind) {
        case ZT_FAULT_SIGKILL: raise(SIGKILL); break;
        case ZT_FAULT_SIGTERM: raise(SIGTERM); break; /* the handler sets the stop flag */
        case ZT_FAULT_SIGINT: raise(SIGINT); break;
        case ZT_FAULT_ABORT: abort();
        case ZT_FAULT_EXIT: _exit((int)s->arg);
        case ZT_FAULT_HANG: /* alive and silent, as under SIGSTOP */
            for (;;) pause();
        case ZT_FAULT_SLEEP: {
            struct timespec ts = {s->arg / 1000, (s->arg % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            break;
        }
        default: /* NAN, INF, EIO, SPIKE, BITFLIP, SKIPCOLL, OOM: the caller applies them */
            if (arg) *arg = s->arg;
            return s->kind;
        }
    }
    return ZT_FAULT_NONE;
}
