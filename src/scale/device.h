/* device.h - what the scale model knows about one accelerator: its dense matrix-product peak
 * (bf16 and fp32), its memory and that memory's bandwidth, its intra-node link, and the fraction
 * of the peak large matrix products reach on it. A table of accelerators from their vendors'
 * datasheets (device.c) and `cpu`, this machine, measured (cpu_device.c).
 *
 * Conventions: FLOP/s, bytes, bytes per second, seconds. Link bandwidths are per device and per
 * direction (NVIDIA's "900 GB/s" for NVLink 4 counts both directions: 450 GB/s each way). Peaks
 * are dense (no 2:4 sparsity). */
#ifndef ZT_SCALE_DEVICE_H
#define ZT_SCALE_DEVICE_H

#include "zerotrain/zerotrain.h"

typedef struct zt_scale_device {
    char name[16];           /* "h100", "cpu" */
    char desc[192];          /* "NVIDIA H100 SXM5 80GB", or this CPU's model name */
    double peak_bf16;        /* dense bf16 (v100: fp16) tensor FLOP/s per device */
    double peak_fp32;        /* fp32 FLOP/s (GPUs: the non-tensor fp32 rate; cpu: FMA) */
    double memory;           /* bytes per device (HBM; cpu: RAM / devices sharing it) */
    double mem_bw;           /* bytes/s per device (HBM; cpu: measured triad, its share) */
    double intra_bw;         /* default intra-node bandwidth per direction, bytes/s */
    double intra_lat;        /* default intra-node latency per collective step, s */
    double inter_lat;        /* default inter-node latency per collective step, s */
    double efficiency;       /* fraction of the peak the Linears' matrix products reach (GPUs:
                                device.c; cpu: 1, the products are timed per shape, see below) */
    double attn_efficiency;  /* the same for the attention kernel's FLOPs (flash attention) */
    double mem_efficiency;   /* fraction of mem_bw the memory-bound ops reach, counted in the
                                bytes compute.c lists (unfused ops move more than that) */
    bool causal_skip;        /* attention computes the causal half (flash attention) rather than
                                the engine's row blocks (cpu: zerotrain's attention.c) */
    bool measured;           /* cpu: the numbers are this machine's, taken now */
    /* cpu only: the share of this machine one device gets (cores and memory bandwidth divided
     * among the devices that run on it), and the threads each device runs with */
    double cpu_share;
    int threads;
    double opt_s_per_param;  /* cpu: the engine's AdamW + norm pass timed, seconds per parameter at
                                this share; 0 (GPUs): bytes moved / memory bandwidth (compute.h) */
} zt_scale_device;

/* The table row of `name` (v100, a100, h100, h200, mi300x, b200). ZT_ERR_USAGE lists the names
 * (and cpu) on a miss. `cpu` is not in the table: zt_scale_cpu_device measures it. */
int zt_scale_device_lookup(const char *name, zt_scale_device *out, zt_error *err);
/* "v100, a100, h100, h200, mi300x, b200, cpu" */
const char *zt_scale_device_names(void);

/* cpu_device.c: this machine as a device. `threads` OpenMP threads per device; `devices_here`
 * devices share this machine (the namespace hosts all run here), so each thread gets `share` of
 * a core (0: min(1, physical cores / (devices_here x threads)), an idle machine's) and each device
 * 1/devices_here of the RAM. Measures one core's FMA peak (scale/peak.h, cached), the memory
 * bandwidth (a triad over 3 x 32 MiB, best of 5, one thread) and the engine's optimizer pass
 * (zt_adamw_update + the norm's zt_chunk_sum_squares over 8M elements, opt_s_per_param), all in
 * one thread's CPU time; the GEMMs and kernels below are timed per size, on demand. Cannot fail
 * (unmeasurable rates are 0; the caller refuses a 0 peak). */
void zt_scale_cpu_device(int threads, int devices_here, double share, zt_scale_device *out);

/* Seconds one product C(M,N) = op(A) op(B) (K inner) takes on this machine through the engine's
 * own GEMM (kernels/gemm.h: zt_gemm_f32, or zt_gemm_bf16 when bf16), with trans_a/trans_b as the
 * engine's Linear calls it, on the calling thread's OpenMP threads (one thread: timed in its CPU
 * time, so other load on the machine does not count), divided by the device's share. Dimensions
 * above 2048 are measured at 2048 and the time scaled by the FLOPs (the rate has saturated
 * there); cached per shape for the process. NaN when a buffer cannot be allocated. */
double zt_scale_cpu_gemm_seconds(const zt_scale_device *d, int M, int N, int K, bool trans_a, bool trans_b,
                                 bool bf16);

/* The engine's elementwise kernels the scale model times on cpu rather than counting bytes for
 * (they compute more than they move: tanh, exp, silu): forward + backward of `n` elements of
 * GELU (GPT-2's MLP), SwiGLU (Llama's; n outputs) and the fused softmax + cross-entropy over
 * rows x V logits (n = rows x V, V = `width`), on one thread in its CPU time, divided by the
 * share; cached per size. */
typedef enum zt_scale_kernel { ZT_SCALE_GELU = 0, ZT_SCALE_SWIGLU = 1, ZT_SCALE_XENT = 2 } zt_scale_kernel;
double zt_scale_cpu_kernel_seconds(const zt_scale_device *d, zt_scale_kernel k, size_t n, int width);

#endif
