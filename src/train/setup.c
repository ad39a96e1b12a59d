/* setup.c - the set-up path from a built model to a running engine (setup.h), the same for zerotrain
 * train and zerotrain bench: mesh -> tensor parallelism -> context and expert parallelism -> pipeline
 * stage -> engine -> pipeline ->
 * the seeded parameters. */
#include "train/setup.h"
#include "core/env.h"
#include "memory/plan.h"
#include "shard/tp.h"

#include <stdlib.h>
#include <string.h>

int zt_train_setup_create(zt_model *model, const zt_train_setup_options *so, zt_engine_options *eo,
                          zt_train_setup *s, zt_error *err) {
    int rc = zt_mesh_create(so->world, &so->sizes, &s->mesh, err);
    if (rc) return rc;
    zt_mesh *mesh = s->mesh;
    eo->mesh = mesh;
    /* tensor parallelism: this rank's part of the heads, MLP width and vocabulary (src/shard/tp.h) */
    if ((rc = zt_tp_apply(model, mesh->tp, mesh->tp_rank, err))) {
        if (so->tp_key) zt_error_prefix(err, "%s %d", so->tp_key, mesh->tp);
        return rc;
    }
    /* context parallelism: every unit runs on this rank's part of each sequence (its attention
     * reaches the others' through the engine's group: src/model/context_parallel.c) */
    if ((rc = zt_model_set_context_parallel(model, mesh->cp, so->cp_mode, err))) return rc;
    /* expert parallelism: the mixture's experts spread over the ep ranks, tokens moved by all-to-all
     * (src/model/llama_moe_ep.c, through the engine's group) */
    if ((rc = zt_model_set_expert_parallel(model, mesh->ep, err))) return rc;
    /* ... stored E/ep a rank where the engine runs them so (zt_engine_store_experts: ddp, zero1-3,
     * hybrid, any offload, AdamW, SGD, Muon or LAMB, tensor parallelism too; else, or with
     * ZT_EXPERTS_WHOLE=1 (comparisons), whole on every rank) */
    const char *whole = zt_env(ZT_ENV_EXPERTS_WHOLE);
    if (!(whole && !strcmp(whole, "1")) && (rc = zt_engine_store_experts(model, eo, NULL, err))) return rc;
    s->smodel = model;
    if (mesh->pp > 1) { /* this rank's stage: its units, their parameters (src/shard/stages.h) */
        if (so->init_weights && so->init_weights[0])
            return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_parallel_size %d with --init %s: loading a "
                                "weights file is not under pipeline parallelism yet (a checkpoint is: --resume)",
                                mesh->pp, so->init_weights);
        /* Muon's patterns checked against the whole model: a stage's engine takes what it holds */
        if (eo->optim.kind == ZT_OPT_MUON &&
            (rc = zt_model_muon_split(model, eo->optim.muon_params, eo->optim.adamw_params, NULL, err)))
            return rc;
        if ((rc = zt_pipeline_cut(model, mesh->pp, so->stages ? so->stages : "", eo->B, eo->T,
                                  zt_precision_lp_kind(&eo->precision), eo->grad_accum, so->schedule, &s->cut, err)))
            return rc;
        if (!(s->pmap = malloc((size_t)model->n_params * sizeof *s->pmap)))
            return zt_error_set(err, ZT_ERR_NOMEM, "trainer: out of memory");
        if ((rc = zt_pp_stage_model(model, &s->cut, mesh->pp_rank, &s->smodel, s->pmap, err))) return rc;
        zt_pipeline_engine_options(model, &s->cut, mesh->pp_rank, so->schedule, eo->grad_accum, eo);
    }
    if ((rc = zt_engine_create(s->smodel, eo, &s->e, err))) return rc;
    if (mesh->pp > 1 &&
        (rc = zt_pipeline_create(s->e, model, &s->cut, s->pmap, mesh, so->schedule, &s->pipe, err)))
        return rc;
    return zt_engine_init_params(s->e, err);
}

void zt_train_setup_free(zt_train_setup *s, const zt_model *model) {
    zt_pipeline_free(s->pipe);
    zt_engine_free(s->e);
    zt_mesh_free(s->mesh);
    if (s->smodel != model) zt_model_free(s->smodel);
    free(s->pmap);
    *s = (zt_train_setup){0};
}
