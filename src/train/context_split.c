/* context_split.c - the micro-batches of a context-parallel rank (docs/parallelism.md): the sampler
 * gives every rank of a data-parallel rank the same whole sequences; each keeps the two chunks of
 * them it holds (zt_cp_chunks: chunks p and 2P-1-p of 2P), their positions in the whole sequence
 * (rope's and the position table's rows; packed records: the positions within each document),
 * and, for packed records, the whole sequences' positions, which attention's masks read. */
#include "train/train_internal.h"

#include <stdlib.h>

int zt_train_cp_open(zt_run *r, zt_error *err) {
    const zt_mesh *M = r->s.mesh;
    r->cp = M->cp;
    r->cp_part = M->cp_rank;
    if (r->cp < 2) return ZT_OK;
    size_t held = r->s.pipe ? (size_t)r->A : 1, n = held * (size_t)r->B * (size_t)r->T;
    r->cpw_inp = malloc(n * sizeof *r->cpw_inp);
    r->cpw_tgt = malloc(n * sizeof *r->cpw_tgt);
    r->cp_pos = malloc(n / (size_t)r->cp * sizeof *r->cp_pos);
    if (r->data.positions) r->cpw_pos = malloc(n * sizeof *r->cpw_pos);
    if (!r->cpw_inp || !r->cpw_tgt || !r->cp_pos || (r->data.positions && !r->cpw_pos))
        return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory (context-parallel staging)");
    return ZT_OK;
}

void zt_train_cp_close(zt_run *r) {
    free(r->cpw_inp);
    free(r->cpw_tgt);
    free(r->cpw_pos);
    free(r->cp_pos);
    r->cpw_inp = r->cpw_tgt = r->cpw_pos = r->cp_pos = NULL;
}

void zt_train_cp_whole(zt_run *r, size_t slot, int32_t **inp, int32_t **tgt, int32_t **pos) {
    size_t at = slot * (size_t)r->B * (size_t)r->T;
    if (r->cp < 2) {
        *inp = r->inp + at, *tgt = r->tgt + at;
        *pos = r->data.positions ? r->data.pos + at : NULL;
        return;
    }
    *inp = r->cpw_inp + at, *tgt = r->cpw_tgt + at;
    *pos = r->data.positions ? r->cpw_pos + at : NULL;
}

void zt_train_cp_cut(zt_run *r, size_t slot, zt_batch *b, uint64_t *counted) {
    if (r->cp < 2) return;
    size_t at = slot * (size_t)b->B * (size_t)(b->T / r->cp);
    zt_cp_cut_batch(b, r->cp, r->cp_part, r->inp + at, r->tgt + at, r->cp_pos + at, b);
    if (counted) *counted = zt_batch_counted(b);
}
