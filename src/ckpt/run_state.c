/* run_state.c - the manifest's "run_state" object (run_state.h): skipped sample ranges and the
 * loss-spike window, the data sources' cursors. Numbers are written as JSON numbers (cJSON prints 17 digits when 15 do not
 * round-trip, so every double comes back bit for bit) and read only as whole numbers or finite
 * doubles within the caps: no manifest can make the reader index past an array. */
#include "ckpt/run_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHOLE_MAX 9007199254740992.0 /* 2^53 */

void zt_run_state_write(cJSON *root, const zt_ckpt_run_state *r) {
    cJSON *o = cJSON_AddObjectToObject(root, "run_state");
    if (!o) return;
    cJSON *skips = cJSON_AddArrayToObject(o, "skipped_samples");
    for (int k = 0; skips && k < r->n_skips; k++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)r->skip_start[k]));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)r->skip_count[k]));
        cJSON_AddItemToArray(skips, pair);
    }
    cJSON *src = r->n_sources ? cJSON_AddArrayToObject(o, "data_sources") : NULL;
    for (int k = 0; src && k < r->n_sources; k++) {
        cJSON *s = cJSON_CreateObject();
        char key[17];
        snprintf(key, sizeof key, "%016llx", (unsigned long long)r->source_key[k]);
        cJSON_AddStringToObject(s, "cache_key", key);
        cJSON_AddNumberToObject(s, "cursor", (double)r->source_cursor[k]);
        cJSON_AddItemToArray(src, s);
    }
    if (r->window <= 0) return;
    cJSON *w = cJSON_AddObjectToObject(o, "loss_window");
    if (!w) return;
    cJSON_AddNumberToObject(w, "size", r->window);
    cJSON_AddNumberToObject(w, "head", r->head);
    cJSON *l = cJSON_AddArrayToObject(w, "losses");
    for (int i = 0; l && i < r->n_losses; i++) cJSON_AddItemToArray(l, cJSON_CreateNumber(r->losses[i]));
}

static bool whole(const cJSON *v, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != floor(v->valuedouble))
        return false;
    *out = v->valuedouble;
    return true;
}

int zt_run_state_read(const cJSON *root, const char *commit, zt_ckpt_run_state *r, zt_error *err) {
    memset(r, 0, sizeof *r);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "run_state");
    if (!o) return ZT_OK;
    const cJSON *skips = cJSON_GetObjectItemCaseSensitive(o, "skipped_samples"), *pair;
    if (!cJSON_IsObject(o) || (skips && (!cJSON_IsArray(skips) || cJSON_GetArraySize(skips) > ZT_CKPT_MAX_SKIPS)))
        return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.skipped_samples is malformed (at most %d "
                            "[start, count] pairs)", commit, ZT_CKPT_MAX_SKIPS);
    cJSON_ArrayForEach(pair, skips) {
        double a, c;
        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 || !whole(cJSON_GetArrayItem(pair, 0), 0, WHOLE_MAX, &a) ||
            !whole(cJSON_GetArrayItem(pair, 1), 1, WHOLE_MAX, &c) || a + c > WHOLE_MAX)
            return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.skipped_samples entry %d is malformed",
                                commit, r->n_skips);
        r->skip_start[r->n_skips] = (uint64_t)a;
        r->skip_count[r->n_skips++] = (uint64_t)c;
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(o, "data_sources"), *s;
    if (src && (!cJSON_IsArray(src) || cJSON_GetArraySize(src) > ZT_CKPT_MAX_SOURCES))
        return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.data_sources is malformed (at most %d "
                            "sources)", commit, ZT_CKPT_MAX_SOURCES);
    cJSON_ArrayForEach(s, src) {
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(s, "cache_key");
        double cur;
        char *end = NULL;
        unsigned long long k = cJSON_IsString(key) ? strtoull(key->valuestring, &end, 16) : 0;
        if (!cJSON_IsString(key) || strlen(key->valuestring) != 16 || !end || *end ||
            !whole(cJSON_GetObjectItemCaseSensitive(s, "cursor"), 0, WHOLE_MAX, &cur))
            return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.data_sources entry %d is malformed "
                                "(want {\"cache_key\": 16 hex digits, \"cursor\": a whole number})", commit, r->n_sources);
        r->source_key[r->n_sources] = k;
        r->source_cursor[r->n_sources++] = (uint64_t)cur;
    }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "loss_window");
    if (!w) return ZT_OK;
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(w, "losses"), *x;
    double size, head;
    if (!whole(cJSON_GetObjectItemCaseSensitive(w, "size"), 1, ZT_CKPT_MAX_WINDOW, &size) ||
        !whole(cJSON_GetObjectItemCaseSensitive(w, "head"), 0, size - 1, &head) || !cJSON_IsArray(l) ||
        cJSON_GetArraySize(l) > (int)size)
        return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.loss_window is malformed", commit);
    r->window = (int)size;
    r->head = (int)head;
    cJSON_ArrayForEach(x, l) {
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            return zt_error_set(err, ZT_ERR_CKPT, "%s/manifest.json: run_state.loss_window holds a loss that is not a "
                                "finite number", commit);
        r->losses[r->n_losses++] = x->valuedouble;
    }
    return ZT_OK;
}
