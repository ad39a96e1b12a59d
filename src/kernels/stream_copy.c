/* stream_copy.c - copies that go past the caches: zt_copy_streaming writes the whole 64-byte lines
 * of its destination with streaming (non-temporal) stores, the partial lines at either end with
 * ordinary ones; zt_streaming_fence orders them before what the caller stores next.
 *
 * For data this core will not read again soon: no read for ownership of the destination's lines,
 * and they do not push the caller's working set out of the cache. Two callers: AdamW's bf16 / fp16
 * compute copy (src/optim/adamw.c: one fence per thread at the end of its share) and the 2-rank
 * all-reduce's pieces when the peer's core is on another die (src/comm/all_reduce_shm.c: a fence
 * before each piece's release store). AVX-512 stores 64 bytes at a time, AVX2 32, SSE2 (every x86-64) 16;
 * elsewhere a plain memcpy and no fence is needed. The bytes written are src's in every case.
 */
#include "kernels/kernels.h"

#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__SSE2__)
#include <immintrin.h>
#endif

void zt_copy_streaming(void *dst, const void *src, size_t bytes) {
#if defined(__AVX512F__) || defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= bytes; i += 64) {
#ifdef __AVX512F__
        _mm512_stream_si512((void *)(d + i), _mm512_loadu_si512((const void *)(s + i)));
#elif defined(__AVX2__)
        _mm256_stream_ps((float *)(d + i), _mm256_loadu_ps((const float *)(s + i)));
        _mm256_stream_ps((float *)(d + i + 32), _mm256_loadu_ps((const float *)(s + i + 32)));
#else
        for (int q = 0; q < 64; q += 16)
            _mm_stream_si128((__m128i *)(d + i + q), _mm_loadu_si128((const __m128i *)(s + i + q)));
#endif
    }
    memcpy(d + i, s + i, bytes - i);
#else
    memcpy(dst, src, bytes);
#endif
}

void zt_streaming_fence(void) {
#if defined(__AVX512F__) || defined(__SSE2__)
    _mm_sfence();
#endif
}
