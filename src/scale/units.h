/* units.h - the scale model's quantities as people write them: bandwidths ("900GB/s", "400Gb/s",
 * "1gbit", "12.5GiB/s") and latencies ("5us", "1.5ms"), read into SI base units (bytes per
 * second, seconds), and printed back.
 *
 * Bandwidth: a positive number, then a unit with its prefix, nothing else (spaces between are
 * allowed). B is a byte, b (or "bit") a bit: "GB/s" is 1e9 bytes per second, "Gb/s" = "Gbps" =
 * "gbit" = 1e9 bits = 1.25e8 bytes per second. Prefixes k, M, G, T are powers of 1000 (either
 * case, as tc writes them: "100mbit" is 1e8 bits; there is no milli), Ki, Mi, Gi, Ti powers of
 * 1024. "/s" and "ps" are optional after b/bit, and
 * "/s" after B. A bare number is refused: bits and bytes differ by 8.
 * Latency: a non-negative number and one of ns, us, ms, s. */
#ifndef ZT_SCALE_UNITS_H
#define ZT_SCALE_UNITS_H

#include "zerotrain/zerotrain.h"

/* *out = bytes per second (> 0). ZT_ERR_USAGE naming `what` (e.g. "--inter") and the text. */
int zt_scale_parse_bandwidth(const char *what, const char *text, double *out, zt_error *err);
/* *out = seconds (>= 0). ZT_ERR_USAGE naming `what` and the text. */
int zt_scale_parse_latency(const char *what, const char *text, double *out, zt_error *err);

/* "450 GB/s", "125 MB/s", "50 Gb/s"-free: always bytes, 3 significant digits. */
void zt_scale_format_bandwidth(double bytes_per_s, char *buf, size_t size);
/* "1.23 s", "45.6 ms", "789 us" */
void zt_scale_format_seconds(double s, char *buf, size_t size);

#endif
