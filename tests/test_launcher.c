/* test_launcher.c - comm/launcher.c: ranks per node and local rank from Open MPI's, MPICH Hydra's
 * and Slurm's variables (Slurm's "2(x3),1" form per node; the step's layout before the job's),
 * precedence, malformed values, and hybrid's per-node default shard size. Runs without MPI: only the environment is read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "comm/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const VARS[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALNRANKS",
                                   "MPI_LOCALRANKID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID",
                                   "SLURM_NTASKS_PER_NODE", "SLURM_LOCALID"};

static int clear_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
    return 0;
}

static void test_none(void **state) {
    (void)state;
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 0);
    assert_int_equal(n.local_rank, -1);
    assert_string_equal(n.source, "");
    const char *src = "x";
    assert_int_equal(zt_launcher_default_shard_size(8, &src), 8); /* one node: the world */
    assert_string_equal(src, "");
}

static void test_open_mpi_first(void **state) {
    (void)state;
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    setenv("MPI_LOCALNRANKS", "2", 1);
    setenv("SLURM_NTASKS_PER_NODE", "8", 1);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 4);
    assert_int_equal(n.local_rank, 3);
    assert_string_equal(n.source, "OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *src = NULL;
    assert_int_equal(zt_launcher_default_shard_size(16, &src), 4);
    assert_string_equal(src, "OMPI_COMM_WORLD_LOCAL_SIZE");
}

static void test_hydra(void **state) {
    (void)state;
    setenv("MPI_LOCALNRANKS", "2", 1);
    setenv("MPI_LOCALRANKID", "1", 1);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 2);
    assert_int_equal(n.local_rank, 1);
    assert_string_equal(n.source, "MPI_LOCALNRANKS");
}

static void test_slurm_tasks_per_node(void **state) {
    (void)state;
    setenv("SLURM_TASKS_PER_NODE", "2(x3),1", 1);
    setenv("SLURM_LOCALID", "0", 1);
    const int want[] = {2, 2, 2, 1, 0}; /* node 4 does not exist: unset */
    for (int id = 0; id < 5; id++) {
        char v[8];
        snprintf(v, sizeof v, "%d", id);
        setenv("SLURM_NODEID", v, 1);
        zt_launcher_node n;
        zt_launcher_node_get(&n);
        assert_int_equal(n.local_size, want[id]);
        if (want[id]) {
            assert_string_equal(n.source, "SLURM_TASKS_PER_NODE");
            assert_int_equal(n.local_rank, 0);
        }
    }
    setenv("SLURM_TASKS_PER_NODE", "4", 1);
    setenv("SLURM_NODEID", "0", 1);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 4);
}

/* srun -E (--preserve-env) inside `sbatch --ntasks-per-node=8`: the job's layout stays in
 * SLURM_TASKS_PER_NODE, the step's (srun -N 2 -n 4: 2 per node) is in SLURM_STEP_TASKS_PER_NODE */
static void test_slurm_step_first(void **state) {
    (void)state;
    setenv("SLURM_TASKS_PER_NODE", "8(x2)", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
    setenv("SLURM_NTASKS_PER_NODE", "8", 1);
    setenv("SLURM_NODEID", "1", 1);
    setenv("SLURM_LOCALID", "1", 1);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 2);
    assert_int_equal(n.local_rank, 1);
    assert_string_equal(n.source, "SLURM_STEP_TASKS_PER_NODE");
    const char *src = NULL;
    assert_int_equal(zt_launcher_default_shard_size(4, &src), 2);
    assert_string_equal(src, "SLURM_STEP_TASKS_PER_NODE");
    /* a step entry that does not parse (or has no entry for this node) falls back to the job's */
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(y2)", 1);
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 8);
    assert_string_equal(n.source, "SLURM_TASKS_PER_NODE");
    setenv("SLURM_STEP_TASKS_PER_NODE", "3", 1); /* one node in the step: node 1 has none */
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 8);
    /* uneven steps: "3,1" gives node 0 three ranks, node 1 one */
    setenv("SLURM_STEP_TASKS_PER_NODE", "3,1", 1);
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 1);
    assert_string_equal(n.source, "SLURM_STEP_TASKS_PER_NODE");
}

static void test_slurm_ntasks_and_malformed(void **state) {
    (void)state;
    setenv("SLURM_TASKS_PER_NODE", "2(y3)", 1); /* malformed: falls through */
    setenv("SLURM_NODEID", "0", 1);
    setenv("SLURM_NTASKS_PER_NODE", "8", 1);
    setenv("SLURM_LOCALID", "5", 1);
    zt_launcher_node n;
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 8);
    assert_int_equal(n.local_rank, 5);
    assert_string_equal(n.source, "SLURM_NTASKS_PER_NODE");
    clear_env(NULL);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "zero", 1); /* not a number: unset */
    setenv("MPI_LOCALNRANKS", "-2", 1);
    zt_launcher_node_get(&n);
    assert_int_equal(n.local_size, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_none, clear_env),
        cmocka_unit_test_setup(test_open_mpi_first, clear_env),
        cmocka_unit_test_setup(test_hydra, clear_env),
        cmocka_unit_test_setup(test_slurm_tasks_per_node, clear_env),
        cmocka_unit_test_setup(test_slurm_step_first, clear_env),
        cmocka_unit_test_setup(test_slurm_ntasks_and_malformed, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
