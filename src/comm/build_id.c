/* build_id.c - the build fingerprint and its check across ranks (build_id.h): ranks started from
 * different builds or against different libraries would otherwise meet in collectives with other
 * layouts or other numbers (NVIDIA/nccl#1634: nodes with different installs hang silently), so
 * they compare fingerprints before anything else and stop with exit 9 naming what differs.
 *
 * Invariants: the fingerprint is fixed-size text (each field cut to ZT_BUILD_FIELD_LEN - 1
 * characters) so every rank gathers the same number of bytes whatever it holds; only
 * ZT_FAKE_BUILD_ID (a test hook) changes it from outside. */
#include "comm/build_id.h"
#include "core/env.h"
#include "core/cpu_isa.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"

#include "zt_build_commit.h" /* generated at build time: ZT_BUILD_COMMIT */

#include <cblas.h>
#include <mpi.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const FIELDS[ZT_BUILD_FIELDS] = {"zerotrain", "commit", "compiler", "openblas", "onednn", "mpi", "isa"};

const char *zt_build_field_name(int k) { return k >= 0 && k < ZT_BUILD_FIELDS ? FIELDS[k] : "?"; }

/* OpenBLAS's configuration words less the core it picked for this CPU (DYNAMIC_ARCH builds
 * choose per machine; the build is the same). */
static void openblas_text(char *out, size_t cap) {
    const char *cfg = openblas_get_config(), *core = openblas_get_corename();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", cfg ? cfg : "unknown");
    size_t used = 0;
    out[0] = '\0';
    char *save = NULL;
    for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (core && !strcasecmp(w, core)) continue;
        int n = snprintf(out + used, cap - used, "%s%s", used ? " " : "", w);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
}

void zt_build_id_get(zt_build_id *b) {
    memset(b, 0, sizeof *b);
    snprintf(b->v[0], ZT_BUILD_FIELD_LEN, "%s", ZT_VERSION);
    snprintf(b->v[1], ZT_BUILD_FIELD_LEN, "%s", ZT_BUILD_COMMIT);
#if defined(__clang__)
    snprintf(b->v[2], ZT_BUILD_FIELD_LEN, "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(b->v[2], ZT_BUILD_FIELD_LEN, "gcc %s", __VERSION__);
#else
    snprintf(b->v[2], ZT_BUILD_FIELD_LEN, "unknown");
#endif
    openblas_text(b->v[3], ZT_BUILD_FIELD_LEN);
    const dnnl_version_t *d = dnnl_version();
    snprintf(b->v[4], ZT_BUILD_FIELD_LEN, "%d.%d.%d%s%s", d->major, d->minor, d->patch,
             d->hash && strcmp(d->hash, "N/A") ? " " : "", d->hash && strcmp(d->hash, "N/A") ? d->hash : "");
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) != MPI_SUCCESS) len = 0;
    mpi[len < (int)sizeof mpi ? len : (int)sizeof mpi - 1] = '\0';
    mpi[strcspn(mpi, "\r\n")] = '\0';
    /* "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022" */
    char *rev = strstr(mpi, ", repo rev");
    if (rev) *rev = '\0';
    snprintf(b->v[5], ZT_BUILD_FIELD_LEN, "%s", len ? mpi : "unknown");
    snprintf(b->v[6], ZT_BUILD_FIELD_LEN, "%s; gemm %s", zt_isa_name((zt_isa)zt_kernels_isa()), zt_gemm_path(false));
    const char *fake = zt_env(ZT_ENV_FAKE_BUILD_ID); /* the test hook (docs/reliability.md, I06) */
    if (fake && *fake) {
        int k = 1;
        const char *eq = strchr(fake, '=');
        for (int f = 0; eq && f < ZT_BUILD_FIELDS; f++)
            if ((size_t)(eq - fake) == strlen(FIELDS[f]) && !strncmp(fake, FIELDS[f], (size_t)(eq - fake))) {
                k = f;
                fake = eq + 1;
            }
        snprintf(b->v[k], ZT_BUILD_FIELD_LEN, "%s", fake);
    }
}

int zt_build_id_check(zt_comm *world, zt_error *err) {
    int n = zt_comm_size(world);
    if (n < 2) return ZT_OK;
    enum { WORDS = sizeof(zt_build_id) / sizeof(double) };
    _Static_assert(sizeof(zt_build_id) % sizeof(double) == 0, "the fingerprint travels as doubles");
    zt_build_id mine;
    zt_build_id_get(&mine);
    double send[WORDS];
    memcpy(send, &mine, sizeof mine); /* raw bytes */
    double *all = malloc((size_t)n * sizeof mine);
    if (!all) return zt_error_set(err, ZT_ERR_NOMEM, "build fingerprint: out of memory for %d ranks", n);
    int rc = zt_all_gather_f64(world, send, all, WORDS, "build fingerprint", err);
    if (rc) {
        free(all);
        return rc;
    }
    const zt_build_id *ids = (const zt_build_id *)all, *r0 = &ids[0];
    char text[900] = "";
    size_t used = 0;
    int differ = 0;
    bool isa_differs = false;
    for (int r = 1; r < n; r++)
        for (int k = 0; k < ZT_BUILD_FIELDS; k++) {
            if (!strncmp(ids[r].v[k], r0->v[k], ZT_BUILD_FIELD_LEN)) continue;
            differ++;
            isa_differs |= k == ZT_BUILD_FIELDS - 1;
            if (used + 40 >= sizeof text) continue; /* counted, not listed */
            int w = snprintf(text + used, sizeof text - used, "%srank %d %s \"%.*s\" vs rank 0 \"%.*s\"",
                             used ? "; " : "", r, FIELDS[k], ZT_BUILD_FIELD_LEN - 1, ids[r].v[k],
                             ZT_BUILD_FIELD_LEN - 1, r0->v[k]);
            used = w < 0 ? used : used + (size_t)w < sizeof text ? used + (size_t)w : sizeof text - 1;
        }
    free(all);
    if (!differ) return ZT_OK;
    return zt_error_set(err, ZT_ERR_MISMATCH, "the ranks run different builds (%d field%s differ%s): %s; start every "
                        "rank from the same zerotrain build and libraries%s", differ, differ == 1 ? "" : "s",
                        differ == 1 ? "s" : "", text,
                        isa_differs ? " (isa: hosts whose CPUs differ run different code paths; ZT_ISA set to a "
                                      "level every host has makes them agree)" : "");
}
