/* error.c - zt_error: status codes and the one-line messages that name what failed and where. */
#include "zerotrain/zerotrain.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int zt_error_set(zt_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int zt_error_prefix(zt_error *err, const char *fmt, ...) {
    if (!err) return ZT_ERR_INTERNAL;
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* truncation is acceptable: the message stays a valid, shorter string */
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof err->msg) snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%.*s", (int)(sizeof err->msg - (size_t)n - 1), old);
    return err->code;
}

const char *zt_status_name(int code) {
    switch (code) {
    case ZT_OK: return "ok";
    case ZT_ERR_USAGE: return "usage";
    case ZT_ERR_DATA: return "data";
    case ZT_ERR_CKPT: return "checkpoint";
    case ZT_ERR_PEER: return "peer";
    case ZT_ERR_NUMERICS: return "numerics";
    case ZT_ERR_NOMEM: return "out of memory";
    case ZT_ERR_IO: return "io";
    case ZT_ERR_MISMATCH: return "mismatch";
    case ZT_ERR_INTERNAL: return "internal";
    default: return "unknown";
    }
}
