/* tokenizer_spm_internal.h - the insides of a zt_spm, shared by tokenizer_spm.c (encoding,
 * decoding) and tokenizer_spm_load.c (reading tokenizer.json into it). Private to those two. */
#ifndef ZT_TOKENIZER_SPM_INTERNAL_H
#define ZT_TOKENIZER_SPM_INTERNAL_H

#include "data/tokenizer_spm.h"

#include <stddef.h>
#include <stdint.h>

#define SPM_MAX_STEPS 16

enum { STEP_PREPEND, STEP_REPLACE, STEP_BYTE_FALLBACK, STEP_FUSE, STEP_STRIP, STEP_METASPACE };
enum { PREPEND_NEVER, PREPEND_FIRST, PREPEND_ALWAYS };

typedef struct spm_step {
    int kind;
    char *a, *b; /* Prepend: a; Replace: a -> b; Strip: a (one character); Metaspace: a (replacement) */
    size_t al, bl;
    int start, stop; /* Strip */
    int prepend;     /* Metaspace */
} spm_step;

typedef struct spm_added {
    char *content, *norm; /* norm: content through the normalizer (normalized tokens only) */
    size_t len, norm_len;
    uint32_t id;
    bool normalized, lstrip, rstrip, single_word;
} spm_added;

typedef struct spm_slot {
    uint64_t h; /* 0: empty */
    uint32_t off, len, id;
} spm_slot;

typedef struct spm_merge {
    uint64_t key; /* 0: empty; else 1 << 63 | a << 32 | b */
    uint32_t rank, id;
} spm_merge;

/* A string and, for each of its bytes, the input offset it came from. */
typedef struct spm_text {
    char *s;
    uint32_t *at;
    size_t n, cap;
} spm_text;

typedef struct spm_out {
    uint32_t *tok, *off;
    size_t n, cap;
} spm_out;

struct zt_spm {
    spm_slot *vslots; /* vocabulary: piece bytes -> id; keys in the arena */
    size_t vcap, vcount;
    char *keys;
    size_t keys_len, keys_cap;
    uint32_t *piece_off, *piece_len; /* (n_ids) id -> its text in keys, len UINT32_MAX if none */
    size_t n_ids;
    spm_merge *mslots; /* (a, b) -> rank and merged id */
    size_t mcap, mcount;
    int32_t byte_id[256]; /* <0xNN> -> id, -1 if absent */
    bool byte_fallback, fuse_unk, ignore_merges;
    int64_t unk_id; /* -1: no unk_token */
    spm_step norm[SPM_MAX_STEPS], dec[SPM_MAX_STEPS];
    int n_norm, n_dec;
    bool metaspace, ms_split;
    char *rep; /* Metaspace replacement */
    size_t rep_len;
    int ms_prepend;
    spm_added *added;
    size_t *next; /* (n_added) scratch: where each added token next occurs */
    int n_added, n_norm_added;
    /* scratch for encoding */
    spm_text t[3];
    uint32_t *sid, *sstart, *slen;
    int32_t *sprev, *snext;
    uint64_t *heap;
    size_t scap;
};

/* The vocabulary: the slot of piece p[0..n), or NULL; vput sets p -> id (a later id of the same
 * piece overwrites). The merges: (a, b) -> (rank, merged id), a later rank overwriting. vput and
 * mput return -1 when out of memory. */
spm_slot *zt_spm_vfind(const zt_spm *s, const char *p, size_t n);
int zt_spm_vput(zt_spm *s, const char *p, size_t n, uint32_t id);
int zt_spm_mput(zt_spm *s, uint32_t a, uint32_t b, uint32_t rank, uint32_t id);
/* Runs the normalizer over p[0..n) into a malloc'd *out of *out_len bytes (-1: out of memory). */
int zt_spm_normalize_string(zt_spm *s, const char *p, size_t n, char **out, size_t *out_len);

#endif
