/* probe.c - at start-up, before the first step: can this rank write the checkpoint directory?
 * A run that could not save should say so now (exit 8), not at its first checkpoint, hours in. */
#include "ckpt/checkpoint.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int zt_ckpt_probe(const char *dir, int rank, zt_error *err) {
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.zt-probe-rank-%d", dir, rank);
    zt_make_parent_dirs(probe);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int en = errno;
    if (fd >= 0 && write(fd, "ok\n", 3) != 3) en = errno, close(fd), fd = -2;
    if (fd >= 0) close(fd);
    unlink(probe);
    if (fd < 0)
        return zt_error_set(err, ZT_ERR_IO, "checkpoint directory %s is not writable by rank %d: %s (checked before "
                            "the first step)", dir, rank, strerror(en));
    return ZT_OK;
}
