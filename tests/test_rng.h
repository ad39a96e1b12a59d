/* test_rng.h - the kernel tests' random numbers: splitmix64 over one state per test file (a file
 * picks its start with TEST_RNG_SEED before including this), reproducible run to run.
 * Header-only; rng_state is the file's, so a test may save and restore it. */
#ifndef ZT_TEST_RNG_H
#define ZT_TEST_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-52 - 1.0; }

#endif
