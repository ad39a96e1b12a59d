/* shared_buffers.c - buffers this rank's peers on the machine can map into their own memory: each
 * one a memfd of its own (memfd_create, mapped MAP_SHARED here), so that the all-to-all reads a block
 * lying in one straight out of its sender's pages with plain loads, where a block anywhere else is
 * read with process_vm_readv (all_to_all_shm.c). That is what Open MPI's shared-memory transport
 * does with XPMEM where the kernel has it; a memfd gives the same without a kernel module. The
 * engine allocates the buffers expert parallelism sends from with these (engine.c, recompute.c).
 *
 * Measured (bench/RESULTS.md "The all-to-all out of mapped buffers"): a 3 MiB block copied out of
 * the peer's mapped buffer takes about half of a process_vm_readv of it, which pins each page and
 * copies 4 KiB at a time.
 *
 * Invariants:
 *   - The registry holds every live shared buffer of the process: an id (never reused, from 1), its
 *     memfd (open for the buffer's life: a peer opens /proc/<pid>/fd/<fd> to map it), base, bytes.
 *     A peer that mapped a buffer unmaps it once the buffer's id is gone from the live ids its
 *     owner published (all_to_all_shm.c), so a freed buffer's pages are let go.
 *   - zt_shared_alloc falls back to aligned_alloc where a memfd cannot be made or the registry is
 *     full: the caller gets memory either way, and zt_shared_free takes both kinds.
 *   - Called from the engine's main thread at set-up and tear-down; the registry has a lock anyway.
 */
#define _GNU_SOURCE /* memfd_create */
#include "comm/comm_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct shared_buffer {
    uint64_t id;
    int fd;
    unsigned char *base;
    size_t bytes;
} shared_buffer;

static shared_buffer registry[ZT_SHARED_MAX];
static int n_registered;
static uint64_t next_id = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *zt_shared_alloc(size_t bytes) {
    size_t len = bytes ? (bytes + 4095) & ~(size_t)4095 : 4096;
    pthread_mutex_lock(&lock);
    bool room = n_registered < ZT_SHARED_MAX;
    pthread_mutex_unlock(&lock);
    int fd = room ? memfd_create("zerotrain-shared", MFD_CLOEXEC) : -1;
    void *p = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        if (fd >= 0) close(fd);
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    }
    pthread_mutex_lock(&lock);
    if (n_registered == ZT_SHARED_MAX) { /* filled by another thread meanwhile */
        pthread_mutex_unlock(&lock);
        munmap(p, len);
        close(fd);
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    }
    registry[n_registered++] = (shared_buffer){next_id++, fd, p, len};
    pthread_mutex_unlock(&lock);
    return p;
}

void zt_shared_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_registered; i++)
        if (registry[i].base == p) {
            shared_buffer b = registry[i];
            registry[i] = registry[--n_registered];
            pthread_mutex_unlock(&lock);
            munmap(b.base, b.bytes);
            close(b.fd);
            return;
        }
    pthread_mutex_unlock(&lock);
    free(p);
}

bool zt_shared_find_(const void *p, size_t len, zt_shared_ref *ref) {
    const unsigned char *q = p;
    bool hit = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_registered && !hit; i++) {
        const shared_buffer *b = &registry[i];
        if (q >= b->base && (size_t)(q - b->base) <= b->bytes && len <= b->bytes - (size_t)(q - b->base)) {
            *ref = (zt_shared_ref){b->id, b->fd, (uint64_t)(q - b->base), b->bytes};
            hit = true;
        }
    }
    pthread_mutex_unlock(&lock);
    return hit;
}

int zt_shared_live_(uint64_t *ids) {
    pthread_mutex_lock(&lock);
    int n = n_registered;
    for (int i = 0; i < n; i++) ids[i] = registry[i].id;
    pthread_mutex_unlock(&lock);
    return n;
}
