/* units.c - bandwidths and latencies as text, both ways (units.h has the grammar). */
#include "scale/units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number at the start of text (no sign, finite); *rest after it and any spaces. */
static bool leading_number(const char *text, double *x, const char **rest) {
    if (!text || !(isdigit((unsigned char)text[0]) || text[0] == '.')) return false;
    char *end;
    *x = strtod(text, &end);
    if (end == text || !isfinite(*x)) return false;
    while (*end == ' ') end++;
    *rest = end;
    return true;
}

/* The prefix at *p (k, M, G, T; Ki, Mi, Gi, Ti; none), advancing *p past it. */
static double prefix(const char **p) {
    static const struct { char c; double dec; } P[] = {{'k', 1e3}, {'K', 1e3}, {'m', 1e6}, {'M', 1e6},
                                                       {'g', 1e9}, {'G', 1e9}, {'t', 1e12}, {'T', 1e12}};
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        if (**p == P[i].c) {
            (*p)++;
            if (**p == 'i') { /* binary: the power of 1024 with the same exponent */
                (*p)++;
                return pow(1024.0, round(log10(P[i].dec) / 3.0));
            }
            return P[i].dec;
        }
    return 1.0;
}

int zt_scale_parse_bandwidth(const char *what, const char *text, double *out, zt_error *err) {
    double x;
    const char *p;
    if (!leading_number(text, &x, &p) || !(x > 0))
        return zt_error_set(err, ZT_ERR_USAGE, "%s \"%s\": expected a positive bandwidth with its unit, e.g. "
                            "900GB/s (bytes), 400Gb/s or 1gbit (bits)", what, text ? text : "");
    double mult = prefix(&p), per_unit = 0;
    if (!strncmp(p, "bit", 3)) per_unit = 0.125, p += 3;
    else if (*p == 'b') per_unit = 0.125, p++;
    else if (*p == 'B') per_unit = 1.0, p++;
    if (per_unit == 0.125 && !strcmp(p, "ps")) p += 2;
    else if (!strcmp(p, "/s")) p += 2;
    if (!per_unit || *p)
        return zt_error_set(err, ZT_ERR_USAGE, "%s \"%s\": unknown bandwidth unit (use B/s for bytes, b/s, bps or bit "
                            "for bits, with k, M, G, T or Ki, Mi, Gi, Ti: 900GB/s, 400Gb/s, 1gbit)", what, text);
    *out = x * mult * per_unit;
    return ZT_OK;
}

int zt_scale_parse_latency(const char *what, const char *text, double *out, zt_error *err) {
    static const struct { const char *u; double s; } U[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    double x;
    const char *p;
    if (leading_number(text, &x, &p))
        for (size_t i = 0; i < sizeof U / sizeof *U; i++)
            if (!strcmp(p, U[i].u)) {
                *out = x * U[i].s;
                return ZT_OK;
            }
    return zt_error_set(err, ZT_ERR_USAGE, "%s \"%s\": expected a latency with its unit (ns, us, ms, s), e.g. 5us",
                        what, text ? text : "");
}

void zt_scale_format_bandwidth(double b, char *buf, size_t size) {
    static const char *names[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    int k = 0;
    while (k < 4 && b >= 999.5) b /= 1000.0, k++;
    snprintf(buf, size, "%.3g %s", b, names[k]);
}

void zt_scale_format_seconds(double s, char *buf, size_t size) {
    if (s >= 1.0 || s == 0.0) snprintf(buf, size, "%.3g s", s);
    else if (s >= 1e-3) snprintf(buf, size, "%.3g ms", s * 1e3);
    else snprintf(buf, size, "%.3g us", s * 1e6);
}
