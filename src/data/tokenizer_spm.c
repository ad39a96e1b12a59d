/* tokenizer_spm.c - SentencePiece-style BPE from a Hugging Face tokenizer.json (Llama 2, TinyLlama,
 * Mistral v0.1-v0.3, Gemma), run as the tokenizers library runs it.
 *
 * Read (anything else is refused with ZT_ERR_DATA naming the field):
 *   model          {"type": "BPE", "vocab": {piece: id}, "merges": ["a b", ...] or [["a", "b"], ...],
 *                   "byte_fallback", "fuse_unk", "unk_token", "ignore_merges"}; dropout null, no
 *                   continuing_subword_prefix / end_of_word_suffix; pieces are UTF-8 text. With
 *                   byte_fallback the vocabulary must hold <0xNN> pieces (Gemma lacks <0x09>: a tab
 *                   is a piece there; a byte without one makes its character <unk>).
 *   normalizer     null, {"type": "Prepend", "prepend": P}, {"type": "Replace", "pattern":
 *                   {"String": S}, "content": C}, or a Sequence of those (Llama 2 legacy, TinyLlama,
 *                   Mistral: Sequence[Prepend("▁"), Replace(" ", "▁")]; Gemma: Replace only).
 *   pre_tokenizer  null or {"type": "Metaspace", "replacement": R, "prepend_scheme": "first" |
 *                   "always" | "never" (or the older "add_prefix_space"), "split": bool}.
 *   added_tokens   special, normalized, lstrip, rstrip, single_word: tokens that are not
 *                   normalized are found in the raw text first (leftmost, longest), lstrip/rstrip
 *                   take the whitespace beside the match with them, single_word needs no word
 *                   character (ASCII letter, digit, '_' or any non-ASCII character: an approximation
 *                   of Rust's char::is_alphanumeric) on either side; normalized ones are found in
 *                   each normalized span, their content normalized the same way.
 *   decoder        null, Replace(String), ByteFallback, Fuse, Strip, Metaspace, or a Sequence.
 * The post_processor (which BOS/EOS a sequence gets) is read by tokenizer_json.c.
 *
 * Encoding (tokenizers' TokenizerImpl::encode without the post-processor): the added tokens split
 * the text; each span between them is normalized, split by the normalized added tokens, run
 * through Metaspace (split at each "▁" when split is true: the "▁" begins a word), and each word
 * is merged: symbols are its characters (a character without a piece becomes its <0xNN> bytes, else
 * <unk>, runs of <unk> fused under fuse_unk), then repeatedly the pair of lowest merge rank, the
 * leftmost among equals, is merged (word.rs's priority queue, here a binary heap of rank << 32 |
 * position, stale entries skipped when the pair there no longer has that rank).
 *
 * Invariants: every merge's two pieces and its result are in the vocabulary (checked at load);
 * spm_text keeps, for each byte of a normalized string, the byte offset in the (repaired) input
 * it came from: a prepended or replaced-in "▁" has the offset of the character it stands before
 * or for. Not thread-safe: encoding uses scratch arrays inside the zt_spm. */
#define _GNU_SOURCE /* memmem */
#include "data/tokenizer_spm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---------------------------------------------------------------------------------------------
 * Tables. */

static uint64_t hash_bytes(const void *p, size_t n) { return XXH3_64bits(p, n) | 1u; }

spm_slot *zt_spm_vfind(const zt_spm *s, const char *p, size_t n) {
    if (!s->vcap) return NULL;
    uint64_t h = hash_bytes(p, n);
    for (size_t i = h & (s->vcap - 1);; i = (i + 1) & (s->vcap - 1)) {
        spm_slot *x = &s->vslots[i];
        if (!x->h) return NULL;
        if (x->h == h && x->len == n && !memcmp(s->keys + x->off, p, n)) return x;
    }
}

static int vgrow(zt_spm *s) {
    size_t cap = s->vcap ? 2 * s->vcap : 4096;
    spm_slot *ns = calloc(cap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < s->vcap; i++) {
        if (!s->vslots[i].h) continue;
        size_t j = s->vslots[i].h & (cap - 1);
        while (ns[j].h) j = (j + 1) & (cap - 1);
        ns[j] = s->vslots[i];
    }
    free(s->vslots);
    s->vslots = ns;
    s->vcap = cap;
    return 0;
}

/* piece -> id, overwriting an earlier id of the same piece (JSON.parse and serde keep the last). */
int zt_spm_vput(zt_spm *s, const char *p, size_t n, uint32_t id) {
    spm_slot *x = zt_spm_vfind(s, p, n);
    if (x) {
        x->id = id;
        return 0;
    }
    if ((s->vcount + 1) * 4 > s->vcap * 3 && vgrow(s)) return -1;
    if (s->keys_len + n > UINT32_MAX) return -1;
    if (s->keys_len + n > s->keys_cap) {
        size_t cap = s->keys_cap ? s->keys_cap : 65536;
        while (cap < s->keys_len + n) cap *= 2;
        char *k = realloc(s->keys, cap);
        if (!k) return -1;
        s->keys = k;
        s->keys_cap = cap;
    }
    memcpy(s->keys + s->keys_len, p, n);
    uint64_t h = hash_bytes(p, n);
    size_t i = h & (s->vcap - 1);
    while (s->vslots[i].h) i = (i + 1) & (s->vcap - 1);
    s->vslots[i] = (spm_slot){h, (uint32_t)s->keys_len, (uint32_t)n, id};
    s->keys_len += n;
    s->vcount++;
    return 0;
}

static uint64_t merge_key(uint32_t a, uint32_t b) { return 1ull << 63 | (uint64_t)a << 32 | b; }

/* The slot hash of a merge key: murmur3's finalizer (inlined; the merge table is the hot path). */
static inline uint64_t merge_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static const spm_merge *mfind(const zt_spm *s, uint32_t a, uint32_t b) {
    uint64_t k = merge_key(a, b), h = merge_hash(k);
    for (size_t i = h & (s->mcap - 1);; i = (i + 1) & (s->mcap - 1)) {
        const spm_merge *m = &s->mslots[i];
        if (!m->key) return NULL;
        if (m->key == k) return m;
    }
}

/* (a, b) -> (rank, id); a later merge of the same pair overwrites the rank (HashMap insert). */
int zt_spm_mput(zt_spm *s, uint32_t a, uint32_t b, uint32_t rank, uint32_t id) {
    if ((s->mcount + 1) * 2 > s->mcap) {
        size_t cap = s->mcap ? 2 * s->mcap : 4096;
        spm_merge *nm = calloc(cap, sizeof *nm);
        if (!nm) return -1;
        for (size_t i = 0; i < s->mcap; i++) {
            if (!s->mslots[i].key) continue;
            uint64_t h = merge_hash(s->mslots[i].key);
            size_t j = h & (cap - 1);
            while (nm[j].key) j = (j + 1) & (cap - 1);
            nm[j] = s->mslots[i];
        }
        free(s->mslots);
        s->mslots = nm;
        s->mcap = cap;
    }
    uint64_t k = merge_key(a, b), h = merge_hash(k);
    size_t i = h & (s->mcap - 1);
    while (s->mslots[i].key && s->mslots[i].key != k) i = (i + 1) & (s->mcap - 1);
    if (!s->mslots[i].key) s->mcount++;
    s->mslots[i] = (spm_merge){k, rank, id};
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * UTF-8. */

/* The length of the strictly valid UTF-8 character at p[0..n), 0 if invalid; *cp its code point. */
static size_t utf8_char(const unsigned char *p, size_t n, uint32_t *cp) {
    unsigned char c = p[0];
    if (c < 0x80) return *cp = c, 1;
    size_t k;
    uint32_t v;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) k = 2, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 3, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if (p[i] < lo || p[i] > hi) return 0;
        lo = 0x80, hi = 0xbf;
        v = v << 6 | (p[i] & 0x3f);
    }
    *cp = v;
    return k;
}

/* Length of the character at p[0..n): never 0 (an invalid byte counts as one). */
static size_t char_len(const char *p, size_t n) {
    uint32_t cp;
    size_t k = utf8_char((const unsigned char *)p, n, &cp);
    return k ? k : 1;
}

int zt_spm_utf8_repair(const unsigned char *s, size_t len, char **out, uint32_t **map, size_t *olen) {
    *out = malloc(3 * len + 1);
    *map = malloc((3 * len + 1) * sizeof **map);
    if (!*out || !*map) return -1;
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_char(s + i, len - i, &cp), at = i;
        if (k) {
            for (size_t j = 0; j < k; j++) (*out)[o] = (char)s[i + j], (*map)[o++] = (uint32_t)(i + j);
            i += k;
            continue;
        }
        unsigned char c = s[i++], lo = 0x80, hi = 0xbf;
        size_t need = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
        for (size_t j = 0; j < need && i < len && s[i] >= lo && s[i] <= hi; j++, i++) lo = 0x80, hi = 0xbf;
        for (int j = 0; j < 3; j++) (*out)[o] = (char)"\xef\xbf\xbd"[j], (*map)[o++] = (uint32_t)at;
    }
    *olen = o;
    return 0;
}

/* Rust's char::is_whitespace (the Unicode White_Space property). */
static bool is_ws(uint32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* A word character for single_word (see the top of the file). */
static bool is_word(uint32_t c) {
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The code point that ends at p[end) (scanning back from end > lo), and its start via *start. */
static uint32_t char_before(const char *p, size_t lo, size_t end, size_t *start) {
    size_t i = end - 1;
    while (i > lo && ((unsigned char)p[i] & 0xc0) == 0x80 && end - i < 4) i--;
    uint32_t cp;
    if (utf8_char((const unsigned char *)p + i, end - i, &cp) != end - i) cp = (unsigned char)p[end - 1], i = end - 1;
    *start = i;
    return cp;
}

/* ---------------------------------------------------------------------------------------------
 * Normalization: spm_text steps. */

static int text_reserve(spm_text *t, size_t extra) {
    if (t->n + extra <= t->cap) return 0;
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->n + extra) cap *= 2;
    char *s = realloc(t->s, cap);
    if (s) t->s = s;
    uint32_t *at = realloc(t->at, cap * sizeof *at);
    if (at) t->at = at;
    if (!s || !at) return -1;
    t->cap = cap;
    return 0;
}

/* Appends p[0..n) with the offsets at[0..n), or all at one offset when at is NULL. */
static int text_add(spm_text *t, const char *p, size_t n, const uint32_t *at, uint32_t one) {
    if (text_reserve(t, n)) return -1;
    memcpy(t->s + t->n, p, n);
    for (size_t i = 0; i < n; i++) t->at[t->n + i] = at ? at[i] : one;
    t->n += n;
    return 0;
}

/* out = in with every a replaced by b (left to right, no overlaps); b's bytes get a's offset. */
static int text_replace(spm_text *out, const spm_text *in, const char *a, size_t al, const char *b, size_t bl) {
    out->n = 0;
    size_t i = 0;
    while (i < in->n) {
        const char *hit = al ? memmem(in->s + i, in->n - i, a, al) : NULL;
        size_t j = hit ? (size_t)(hit - in->s) : in->n;
        if (text_add(out, in->s + i, j - i, in->at + i, 0)) return -1;
        if (!hit) break;
        if (text_add(out, b, bl, NULL, in->at[j])) return -1;
        i = j + al;
    }
    return 0;
}

/* out = p + in when in is not empty (the prepended bytes get the offset of in's first byte). */
static int text_prepend(spm_text *out, const spm_text *in, const char *p, size_t pl) {
    out->n = 0;
    if (!in->n) return 0;
    if (text_add(out, p, pl, NULL, in->at[0]) || text_add(out, in->s, in->n, in->at, 0)) return -1;
    return 0;
}

/* Runs the normalizer over s->t[0] in place (s->t[1] is scratch). */
static int normalize(zt_spm *s) {
    for (int i = 0; i < s->n_norm; i++) {
        const spm_step *st = &s->norm[i];
        int rc = st->kind == STEP_PREPEND ? text_prepend(&s->t[1], &s->t[0], st->a, st->al)
                                          : text_replace(&s->t[1], &s->t[0], st->a, st->al, st->b, st->bl);
        if (rc) return -1;
        spm_text x = s->t[0];
        s->t[0] = s->t[1];
        s->t[1] = x;
    }
    return 0;
}

int zt_spm_normalize_string(zt_spm *s, const char *p, size_t n, char **out, size_t *out_len) {
    s->t[0].n = 0;
    if (text_add(&s->t[0], p, n, NULL, 0) || normalize(s) || !(*out = malloc(s->t[0].n + 1))) return -1;
    memcpy(*out, s->t[0].s, s->t[0].n);
    *out_len = s->t[0].n;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The model: merging one word. */

static int out_add(spm_out *o, uint32_t tok, uint32_t off) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 1024;
        uint32_t *t = realloc(o->tok, cap * sizeof *t);
        if (t) o->tok = t;
        uint32_t *f = realloc(o->off, cap * sizeof *f);
        if (f) o->off = f;
        if (!t || !f) return -1;
        o->cap = cap;
    }
    o->tok[o->n] = tok;
    o->off[o->n++] = off;
    return 0;
}

static int scratch(zt_spm *s, size_t n) {
    if (n <= s->scap) return 0;
    size_t cap = s->scap ? s->scap : 256;
    while (cap < n) cap *= 2;
    void *p[6] = {realloc(s->sid, cap * 4), realloc(s->sstart, cap * 4), realloc(s->slen, cap * 4),
                  realloc(s->sprev, cap * 4), realloc(s->snext, cap * 4), realloc(s->heap, 3 * cap * 8)};
    if (p[0]) s->sid = p[0];
    if (p[1]) s->sstart = p[1];
    if (p[2]) s->slen = p[2];
    if (p[3]) s->sprev = p[3];
    if (p[4]) s->snext = p[4];
    if (p[5]) s->heap = p[5];
    for (int i = 0; i < 6; i++)
        if (!p[i]) return -1;
    s->scap = cap;
    return 0;
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i && h[(i - 1) / 2] > v) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* Pushes the merge of symbols i and next[i], if there is one. */
static void push_pair(zt_spm *s, size_t *hn, int32_t i) {
    if (i < 0 || s->snext[i] < 0) return;
    const spm_merge *m = mfind(s, s->sid[i], s->sid[s->snext[i]]);
    if (m) heap_push(s->heap, hn, (uint64_t)m->rank << 32 | (uint32_t)i);
}

/* Merges the word w (bytes [a, b) of text t) and appends its tokens with their input offsets
 * (at[] of t, then map when the input was repaired). */
static int bpe_word(zt_spm *s, const spm_text *t, size_t a, size_t b, const uint32_t *map, spm_out *o) {
    const char *w = t->s;
    if (s->ignore_merges) {
        const spm_slot *x = zt_spm_vfind(s, w + a, b - a);
        if (x) return out_add(o, x->id, map ? map[t->at[a]] : t->at[a]);
    }
    if (scratch(s, b - a + 1)) return -1;
    size_t ns = 0;
    int64_t unk_start = -1; /* a pending <unk> from unk_start to the current position */
    for (size_t i = a; i < b;) {
        size_t k = char_len(w + i, b - i);
        const spm_slot *x = zt_spm_vfind(s, w + i, k);
        bool bytes = !x && s->byte_fallback;
        for (size_t j = 0; bytes && j < k; j++) bytes = s->byte_id[(unsigned char)w[i + j]] >= 0;
        if ((x || bytes) && unk_start >= 0) {
            s->sid[ns] = (uint32_t)s->unk_id, s->sstart[ns] = (uint32_t)unk_start;
            s->slen[ns++] = (uint32_t)(i - (size_t)unk_start);
            unk_start = -1;
        }
        if (x) {
            s->sid[ns] = x->id, s->sstart[ns] = (uint32_t)i, s->slen[ns++] = (uint32_t)k;
        } else if (bytes) {
            for (size_t j = 0; j < k; j++)
                s->sid[ns] = (uint32_t)s->byte_id[(unsigned char)w[i + j]], s->sstart[ns] = (uint32_t)(i + j),
                s->slen[ns++] = 1;
        } else if (s->unk_id >= 0) { /* no unk_token: the character is dropped, as tokenizers does */
            if (unk_start >= 0 && !s->fuse_unk) {
                s->sid[ns] = (uint32_t)s->unk_id, s->sstart[ns] = (uint32_t)unk_start;
                s->slen[ns++] = (uint32_t)(i - (size_t)unk_start);
                unk_start = -1;
            }
            if (unk_start < 0) unk_start = (int64_t)i;
        }
        i += k;
    }
    if (unk_start >= 0)
        s->sid[ns] = (uint32_t)s->unk_id, s->sstart[ns] = (uint32_t)unk_start, s->slen[ns++] = (uint32_t)(b - unk_start);
    size_t hn = 0;
    for (size_t i = 0; i < ns; i++) s->sprev[i] = (int32_t)i - 1, s->snext[i] = i + 1 < ns ? (int32_t)i + 1 : -1;
    for (size_t i = 0; i + 1 < ns; i++) push_pair(s, &hn, (int32_t)i);
    while (hn) {
        uint64_t top = heap_pop(s->heap, &hn);
        int32_t p = (int32_t)(uint32_t)top, q = s->snext[p];
        if (!s->slen[p] || q < 0) continue;
        const spm_merge *m = mfind(s, s->sid[p], s->sid[q]);
        if (!m || m->rank != top >> 32) continue; /* stale: the pair at p has changed */
        s->sid[p] = m->id;
        s->slen[p] += s->slen[q];
        s->slen[q] = 0;
        s->snext[p] = s->snext[q];
        if (s->snext[q] >= 0) s->sprev[s->snext[q]] = p;
        push_pair(s, &hn, s->sprev[p]);
        push_pair(s, &hn, p);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = s->snext[i]) {
        uint32_t off = t->at[s->sstart[i]];
        if (out_add(o, s->sid[i], map ? map[off] : off)) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Encoding: added tokens, then per span normalizer, pre-tokenizer, model. */

typedef struct spm_piece {
    size_t a, b;
    int64_t id; /* -1: text */
} spm_piece;

typedef struct spm_pieces {
    spm_piece *p;
    size_t n, cap;
} spm_pieces;

static int pieces_add(spm_pieces *ps, size_t a, size_t b, int64_t id) {
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        spm_piece *p = realloc(ps->p, cap * sizeof *p);
        if (!p) return -1;
        ps->p = p;
        ps->cap = cap;
    }
    ps->p[ps->n++] = (spm_piece){a, b, id};
    return 0;
}

/* Splits t[0..n) by the added tokens whose normalized flag equals normalized (leftmost, longest at a
 * position), honouring single_word, lstrip and rstrip as added_vocabulary.rs does; pieces of text
 * and tokens go to ps in order (empty text pieces are left out). */
static int split_added(zt_spm *s, const char *t, size_t n, bool normalized, spm_pieces *ps) {
    ps->n = 0;
    size_t done = 0; /* the text before done is in ps */
    for (int i = 0; i < s->n_added; i++) s->next[i] = 0; /* 0 and below pos: look again */
    for (size_t pos = 0; pos < n;) {
        int best = -1;
        size_t at = n, blen = 0;
        for (int i = 0; i < s->n_added; i++) { /* the earliest match from pos, longest there */
            const spm_added *ad = &s->added[i];
            if (ad->normalized != normalized) continue;
            const char *c = normalized ? ad->norm : ad->content;
            size_t cl = normalized ? ad->norm_len : ad->len;
            if (s->next[i] != SIZE_MAX && (s->next[i] < pos || pos == 0)) {
                const char *hit = cl && cl <= n - pos ? memmem(t + pos, n - pos, c, cl) : NULL;
                s->next[i] = hit ? (size_t)(hit - t) : SIZE_MAX;
            }
            if (s->next[i] != SIZE_MAX && (s->next[i] < at || (s->next[i] == at && cl > blen)))
                at = s->next[i], blen = cl, best = i;
        }
        if (best < 0) break;
        const spm_added *ad = &s->added[best];
        size_t start = at, stop = at + blen, k;
        if (ad->single_word) {
            uint32_t cp = 0;
            bool left = start > 0 && is_word(char_before(t, 0, start, &k));
            bool right = stop < n && utf8_char((const unsigned char *)t + stop, n - stop, &cp) && is_word(cp);
            if (left || right) { /* not a match here: look again from the next character */
                pos = at + char_len(t + at, n - at);
                continue;
            }
        }
        if (ad->lstrip)
            while (start > done && is_ws(char_before(t, done, start, &k))) start = k;
        if (ad->rstrip) {
            uint32_t cp;
            while (stop < n && (k = utf8_char((const unsigned char *)t + stop, n - stop, &cp)) && is_ws(cp)) stop += k;
        }
        if ((start > done && pieces_add(ps, done, start, -1)) || pieces_add(ps, start, stop, ad->id)) return -1;
        done = pos = stop;
    }
    if (done < n && pieces_add(ps, done, n, -1)) return -1;
    return 0;
}

/* Metaspace over t[a..b) then the model over each word. first: the span starts the input. */
static int pre_tokenize(zt_spm *s, spm_text *t, size_t a, size_t b, bool first, const uint32_t *map, spm_out *o) {
    if (!s->metaspace) return bpe_word(s, t, a, b, map, o);
    spm_text *in = &s->t[1], *ms = &s->t[2];
    in->n = 0;
    if (text_add(in, t->s + a, b - a, t->at + a, 0) || text_replace(ms, in, " ", 1, s->rep, s->rep_len)) return -1;
    bool starts = ms->n >= s->rep_len && !memcmp(ms->s, s->rep, s->rep_len);
    if (!starts && (s->ms_prepend == PREPEND_ALWAYS || (s->ms_prepend == PREPEND_FIRST && first))) {
        if (text_prepend(in, ms, s->rep, s->rep_len)) return -1;
        ms = in; /* the prepended text */
    }
    if (!s->ms_split) return bpe_word(s, ms, 0, ms->n, map, o);
    size_t w = 0; /* each replacement begins a word (MergedWithNext) */
    for (size_t i = 0; i < ms->n;) {
        bool rep = i + s->rep_len <= ms->n && !memcmp(ms->s + i, s->rep, s->rep_len);
        if (rep && i > w) {
            if (bpe_word(s, ms, w, i, map, o)) return -1;
            w = i;
        }
        i += rep ? s->rep_len : char_len(ms->s + i, ms->n - i);
    }
    return ms->n > w ? bpe_word(s, ms, w, ms->n, map, o) : 0;
}

/* One span of the input between added tokens: text[a..b). */
static int encode_span(zt_spm *s, const char *text, size_t a, size_t b, const uint32_t *map, spm_out *o,
                       spm_pieces *sub) {
    spm_text *t = &s->t[0];
    t->n = 0;
    if (text_reserve(t, b - a)) return -1;
    memcpy(t->s, text + a, b - a);
    for (size_t i = a; i < b; i++) t->at[i - a] = (uint32_t)i;
    t->n = b - a;
    if (normalize(s)) return -1;
    t = &s->t[0];
    if (!t->n) return 0;
    spm_text norm = *t; /* keep it: pre_tokenize uses t[1] and t[2] only */
    if (s->n_norm_added && s->n_norm) {
        if (split_added(s, norm.s, norm.n, true, sub)) return -1;
    } else {
        sub->n = 0;
        if (pieces_add(sub, 0, norm.n, -1)) return -1;
    }
    for (size_t i = 0; i < sub->n; i++) {
        const spm_piece *p = &sub->p[i];
        uint32_t off = norm.at[p->a];
        int rc = p->id >= 0 ? out_add(o, (uint32_t)p->id, map ? map[off] : off)
                            : pre_tokenize(s, &norm, p->a, p->b, a == 0 && p->a == 0, map, o);
        if (rc) return -1;
    }
    return 0;
}

int zt_spm_encode(zt_spm *s, const char *utf8, size_t len, uint32_t **tokens, uint32_t **offsets, size_t *n,
                  zt_error *err) {
    *tokens = NULL;
    if (offsets) *offsets = NULL;
    *n = 0;
    if (!utf8 && len) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_encode: NULL text");
    if (len >= UINT32_MAX / 3)
        return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_encode: %zu bytes is too long for one call (split the text)",
                            len);
    char *fixed = NULL;
    uint32_t *map = NULL;
    const char *text = utf8;
    size_t i = 0;
    for (uint32_t cp; i < len;) {
        size_t k = utf8_char((const unsigned char *)utf8 + i, len - i, &cp);
        if (!k) break;
        i += k;
    }
    spm_out o = {0};
    spm_pieces ps = {0}, sub = {0};
    int rc = ZT_OK;
    if (i < len) {
        if (zt_spm_utf8_repair((const unsigned char *)utf8, len, &fixed, &map, &len)) goto nomem;
        text = fixed;
    }
    if (split_added(s, text, len, false, &ps)) goto nomem;
    for (size_t j = 0; j < ps.n; j++) {
        const spm_piece *p = &ps.p[j];
        if (p->id >= 0 ? out_add(&o, (uint32_t)p->id, map ? map[p->a] : (uint32_t)p->a)
                       : encode_span(s, text, p->a, p->b, map, &o, &sub))
            goto nomem;
    }
    if (!o.tok) { /* valid pointers even for no tokens */
        if (out_add(&o, 0, 0)) goto nomem;
        o.n = 0;
    }
    goto done;
nomem:
    rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory to encode %zu bytes", len);
done:
    free(fixed);
    free(map);
    free(ps.p);
    free(sub.p);
    if (rc) {
        free(o.tok);
        free(o.off);
        return rc;
    }
    *tokens = o.tok;
    *n = o.n;
    if (offsets) *offsets = o.off;
    else free(o.off);
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding: the decoder's steps over a list of strings. */

typedef struct spm_strs {
    char *buf;
    size_t len, cap;
    size_t *off, *n; /* string i is buf[off[i] .. off[i] + n[i]) */
    size_t count, scap;
} spm_strs;

static int strs_add(spm_strs *l, const char *p, size_t n) {
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->len + n + 1) cap *= 2;
        char *b = realloc(l->buf, cap);
        if (!b) return -1;
        l->buf = b;
        l->cap = cap;
    }
    if (l->count == l->scap) {
        size_t cap = l->scap ? 2 * l->scap : 64;
        size_t *a = realloc(l->off, cap * sizeof *a);
        if (a) l->off = a;
        size_t *b = realloc(l->n, cap * sizeof *b);
        if (b) l->n = b;
        if (!a || !b) return -1;
        l->scap = cap;
    }
    memcpy(l->buf + l->len, p, n);
    l->off[l->count] = l->len;
    l->n[l->count++] = n;
    l->len += n;
    return 0;
}

/* Appends to the last string (a new one when there is none). */
static int strs_append(spm_strs *l, const char *p, size_t n) {
    if (!l->count) return strs_add(l, p, n);
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->len + n + 1) cap *= 2;
        char *b = realloc(l->buf, cap);
        if (!b) return -1;
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, p, n);
    l->len += n;
    l->n[l->count - 1] += n;
    return 0;
}

static void strs_free(spm_strs *l) {
    free(l->buf);
    free(l->off);
    free(l->n);
}

/* "<0xNN>" -> NN, else -1. */
static int byte_piece(const char *p, size_t n) {
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One decoder step from in to out. */
static int dec_step(const spm_step *st, const spm_strs *in, spm_strs *out, bool continuing) {
    bool bytes_run = false;
    for (size_t i = 0; i < in->count; i++) {
        const char *p = in->buf + in->off[i];
        size_t n = in->n[i];
        int rc = 0;
        if (st->kind == STEP_REPLACE || st->kind == STEP_METASPACE) {
            /* Metaspace drops every replacement of the first string (decoders/metaspace.rs) */
            bool drop = st->kind == STEP_METASPACE && i == 0 && !continuing && st->prepend != PREPEND_NEVER;
            const char *a = st->a, *b = st->kind == STEP_REPLACE ? st->b : " ";
            size_t al = st->al, bl = st->kind == STEP_REPLACE ? st->bl : drop ? 0 : 1;
            rc = strs_add(out, "", 0);
            for (size_t j = 0; !rc && j < n;) {
                const char *hit = al ? memmem(p + j, n - j, a, al) : NULL;
                size_t e = hit ? (size_t)(hit - p) : n;
                rc = strs_append(out, p + j, e - j);
                if (!rc && hit) rc = strs_append(out, b, bl);
                j = hit ? e + al : n;
            }
        } else if (st->kind == STEP_BYTE_FALLBACK) { /* a run of <0xNN> becomes one string of bytes */
            int v = byte_piece(p, n);
            char c = (char)v;
            rc = v < 0 ? strs_add(out, p, n) : bytes_run ? strs_append(out, &c, 1) : strs_add(out, &c, 1);
            bytes_run = v >= 0;
        } else if (st->kind == STEP_FUSE) {
            rc = i == 0 ? strs_add(out, p, n) : strs_append(out, p, n);
        } else { /* STEP_STRIP: up to start leading and stop trailing copies of the character */
            size_t lo = 0, hi = n;
            for (int k = 0; k < st->start && !(continuing && i == 0); k++)
                if (hi - lo >= st->al && !memcmp(p + lo, st->a, st->al)) lo += st->al;
            for (int k = 0; k < st->stop; k++)
                if (hi - lo >= st->al && !memcmp(p + hi - st->al, st->a, st->al)) hi -= st->al;
            rc = strs_add(out, p + lo, hi - lo);
        }
        if (rc) return -1;
    }
    return 0;
}

int zt_spm_decode(const zt_spm *s, const uint32_t *tokens, size_t n, bool continuing, char **utf8, size_t *len,
                  zt_error *err) {
    *utf8 = NULL;
    *len = 0;
    if (!tokens && n) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_decode: NULL tokens");
    spm_strs a = {0}, b = {0};
    int rc = ZT_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t t = tokens[i];
        if (t >= s->n_ids || s->piece_len[t] == UINT32_MAX)
            rc = zt_error_set(err, ZT_ERR_DATA, "token %u at position %zu is not in the vocabulary (%zu ids)", t, i,
                              s->n_ids);
        else if (strs_add(&a, s->keys + s->piece_off[t], s->piece_len[t]))
            rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory to decode %zu tokens", n);
    }
    for (int k = 0; k < s->n_dec && !rc; k++) {
        b.len = b.count = 0;
        if (dec_step(&s->dec[k], &a, &b, continuing)) rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory to decode");
        spm_strs x = a;
        a = b;
        b = x;
    }
    char *o = rc ? NULL : malloc(a.len + 1);
    if (!rc && !o) rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory to decode %zu tokens", n);
    if (!rc) {
        size_t m = 0;
        for (size_t i = 0; i < a.count; i++) memcpy(o + m, a.buf + a.off[i], a.n[i]), m += a.n[i];
        o[m] = 0;
        *utf8 = o;
        *len = m;
    }
    strs_free(&a);
    strs_free(&b);
    return rc;
}

size_t zt_spm_vocab_size(const zt_spm *s) { return s->n_ids; }

int zt_spm_added_id(const zt_spm *s, const char *bytes, size_t len) {
    for (int i = 0; i < s->n_added; i++)
        if (s->added[i].len == len && !memcmp(s->added[i].content, bytes, len)) return (int)s->added[i].id;
    return -1;
}

int zt_spm_piece_id(const zt_spm *s, const char *bytes, size_t len) {
    int id = zt_spm_added_id(s, bytes, len);
    if (id >= 0) return id;
    const spm_slot *x = zt_spm_vfind(s, bytes, len);
    return x ? (int)x->id : -1;
}

void zt_spm_free(zt_spm *s) {
    if (!s) return;
    free(s->vslots);
    free(s->keys);
    free(s->piece_off);
    free(s->piece_len);
    free(s->mslots);
    for (int i = 0; i < s->n_norm; i++) free(s->norm[i].a), free(s->norm[i].b);
    for (int i = 0; i < s->n_dec; i++) free(s->dec[i].a), free(s->dec[i].b);
    free(s->rep);
    for (int i = 0; i < s->n_added; i++) free(s->added[i].content), free(s->added[i].norm);
    free(s->added);
    free(s->next);
    for (int i = 0; i < 3; i++) free(s->t[i].s), free(s->t[i].at);
    free(s->sid);
    free(s->sstart);
    free(s->slen);
    free(s->sprev);
    free(s->snext);
    free(s->heap);
    free(s);
}
