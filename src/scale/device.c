/* device.c - the accelerator table of the scale model (device.h). Figures are the vendors'
 * datasheet numbers for the SXM/OAM parts, dense (no sparsity):
 *
 *   name    part                      bf16 TFLOP/s   fp32 TFLOP/s  memory    HBM TB/s  link per direction
 *   v100    NVIDIA V100 SXM2 32GB     125 (fp16)     15.7          32 GiB    0.90      NVLink 2: 150 GB/s
 *   a100    NVIDIA A100 SXM4 80GB     312            19.5          80 GiB    2.04      NVLink 3: 300 GB/s
 *   h100    NVIDIA H100 SXM5 80GB     989            66.9          80 GiB    3.35      NVLink 4: 450 GB/s
 *   h200    NVIDIA H200 SXM 141GB     989            66.9          141 GB    4.8       NVLink 4: 450 GB/s
 *   mi300x  AMD Instinct MI300X       1307           163.4         192 GiB   5.3       Infinity Fabric 7 x 64 GB/s
 *   b200    NVIDIA B200 (HGX)         2250           75            180 GB    8.0       NVLink 5: 900 GB/s
 *
 * V100 has no bf16: its fp16 tensor peak stands in (the ZeRO++ runs were fp16).
 *
 * The fractions of those peaks a training step reaches, measured on one H100 SXM 80GB (700 W)
 * with PyTorch 2.11 / cuBLAS / SDPA (bench/gpu_efficiency.py, bench/RESULTS.md "GPU efficiency"):
 *   efficiency       0.75   bf16 matmuls of the Llama 2 7B / 70B Linears at 4096 tokens: 0.74-0.80
 *   attn_efficiency  0.45   causal flash attention forward + backward, T = 4096-8192: 0.41-0.52
 *   mem_efficiency   0.55   eager elementwise ops (SwiGLU, RMSNorm, add) per byte compute.c counts:
 *                           0.50-0.81 of the HBM peak
 * and applied to every GPU of the table: only the H100 was measured; the others are assumed to
 * reach the same fractions of their own peaks. `zerotrain plan --efficiency F` sets the first.
 * Latencies per collective step: 2 us inside a node, 5 us between nodes (NCCL's ring steps over
 * NVLink and InfiniBand are in this range); --intra-latency / --inter-latency set them. */
#include "scale/device.h"

#include <stdio.h>
#include <string.h>

#define GiB 1073741824.0
#define DEVICE(n, d, bf16, fp32, mem, bw, link)                                                              \
    {.name = n, .desc = d, .peak_bf16 = bf16, .peak_fp32 = fp32, .memory = mem, .mem_bw = bw, .intra_bw = link, \
     .intra_lat = 2e-6, .inter_lat = 5e-6, .efficiency = 0.75, .attn_efficiency = 0.45, .mem_efficiency = 0.55,     \
     .causal_skip = true}

static const zt_scale_device TABLE[] = {
    DEVICE("v100", "NVIDIA V100 SXM2 32GB (fp16 tensor peak)", 125e12, 15.7e12, 32 * GiB, 0.90e12, 150e9),
    DEVICE("a100", "NVIDIA A100 SXM4 80GB", 312e12, 19.5e12, 80 * GiB, 2.039e12, 300e9),
    DEVICE("h100", "NVIDIA H100 SXM5 80GB", 989e12, 66.9e12, 80 * GiB, 3.35e12, 450e9),
    DEVICE("h200", "NVIDIA H200 SXM 141GB", 989e12, 66.9e12, 141e9, 4.8e12, 450e9),
    DEVICE("mi300x", "AMD Instinct MI300X 192GB", 1307e12, 163.4e12, 192 * GiB, 5.3e12, 448e9),
    DEVICE("b200", "NVIDIA B200 180GB (HGX)", 2250e12, 75e12, 180e9, 8.0e12, 900e9),
};
#define N_TABLE (sizeof TABLE / sizeof *TABLE)

const char *zt_scale_device_names(void) { return "v100, a100, h100, h200, mi300x, b200, cpu"; }

int zt_scale_device_lookup(const char *name, zt_scale_device *out, zt_error *err) {
    for (size_t i = 0; i < N_TABLE; i++)
        if (name && !strcmp(name, TABLE[i].name)) {
            *out = TABLE[i];
            return ZT_OK;
        }
    return zt_error_set(err, ZT_ERR_USAGE, "--gpu \"%s\": unknown device (known: %s)", name ? name : "",
                        zt_scale_device_names());
}
