/* setup.h - one set-up path from a built model to a running engine (setup.c), shared by zerotrain
 * train and zerotrain bench: the mesh, tensor parallelism's cut, the pipeline stage, the engine with
 * its parameters initialized, the pipeline over it. */
#ifndef ZT_TRAIN_SETUP_H
#define ZT_TRAIN_SETUP_H

#include "comm/mesh.h"
#include "engine/pipeline.h"

typedef struct zt_train_setup_options {
    zt_comm *world;              /* the job's world, or NULL for one process */
    zt_mesh_sizes sizes;         /* tp x cp x dp x pp, hybrid's shard group */
    zt_cp_mode cp_mode;          /* context parallelism's attention (sizes.cp > 1) */
    const char *tp_key;          /* prefixes tensor parallelism's errors with "<tp_key> <tp>", or NULL */
    const char *stages;          /* parallel.pipeline_stages ("" or NULL: balanced) */
    zt_pp_schedule schedule;     /* the pipeline's schedule (pp > 1) */
    const char *init_weights;    /* the weights file the run will load, or NULL: refused under pp > 1 */
} zt_train_setup_options;

typedef struct zt_train_setup {
    zt_mesh *mesh;     /* every rank's coordinates (src/comm/mesh.h) */
    zt_model *smodel;  /* this rank's stage model; the model itself without a pipeline */
    zt_engine *e;      /* over smodel, its parameters initialized (the seeded init) */
    zt_pipeline *pipe; /* the stages' schedule over e (pp > 1), else NULL */
    zt_pp_cut cut;     /* the model's cut into stages (pp > 1) */
    int *pmap;         /* (model's n_params) the stage model's parameters in the model (pp > 1) */
} zt_train_setup;

/* On a zeroed *s: the mesh (eo->mesh is set to it), tensor and context parallelism applied to
 * `model` (eo->T is then each rank's part of the sequence: zt_train_engine_options), this
 * rank's pipeline stage (eo gains the stage's options), the engine, the pipeline, the seeded
 * parameters. Collective over so->world. On failure what was built stays in *s for
 * zt_train_setup_free. `model` must outlive *s. */
int zt_train_setup_create(zt_model *model, const zt_train_setup_options *so, zt_engine_options *eo,
                          zt_train_setup *s, zt_error *err);
/* Frees what *s holds (not the model it was built from). */
void zt_train_setup_free(zt_train_setup *s, const zt_model *model);

#endif
