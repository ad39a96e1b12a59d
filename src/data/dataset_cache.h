/* dataset_cache.h - a tokenized dataset on disk: every record's token ids, which of them the loss
 * counts, and where each record begins; written once by a streaming writer (atomically: a reader
 * sees a whole cache or none), read back mapped. Layout (little-endian):
 *   header   64 bytes: "ZTDSET01", u64 key (what it was made from: dataset_build.c), u64 docs,
 *            u64 tokens, u64 index offset, u64 val docs, u64 counted tokens, u64 xxh64 of the 56
 *            bytes before it
 *   body     per record: u32 ids[n], then u8 counted[n] padded to a multiple of 4 bytes
 *   index    per record: u64 body offset, u32 n, u32 flags (bit 0: validation split)
 *   trailer  u64 xxh64 of body and index
 * The reader checks every one of these and says which is wrong. */
#ifndef ZT_DATASET_CACHE_H
#define ZT_DATASET_CACHE_H

#include "zerotrain/zerotrain.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define ZT_DOC_VAL 1u /* index flag: the record is in the validation split */

typedef struct zt_dataset_writer zt_dataset_writer;

/* Starts path's temporary. ZT_ERR_IO / ZT_ERR_NOMEM. */
int zt_dataset_writer_open(zt_dataset_writer **out, const char *path, uint64_t key, zt_error *err);
/* Appends a record of n tokens; counted[i] nonzero: token i is a target the loss counts. */
int zt_dataset_writer_add(zt_dataset_writer *w, const uint32_t *ids, const uint8_t *counted, uint32_t n,
                          uint32_t flags, zt_error *err);
/* Publishes the cache (ok false: abandons it); frees w either way. */
int zt_dataset_writer_close(zt_dataset_writer *w, bool ok, zt_error *err);

typedef struct zt_dataset {
    uint64_t key, n_docs, n_tokens, n_val, n_counted;
    void *map;
    size_t map_len;
    const uint8_t *index; /* n_docs entries of 16 bytes */
    char path[4096];
} zt_dataset;

/* Maps and verifies path. ZT_ERR_IO when it cannot be read, ZT_ERR_DATA naming what does not hold
 * (magic, header checksum, sizes, trailer checksum, an index entry). */
int zt_dataset_open(zt_dataset *d, const char *path, zt_error *err);
void zt_dataset_close(zt_dataset *d);
/* Record i: its n tokens, their counted flags, its index flags. */
void zt_dataset_doc(const zt_dataset *d, uint64_t i, const uint32_t **ids, const uint8_t **counted, uint32_t *n,
                    uint32_t *flags);
/* Reads only the header of path: its key, or ZT_ERR_IO/ZT_ERR_DATA when absent or not a cache. */
int zt_dataset_peek_key(const char *path, uint64_t *key, zt_error *err);

#endif
