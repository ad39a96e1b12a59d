/* peak.h - nominal fp32 peak FLOP/s of this CPU (see peak.c for the formula). */
#ifndef ZT_PEAK_H
#define ZT_PEAK_H

double zt_cpu_clock_ghz(void);           /* 0 when unknown */
int zt_cpu_fp32_lanes(void);             /* 16 with AVX-512, 8 with AVX2+FMA */
double zt_cpu_fp32_peak_flops(int threads); /* 0 when unknown */

#endif
