/* engine_options.c - the configuration -> engine boundary (engine_options.h): the engine options, the
 * mesh's sizes and the pipeline schedule a zt_train_config gives, used by the training loop, the
 * memory estimate and the benchmark, so the three build their engines alike. */
#include "train/engine_options.h"

void zt_train_engine_options(const zt_train_config *cfg, int world, zt_comm *comm, zt_engine_options *eo) {
    zt_engine_options_default(eo);
    eo->B = cfg->micro_batch;
    /* context parallelism: the engine runs on each rank's part of every sequence */
    eo->T = cfg->context_parallel_size > 1 ? cfg->seq_len / cfg->context_parallel_size : cfg->seq_len;
    eo->seed = cfg->seed;
    eo->optim = cfg->optim;
    eo->optim.lr_peak = cfg->lr.max_lr; /* Muon's lr follows the schedule's shape */
    eo->strategy = cfg->strategy;
    eo->comm = world > 1 ? comm : NULL;
    eo->hybrid_shard_size = cfg->hybrid_shard_size > 0 ? cfg->hybrid_shard_size
                                                       : zt_train_config_default_shard(cfg, world, NULL);
    eo->hybrid_inner = cfg->hybrid_inner;
    eo->keep_params_after_forward = !cfg->reshard_after_forward;
    eo->grad_accum = cfg->grad_accum;
    eo->reduce_every_micro_batch = cfg->reduce_every_micro_batch;
    eo->bucket_bytes = (size_t)((double)cfg->bucket_mb * 1048576.0);
    eo->no_overlap_comm = !cfg->overlap_comm;
    eo->no_prefetch = !cfg->prefetch;
    zt_precision_default(&eo->precision, (zt_precision_mode)cfg->precision);
    eo->precision.reduce = (zt_dtype)cfg->reduce_dtype;
    eo->precision.stochastic_rounding = cfg->stochastic_rounding;
    if (cfg->attention_dtype == ZT_CFG_ATTN_FP32) eo->precision.attention = ZT_DTYPE_FP32;
    eo->precision.loss_scale = cfg->loss_scale;
    eo->precision.initial_scale_power = cfg->initial_scale_power;
    eo->precision.loss_scale_window = cfg->loss_scale_window;
    eo->precision.hysteresis = cfg->hysteresis;
    eo->precision.consecutive_hysteresis = cfg->consecutive_hysteresis;
    eo->precision.min_loss_scale = cfg->min_loss_scale;
    eo->activation_checkpointing = (zt_recompute)cfg->activation_checkpointing; /* same values */
    eo->skip_nonfinite = cfg->fault_nonfinite_skips > 0; /* the step guard counts them (guard.c) */
    if (cfg->offload_param == ZT_CFG_OFFLOAD_NVME) eo->offload.param_dir = cfg->offload_param_nvme_path;
    if (cfg->offload_optimizer == ZT_CFG_OFFLOAD_NVME || cfg->offload_param == ZT_CFG_OFFLOAD_NVME) { /* docs/offload.md */
        if (cfg->offload_optimizer == ZT_CFG_OFFLOAD_NVME) eo->offload.optimizer_dir = cfg->offload_optimizer_nvme_path;
        eo->offload.buffer_count = cfg->offload_buffer_count;
        eo->offload.buffer_bytes = (size_t)((double)cfg->offload_buffer_mb * 1048576.0);
        eo->offload.io_threads = cfg->offload_io_threads;
        eo->offload.param_prefetch = cfg->offload_param_prefetch ? cfg->offload_param_prefetch : -1; /* 0: none */
        eo->offload.param_max_live = (size_t)cfg->offload_param_max_live;
    }
}

zt_mesh_sizes zt_train_mesh_sizes(const zt_train_config *cfg, const zt_engine_options *eo) {
    return (zt_mesh_sizes){.tp = cfg->tensor_parallel_size, .cp = cfg->context_parallel_size,
                           .pp = cfg->pipeline_parallel_size,
                           .hybrid = cfg->strategy == ZT_STRATEGY_HYBRID, .shard = eo->hybrid_shard_size,
                           .ep = cfg->expert_parallel_size};
}

zt_pp_schedule zt_train_pp_schedule(const zt_train_config *cfg) {
    return cfg->pipeline_schedule == ZT_CFG_PP_GPIPE ? ZT_PP_GPIPE : ZT_PP_1F1B;
}
