/* shm.c - the node-local shared segment of a comm whose ranks all run on one machine: one POSIX
 * shared-memory file mapped by every rank, a region per rank (its progress counters and two rings
 * of slots), through which all_reduce_shm.c moves data with plain loads and stores instead of MPI
 * messages (no kernel copy, no rendezvous per message).
 *
 * Invariants:
 *   - A comm has a segment only when it has 2..ZT_SHM_MAX_RANKS ranks, MPI_COMM_TYPE_SHARED puts
 *     them all on one node, ZT_COMM_AR_SHM_BYTES is not 0, and every rank could map the file: the ranks agree
 *     (an MPI_Allreduce at creation), or none uses it.
 *   - The file is unlinked as soon as every rank has mapped it: nothing is left in /dev/shm when
 *     the job dies. Closing is local (munmap): no collective at zt_comm_free, so a rank that
 *     frees its comms on an error path never waits for the others.
 *   - Region r (zt_shm_region_bytes_ apart): three counters on their own cache lines (written by
 *     rank r only, read by all), then D x (N-1) input slots, then D output slots of ZT_SHM_SLOT
 *     bytes, D = zt_shm_depth_(N). The counters only grow, for the life of the comm.
 *   - On 2 ranks the all-reduces use a region's D x N slots as one ring of whole-vector pieces
 *     (the one-shot, all_reduce_shm.c).
 *   - Mapped with MAP_POPULATE: the pages are faulted in at creation (every rank maps every
 *     region), not by the first all-reduces (measured: a 256 KB all-reduce that met fresh slots
 *     took 0.24-0.38 ms instead of 0.05).
 * Sizes per rank: 4 KiB + D x N x 256 KiB: 4 MiB on 2 ranks, 3 MiB on 3, 2 MiB on 4 (D = 8 / (N-1)
 * steps in flight, at least 2). A rank's region is its share of the node's memory
 * (zt_comm_shm_bytes): the engine counts it in its comm class and its memory plan.
 */
#include "comm/comm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int zt_shm_depth_(int nranks) {
    int d = nranks > 1 ? ZT_SHM_MAX_DEPTH / (nranks - 1) : ZT_SHM_MAX_DEPTH;
    return d < 2 ? 2 : d;
}

size_t zt_shm_region_bytes_(int nranks) {
    return ZT_SHM_HEADER + (size_t)zt_shm_depth_(nranks) * (size_t)nranks * ZT_SHM_SLOT;
}

/* Whether every rank of c runs on this node. */
static bool one_node(zt_comm *c) {
    MPI_Comm node;
    if (MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return false;
    int size = 0;
    MPI_Comm_size(node, &size);
    MPI_Comm_free(&node);
    int here = size == c->size, all = 0; /* the same answer on every rank, but agree anyway */
    if (MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_LAND, c->mpi) != MPI_SUCCESS) return false;
    return all;
}

void zt_shm_open_(zt_comm *c) {
    c->shm_map = NULL;
    if (c->size < 2 || c->size > ZT_SHM_MAX_RANKS || c->ar_shm_max == 0 || !one_node(c)) return;
    static _Atomic unsigned counter;
    struct {
        char name[64];
        int ok;
    } msg = {{0}, 0};
    size_t bytes = (size_t)c->size * zt_shm_region_bytes_(c->size);
    int fd = -1;
    if (c->rank == 0) {
        /* a name nobody holds: a job killed between this open and the unlink below leaves its
         * segment behind under its pid, and pids come round again (pid_max 32768 here), so a
         * name taken is skipped rather than the segment given up */
        for (int tries = 0; tries < 64; tries++) {
            snprintf(msg.name, sizeof msg.name, "/zt-comm.%ld.%u", (long)getpid(), atomic_fetch_add(&counter, 1));
            fd = shm_open(msg.name, O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd >= 0 || errno != EEXIST) break;
        }
        msg.ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0; /* tmpfs: zero-filled */
    }
    int ok = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, c->mpi) == MPI_SUCCESS && msg.ok;
    if (ok && c->rank != 0) fd = shm_open(msg.name, O_RDWR, 0600);
    void *map = MAP_FAILED;
    if (ok && fd >= 0) map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0); /* faulted in now, not in the first ops */
    if (fd >= 0) close(fd);
    int mine = ok && map != MAP_FAILED, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, c->mpi) != MPI_SUCCESS) all = 0;
    if (c->rank == 0 && msg.ok) shm_unlink(msg.name); /* every rank has it open, or gave up */
    if (!all) {
        if (map != MAP_FAILED) munmap(map, bytes);
        return;
    }
    c->shm_map = map;
    c->shm_bytes = bytes;
    c->shm_step = 0;
    c->shm_last = ZT_SHM_RINGS;
    c->shm_cma = c->a2a_cma = c->a2a_map = zt_a2a_shm_probe_(c);
}

void zt_shm_close_(zt_comm *c) {
    zt_a2a_maps_free_(c);
    if (c->shm_map) munmap(c->shm_map, c->shm_bytes);
    c->shm_map = NULL;
}

bool zt_comm_has_shm(const zt_comm *c) { return c && c->shm_map; }

size_t zt_comm_shm_bytes(const zt_comm *c) { return zt_comm_has_shm(c) ? zt_shm_region_bytes_(c->size) : 0; }

size_t zt_comm_shm_bytes_for_size(int nranks) {
    zt_comm_settings set;
    zt_error ignore;
    if (nranks < 2 || nranks > ZT_SHM_MAX_RANKS || zt_comm_env_(&set, &ignore) != ZT_OK || set.ar_shm_max == 0) return 0;
    return zt_shm_region_bytes_(nranks);
}
