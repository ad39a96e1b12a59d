/* commlog.c - the communication log's recording: bins of (operation, communicator group,
 * power-of-two size class) filled by zt_commlog_record and read back as rows (zt_commlog_rows);
 * metrics/commlog.c prints them. A group is the first word of a communicator's name and
 * its size ("tp" 2, "dp" 4, "world" 8, "shard" 2, "gradients": the communication thread's copy of
 * the data-parallel comm), so the tensor-parallel collectives have rows of their own beside the
 * data-parallel ones of the same size.
 *
 * Invariants: the bins are a static table (no allocation on the record path); up to
 * MAX_GROUPS distinct (name, size) groups get their own rows, later ones share the last group's
 * rows (its name and nranks then show the first that claimed it). All access is under one mutex. */
#include "obs/commlog.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS ZT_COMMLOG_MAX_GROUPS
#define GROUP_NAME 16 /* characters kept of a group's name, with the terminator: zt_commlog_row.group's */
#define NCLASSES ZT_COMMLOG_NCLASSES

typedef struct bin {
    uint64_t count, bytes;
    double seconds, wait;
} bin;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool enabled;
static int group_ranks[MAX_GROUPS];
static char group_names[MAX_GROUPS][GROUP_NAME];
static int ngroups;
static bin bins[MAX_GROUPS][ZT_COLL_NKINDS][NCLASSES];

void zt_commlog_enable(bool on) { atomic_store(&enabled, on); }

void zt_commlog_reset(void) {
    pthread_mutex_lock(&lock);
    memset(bins, 0, sizeof bins);
    memset(group_ranks, 0, sizeof group_ranks);
    memset(group_names, 0, sizeof group_names);
    ngroups = 0;
    pthread_mutex_unlock(&lock);
}

/* -1 for 0, else floor(log2(bytes)) */
static int size_class(uint64_t bytes) { return bytes ? 63 - __builtin_clzll(bytes) : -1; }

void zt_commlog_record(int kind, uint64_t bytes, double seconds, double wait_seconds, int nranks, const char *group) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) return;
    if (kind < 0 || kind >= ZT_COLL_NKINDS) kind = ZT_COLL_NKINDS - 1;
    if (!(seconds >= 0) || !isfinite(seconds)) seconds = 0;
    if (!(wait_seconds >= 0) || !isfinite(wait_seconds)) wait_seconds = 0;
    pthread_mutex_lock(&lock);
    char name[GROUP_NAME] = ""; /* the name's first word: "gradients (communication thread)" -> "gradients" */
    for (size_t k = 0; group && group[k] && group[k] != ' ' && k + 1 < sizeof name; k++) name[k] = group[k];
    int gidx = -1;
    for (int i = 0; i < ngroups; i++)
        if (group_ranks[i] == nranks && !strcmp(group_names[i], name)) gidx = i;
    if (gidx < 0) {
        if (ngroups < MAX_GROUPS) {
            group_ranks[ngroups] = nranks;
            memcpy(group_names[ngroups++], name, sizeof name);
        }
        gidx = ngroups - 1;
    }
    bin *b = &bins[gidx][kind][size_class(bytes) + 1];
    b->count++;
    b->bytes += bytes;
    b->seconds += seconds;
    b->wait += wait_seconds;
    pthread_mutex_unlock(&lock);
}

static int cmp_row(const void *pa, const void *pb) {
    const zt_commlog_row *a = pa, *b = pb;
    if (a->kind != b->kind) return a->kind - b->kind;
    int g = strcmp(a->group, b->group);
    if (g) return g;
    if (a->nranks != b->nranks) return a->nranks - b->nranks;
    return a->size_class - b->size_class;
}

int zt_commlog_rows(zt_commlog_row *rows, int cap) {
    int n = 0;
    static zt_commlog_row all[ZT_COMMLOG_MAX_ROWS]; /* under lock */
    pthread_mutex_lock(&lock);
    for (int gi = 0; gi < ngroups; gi++)
        for (int k = 0; k < ZT_COLL_NKINDS; k++)
            for (int c = 0; c < NCLASSES; c++) {
                const bin *b = &bins[gi][k][c];
                if (!b->count) continue;
                all[n] = (zt_commlog_row){.kind = k, .nranks = group_ranks[gi], .size_class = c - 1,
                                          .count = b->count, .bytes = b->bytes,
                                          .seconds = b->seconds, .wait_seconds = b->wait};
                memcpy(all[n++].group, group_names[gi], sizeof all[0].group); /* both GROUP_NAME */
            }
    qsort(all, (size_t)n, sizeof *all, cmp_row);
    for (int i = 0; i < n && i < cap; i++) rows[i] = all[i];
    pthread_mutex_unlock(&lock);
    return n;
}
