/* packing.h - the records of a dataset cache (one split) laid into training sequences of T inputs:
 * packed (whole records, best-fit decreasing as TRL's "bfd" strategy: the longest first, each into
 * the fullest sequence it still fits; no record is cut, so no attention and no loss crosses
 * records, and the tail of a sequence is padding) or padded (one record per sequence). A record of
 * n tokens gives n - 1 inputs with their next-token targets; a target the record does not count is
 * -1 (zt_batch.targets); positions restart at 0 at every record (zt_batch.positions). A record
 * longer than T + 1 tokens is truncated to its first T + 1 or dropped (data.too_long), counted. */
#ifndef ZT_PACKING_H
#define ZT_PACKING_H

#include "data/dataset_cache.h"

#include <stdbool.h>

typedef enum zt_too_long { ZT_TOO_LONG_TRUNCATE, ZT_TOO_LONG_DROP } zt_too_long;

typedef struct zt_packed {
    const zt_dataset *d;
    int T;
    bool pack;
    int32_t pad_id;
    uint64_t n_seq;
    uint64_t *seq_begin;   /* (n_seq + 1) into the pieces */
    uint64_t *piece_doc;   /* each piece's record */
    uint32_t *piece_len;   /* its inputs (tokens - 1, at most T) */
    uint32_t *seq_counted; /* counted targets of each sequence */
    /* what was done, for the report */
    uint64_t docs, truncated, dropped, too_short, inputs, counted;
} zt_packed;

/* Lays out the records of d in the validation split (val) or the training split (!val).
 * ZT_ERR_DATA when no record is left (naming why), ZT_ERR_NOMEM. */
int zt_packed_build(zt_packed *p, const zt_dataset *d, bool val, int T, bool pack, zt_too_long too_long,
                    int32_t pad_id, zt_error *err);
void zt_packed_free(zt_packed *p);
/* Sequence s (< n_seq): inputs, targets (-1: not counted), positions (NULL: not wanted), T each. */
void zt_packed_fill(const zt_packed *p, uint64_t s, int32_t *inputs, int32_t *targets, int32_t *positions);
/* The share of the n_seq * T input slots holding a record's token (packing efficiency). */
double zt_packed_fill_ratio(const zt_packed *p);

#endif
