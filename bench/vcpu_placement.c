/* vcpu_placement.c - where the hypervisor has put this machine's first two vCPUs against each
 * other, read off the round trip of one cache line between them: two threads pinned to CPUs 0 and
 * 1 hand a counter back and forth 100000 times.
 *
 *   build/bench/vcpu_placement        prints e.g. "vCPU 0 <-> 1: cache-line round trip 58 ns (one die)"
 *
 * On this project's 2-vCPU Zen 4 VMs the answer moves every few seconds between ~50-90 ns (the two
 * vCPUs share a last-level cache: "one die") and ~320-380 ns ("across dies"); what is between is
 * printed as "unclear". The benchmarks that compare two runs (w1.sh, the all-reduce runs in
 * bench/RESULTS.md) print it before and after, because the placement moves the numbers: the
 * all-reduce's shared-memory hand-over and two threads' shared cache depend on it. Exit status 0,
 * or 1 where the machine has fewer than 2 CPUs or they cannot be pinned (then it says so).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 100000L

static _Atomic long line __attribute__((aligned(64)));
static _Atomic int ready;

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *echo(void *arg) {
    int *ok = arg;
    *ok = pin(1) == 0;
    atomic_store(&ready, 1);
    if (!*ok) return NULL;
    for (long i = 1; i < 2 * ROUNDS; i += 2) { /* odd values come from CPU 0, the next even goes back */
        while (atomic_load_explicit(&line, memory_order_acquire) != i) {}
        atomic_store_explicit(&line, i + 1, memory_order_release);
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    int ok1 = 0;
    if (pin(0) != 0 || pthread_create(&t, NULL, echo, &ok1) != 0) {
        printf("vCPU 0 <-> 1: cannot pin two threads (fewer than 2 CPUs?)\n");
        return 1;
    }
    while (!atomic_load(&ready)) {}
    if (!ok1) {
        pthread_join(t, NULL);
        printf("vCPU 0 <-> 1: cannot pin a thread to CPU 1\n");
        return 1;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < 2 * ROUNDS; i += 2) {
        atomic_store_explicit(&line, i + 1, memory_order_release);
        while (atomic_load_explicit(&line, memory_order_acquire) != i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)ROUNDS;
    printf("vCPU 0 <-> 1: cache-line round trip %.0f ns (%s)\n", ns,
           ns < 150 ? "one die" : ns > 250 ? "across dies" : "unclear");
    return 0;
}
