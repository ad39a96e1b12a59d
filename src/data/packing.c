/* packing.c - records into sequences: best-fit decreasing packing, or one record per sequence, and
 * the filling of a sequence's inputs, targets and positions (see packing.h). */
#include "data/packing.h"

#include <stdlib.h>
#include <string.h>

void zt_packed_free(zt_packed *p) {
    free(p->seq_begin);
    free(p->piece_doc);
    free(p->piece_len);
    free(p->seq_counted);
    memset(p, 0, sizeof *p);
}

double zt_packed_fill_ratio(const zt_packed *p) {
    return p->n_seq ? (double)p->inputs / ((double)p->n_seq * p->T) : 0.0;
}

/* the counted targets of the first len inputs of record doc */
static uint32_t counted_of(const zt_dataset *d, uint64_t doc, uint32_t len) {
    const uint32_t *ids;
    const uint8_t *c;
    uint32_t n, k = 0;
    zt_dataset_doc(d, doc, &ids, &c, &n, NULL);
    for (uint32_t i = 1; i <= len; i++) k += c[i] != 0;
    return k;
}

/* the smallest r >= from with bit r set in bits (nbits), or -1 */
static long next_set(const uint64_t *bits, long nbits, long from) {
    for (long w = from / 64; w * 64 < nbits; w++) {
        uint64_t x = bits[w] & (w == from / 64 ? ~0ULL << (from % 64) : ~0ULL);
        if (x) return w * 64 + __builtin_ctzll(x);
    }
    return -1;
}

int zt_packed_build(zt_packed *p, const zt_dataset *d, bool val, int T, bool pack, zt_too_long too_long,
                    int32_t pad_id, zt_error *err) {
    memset(p, 0, sizeof *p);
    p->d = d;
    p->T = T;
    p->pack = pack;
    p->pad_id = pad_id;
    uint64_t nd = d->n_docs;
    uint32_t *len = malloc((nd ? nd : 1) * sizeof *len);
    uint64_t *order = malloc((nd ? nd : 1) * sizeof *order), *bin_of = malloc((nd ? nd : 1) * sizeof *bin_of);
    uint64_t *cnt = calloc((size_t)T + 2, sizeof *cnt);
    int rc = ZT_OK;
    if (!len || !order || !bin_of || !cnt) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "packing: out of memory for %llu records", (unsigned long long)nd);
        goto out;
    }
    for (uint64_t i = 0; i < nd; i++) { /* each record's inputs, or 0: not used */
        const uint32_t *ids;
        const uint8_t *c;
        uint32_t n, fl;
        zt_dataset_doc(d, i, &ids, &c, &n, &fl);
        len[i] = 0;
        if (((fl & ZT_DOC_VAL) != 0) != val) continue;
        if (n < 2) {
            p->too_short++;
            continue;
        }
        if (n - 1 > (uint32_t)T) {
            if (too_long == ZT_TOO_LONG_DROP) {
                p->dropped++;
                continue;
            }
            p->truncated++;
            n = (uint32_t)T + 1;
        }
        len[i] = n - 1;
        p->docs++;
        p->inputs += len[i];
        cnt[len[i]]++;
    }
    if (!p->docs) {
        rc = zt_error_set(err, ZT_ERR_DATA, "no %s record of two or more tokens in %s (%llu too short, %llu longer "
                          "than T+1 = %d tokens dropped)", val ? "validation" : "training", d->path,
                          (unsigned long long)p->too_short, (unsigned long long)p->dropped, T + 1);
        goto out;
    }
    /* order: the longest first, records in file order within a length (a counting sort) */
    uint64_t at = 0;
    for (long L = T; L >= 1; L--) {
        uint64_t c = cnt[L];
        cnt[L] = at;
        at += c;
    }
    for (uint64_t i = 0; i < nd; i++)
        if (len[i]) order[cnt[len[i]]++] = i;
    uint64_t nb = 0;
    if (!pack) {
        for (uint64_t k = 0; k < p->docs; k++) bin_of[order[k]] = k; /* one sequence each, longest first */
        nb = p->docs;
    } else { /* best fit: bins on lists by the room left, a bitset of the non-empty lists */
        long words = (T + 1 + 63) / 64;
        uint64_t *bits = calloc((size_t)words, 8);
        int64_t *head = malloc(((size_t)T + 1) * sizeof *head), *next = malloc(p->docs * sizeof *next);
        uint32_t *room = malloc(p->docs * sizeof *room);
        if (!bits || !head || !next || !room) {
            free(bits), free(head), free(next), free(room);
            rc = zt_error_set(err, ZT_ERR_NOMEM, "packing: out of memory");
            goto out;
        }
        for (long r = 0; r <= T; r++) head[r] = -1;
        for (uint64_t k = 0; k < p->docs; k++) {
            uint64_t doc = order[k];
            long L = (long)len[doc], r = next_set(bits, T + 1, L);
            int64_t b;
            if (r < 0) {
                b = (int64_t)nb++;
                room[b] = (uint32_t)T;
            } else {
                b = head[r];
                head[r] = next[b];
                if (head[r] < 0) bits[r / 64] &= ~(1ULL << (r % 64));
            }
            bin_of[doc] = (uint64_t)b;
            room[b] -= (uint32_t)L;
            long nr = (long)room[b];
            next[b] = head[nr];
            head[nr] = b;
            bits[nr / 64] |= 1ULL << (nr % 64);
        }
        free(bits), free(head), free(next), free(room);
    }
    p->n_seq = nb;
    p->seq_begin = calloc(nb + 1, sizeof *p->seq_begin);
    p->piece_doc = malloc(p->docs * sizeof *p->piece_doc);
    p->piece_len = malloc(p->docs * sizeof *p->piece_len);
    p->seq_counted = calloc(nb ? nb : 1, sizeof *p->seq_counted);
    if (!p->seq_begin || !p->piece_doc || !p->piece_len || !p->seq_counted) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "packing: out of memory for %llu sequences", (unsigned long long)nb);
        goto out;
    }
    for (uint64_t k = 0; k < p->docs; k++) p->seq_begin[bin_of[order[k]] + 1]++;
    for (uint64_t s = 0; s < nb; s++) p->seq_begin[s + 1] += p->seq_begin[s];
    uint64_t *fill = calloc(nb ? nb : 1, sizeof *fill);
    if (!fill) {
        rc = zt_error_set(err, ZT_ERR_NOMEM, "packing: out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < p->docs; k++) { /* within a sequence: placement order */
        uint64_t doc = order[k], s = bin_of[doc], j = p->seq_begin[s] + fill[s]++;
        p->piece_doc[j] = doc;
        p->piece_len[j] = len[doc];
        uint32_t c = counted_of(d, doc, len[doc]);
        p->seq_counted[s] += c;
        p->counted += c;
    }
    free(fill);
out:
    free(len);
    free(order);
    free(bin_of);
    free(cnt);
    if (rc) zt_packed_free(p);
    return rc;
}

void zt_packed_fill(const zt_packed *p, uint64_t s, int32_t *inputs, int32_t *targets, int32_t *positions) {
    int t = 0;
    for (uint64_t j = p->seq_begin[s]; j < p->seq_begin[s + 1]; j++) {
        const uint32_t *ids;
        const uint8_t *c;
        uint32_t n;
        zt_dataset_doc(p->d, p->piece_doc[j], &ids, &c, &n, NULL);
        for (uint32_t k = 0; k < p->piece_len[j]; k++, t++) {
            inputs[t] = (int32_t)ids[k];
            targets[t] = c[k + 1] ? (int32_t)ids[k + 1] : -1;
            if (positions) positions[t] = (int32_t)k;
        }
    }
    for (int k = 0; t < p->T; t++, k++) { /* padding: its own document, not counted */
        inputs[t] = p->pad_id;
        targets[t] = -1;
        if (positions) positions[t] = p->pack ? k : t;
    }
}
