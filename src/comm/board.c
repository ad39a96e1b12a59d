/* board.c - the status board: each rank keeps, in a small shared-memory file of the job's run
 * directory ($ZT_RUN_DIR/board-R, set by the --nproc launcher or by the user for ranks that share
 * a host), its pid, the training step it is in and a ring of its last 32 collectives (comm, op,
 * tag, seq, begin and end times). When a collective's deadline expires, the waiting rank reads its
 * peers' boards and says what each was doing (in which collective and step, or gone), and dumps
 * its own ring: the flight recorder of docs/reliability.md.
 *
 * Invariants: writes are plain stores into this rank's own mapping (no lock, no system call per
 * collective); a reader may see a torn entry, which only blurs a diagnostic. Without $ZT_RUN_DIR
 * (or when the file cannot be made) every call is a no-op and messages say the state is unknown.
 * Times are CLOCK_MONOTONIC seconds, comparable between processes of one host. */
#include "comm/comm_internal.h"
#include "core/env.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { RING = 32, BOARD_MAGIC = 0x7a74626f };

typedef struct entry {
    uint64_t seq;            /* the op's sequence number on its comm */
    double t_begin, t_end;   /* t_end 0: in flight; < 0: failed */
    char comm[48], op[24], tag[48];
} entry;

typedef struct board {
    uint32_t magic;
    int32_t pid, rank;
    int64_t step;            /* the training step being computed (1-based), 0 before the first */
    double t_step;           /* when it began */
    atomic_uint_fast64_t next; /* ring entries written */
    entry ring[RING];
} board;

static board *g_board;
static char g_dir[3800];

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void board_path(int rank, char *buf, size_t cap) { snprintf(buf, cap, "%s/board-%d", g_dir, rank); }

void zt_board_open_(int world_rank) {
    const char *dir = zt_env(ZT_ENV_RUN_DIR);
    if (g_board || !dir || !*dir || strlen(dir) >= sizeof g_dir) return;
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    char path[4000];
    board_path(world_rank, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    if (ftruncate(fd, sizeof(board)) == 0) {
        void *p = mmap(NULL, sizeof(board), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            g_board = p;
            g_board->pid = (int32_t)getpid();
            g_board->rank = world_rank;
            g_board->magic = BOARD_MAGIC;
        }
    }
    close(fd);
}

void zt_board_close_(void) {
    if (!g_board) return;
    char path[4000];
    board_path(g_board->rank, path, sizeof path);
    munmap(g_board, sizeof(board));
    g_board = NULL;
    unlink(path);
}

void zt_comm_note_step(int64_t step) {
    zt_fingerprint_step_(step);
    if (!g_board) return;
    g_board->step = step;
    g_board->t_step = mono();
}

int zt_board_begin_(const zt_comm *c, const char *op, const char *tag, uint64_t seq) {
    if (!g_board) return -1;
    int slot = (int)(atomic_fetch_add(&g_board->next, 1) % RING);
    entry *e = &g_board->ring[slot];
    e->t_end = 0;
    e->seq = seq;
    snprintf(e->comm, sizeof e->comm, "%s", c->name);
    snprintf(e->op, sizeof e->op, "%s", op);
    snprintf(e->tag, sizeof e->tag, "%s", tag ? tag : "");
    e->t_begin = mono();
    return slot;
}

void zt_board_end_(int slot, bool ok) {
    if (g_board && slot >= 0 && slot < RING) g_board->ring[slot].t_end = ok ? mono() : -1;
}

/* "all_gather 'loss' #41 on world" */
static void describe(const entry *e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s%s%s #%llu on %s", e->op, e->tag[0] ? " '" : "", e->tag, e->tag[0] ? "'" : "",
             (unsigned long long)e->seq, e->comm);
}

/* What one board says, appended to out: the step, the collectives in flight, else the last one. */
static void say(const board *b, double now, char *out, size_t cap) {
    size_t len = strlen(out);
    int n = snprintf(out + len, cap - len, "step %lld", (long long)b->step);
    if (n < 0 || (size_t)n >= cap - len) return;
    len += (size_t)n;
    uint64_t written = atomic_load(&((board *)b)->next);
    int in_flight = 0;
    const entry *last = NULL;
    for (uint64_t k = written > RING ? written - RING : 0; k < written; k++) {
        const entry *e = &b->ring[k % RING];
        char d[160];
        if (e->t_end == 0 && in_flight < 2) {
            describe(e, d, sizeof d);
            n = snprintf(out + len, cap - len, ", in %s for %.1f s", d, now - e->t_begin);
            if (n < 0 || (size_t)n >= cap - len) return;
            len += (size_t)n;
            in_flight++;
        } else if (e->t_end > 0 && (!last || e->t_end > last->t_end)) {
            last = e;
        }
    }
    if (!in_flight && last) {
        char d[160];
        describe(last, d, sizeof d);
        snprintf(out + len, cap - len, ", in no collective for %.1f s (the last: %s)", now - last->t_end, d);
    } else if (!in_flight) {
        snprintf(out + len, cap - len, ", no collective yet");
    }
}

void zt_board_peers_(const zt_comm *c, char *out, size_t cap) {
    out[0] = '\0';
    if (!g_board) {
        snprintf(out, cap, "the other ranks' state is unknown (it is shown for ranks of one host with $ZT_RUN_DIR, "
                 "which the --nproc launcher sets)");
        return;
    }
    double now = mono();
    size_t len = 0;
    for (int p = 0; p < c->size && len + 64 < cap; p++) {
        int wr = c->world_ranks[p];
        char lab[64], path[4000], what[600] = "";
        zt_comm_rank_label_(c, p, lab, sizeof lab);
        board_path(wr, path, sizeof path);
        int fd = open(path, O_RDONLY);
        void *m = fd >= 0 ? mmap(NULL, sizeof(board), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (fd >= 0) close(fd);
        if (m == MAP_FAILED) {
            snprintf(what, sizeof what, "no status (not on this host, or not started)");
        } else {
            const board *b = m;
            if (b->magic != BOARD_MAGIC) snprintf(what, sizeof what, "no status yet");
            else if (kill(b->pid, 0) != 0 && errno == ESRCH) snprintf(what, sizeof what, "process %d is gone", b->pid);
            else say(b, now, what, sizeof what);
            munmap(m, sizeof(board));
        }
        int n = snprintf(out + len, cap - len, "%s%s%s: %s", len ? "; " : "", lab, p == c->rank ? " (this rank)" : "",
                         what);
        if (n < 0) break;
        len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
}

void zt_board_dump_(FILE *f) {
    if (!g_board) return;
    double now = mono();
    uint64_t written = atomic_load(&g_board->next);
    fprintf(f, "zerotrain: rank %d's last collectives (oldest first; step %lld):\n", g_board->rank,
            (long long)g_board->step);
    for (uint64_t k = written > RING ? written - RING : 0; k < written; k++) {
        const entry *e = &g_board->ring[k % RING];
        char d[160];
        describe(e, d, sizeof d);
        if (e->t_end > 0)
            fprintf(f, "  %s: %.3f s, ended %.1f s ago\n", d, e->t_end - e->t_begin, now - e->t_end);
        else
            fprintf(f, "  %s: %s %.1f s ago\n", d, e->t_end < 0 ? "failed, begun" : "in flight, begun", now - e->t_begin);
    }
    fflush(f);
}
