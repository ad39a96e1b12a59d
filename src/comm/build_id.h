/* build_id.h - the build fingerprint (what this binary is: zerotrain's version and git commit, the
 * compiler, the OpenBLAS, oneDNN and MPI libraries it runs with) and the start-up check that every
 * rank runs the same one (docs/reliability.md, row I06). */
#ifndef ZT_COMM_BUILD_ID_H
#define ZT_COMM_BUILD_ID_H

#include "comm/comm.h"

enum { ZT_BUILD_FIELDS = 7, ZT_BUILD_FIELD_LEN = 96 };

typedef struct zt_build_id {
    char v[ZT_BUILD_FIELDS][ZT_BUILD_FIELD_LEN]; /* in the order of zt_build_field_name */
} zt_build_id;

/* "zerotrain", "commit", "compiler", "openblas", "onednn", "mpi", "isa" for k = 0..6. */
const char *zt_build_field_name(int k);

/* This process's fingerprint: the compiled-in version and commit (cmake/build_commit.cmake) and
 * compiler, and the libraries as loaded (openblas_get_config less the CPU core it chose, which
 * may differ between nodes; dnnl_version; MPI_Get_library_version's first line) and the code paths
 * that decide the bits: the kernels' instruction-set level and the fp32 GEMM's library and ISA
 * (kernels/dispatch.c, gemm.c: hosts of different CPUs must agree on ZT_ISA). The test hook
 * ZT_FAKE_BUILD_ID=TEXT replaces the commit, ZT_FAKE_BUILD_ID=FIELD=TEXT the named field. */
void zt_build_id_get(zt_build_id *b);

/* Collective over world: every rank's fingerprint is gathered and compared with rank 0's;
 * ZT_ERR_MISMATCH (exit 9) lists each differing rank's fields with both values. */
int zt_build_id_check(zt_comm *world, zt_error *err);

#endif
