/* checkpoint_layout.c - what a checkpoint writer holds (checkpoint_internal.h): the kinds of a
 * parameter's slice (the parameter, then its optimizer moments), where this rank's rows of each
 * start in the engine's layouts, their element access through the parameter store and the
 * optimizer state in any placement, and which rank writes which file. */
#include "ckpt/checkpoint_internal.h"
#include "ckpt/slices.h"
#include "engine/pipeline.h"

const char *const KIND_NAMES[NKINDS] = {"param", "exp_avg", "exp_avg_sq"};

int zt_ckpt_n_kinds(const zt_engine *e) { return 1 + zt_engine_state_kinds(e); }

/* Where parameter i's rows of an optimizer state start in this rank's state layout. */
size_t zt_ckpt_state_base(const zt_engine *e, int i) {
    /* ddp: full, row0 = 0; the gradient layouts (a frozen parameter has no state: callers skip it) */
    return zt_engine_shards_optim(e) ? zt_engine_plan(e)->p[i].gshard_off : zt_engine_plan(e)->p[i].gfull_off;
}

/* The experts stored E/ep a rank (zt_model_store_experts): every data-parallel rank writes a file
 * (under ddp too, where each holds its part's experts whole), W = the data-parallel ranks */
static bool experts_stored(const zt_engine *e) { return zt_model_experts_local(zt_engine_model(e)); }

int zt_ckpt_writers(const zt_engine *e) {
    return experts_stored(e) ? zt_engine_dp_size(e) : zt_engine_plan(e)->nshards;
}

/* Under hybrid a rank holds its shard group's piece, and the ranks of the same index in the other
 * shard groups (its replicas) hold it too. With the experts stored every data-parallel rank writes,
 * so replicas share a piece's writing: writer j of n, index j % g in its group of g and replica
 * j / g, writes sub-piece (j % g)·(n / g) + j / g of n, which lies inside piece j % g of g (the
 * pieces of zt_plan_rows nest: piece k of g is sub-pieces k·(n/g) .. (k+1)·(n/g) - 1 of n). Without
 * hybrid g = n: writer j writes piece j. */
static int nested_piece(int j, int n, int g) { return g > 0 && g < n ? (j % g) * (n / g) + j / g : j; }
static int nest_group(const zt_engine *e, bool experts, int n) {
    if (zt_engine_options_of(e)->strategy != ZT_STRATEGY_HYBRID) return n;
    return zt_engine_plan(e)->groups[experts ? ZT_SHARD_GROUP_EDP : ZT_SHARD_GROUP_DP].nshards;
}

/* Writer s of w's rows of parameter p (the whole model's): [*lo, *hi) of its part *part's rows
 * (*part: in, the tensor-parallel part; out, the part index of slices.h: the experts' part, under
 * tensor parallelism its tp part of it). A dense parameter: the plan's rows of shard s of w (its
 * tensor-parallel part's files each); an expert tensor stored E/ep a rank: writer s is
 * data-parallel rank s, which holds part s % ep, and writes the plan's rows of its
 * expert-data-parallel shard s / ep of w / ep (the pieces ZeRO keeps; under ddp the same rows of
 * the whole part); under hybrid the nested sub-pieces above. */
void zt_ckpt_writer_rows(const zt_engine *e, const zt_param_desc *p, int w, int s, int *part, int64_t *lo,
                         int64_t *hi) {
    int64_t rows, len;
    int ep = zt_param_expert_parts(p);
    if (ep > 1) *part = zt_ckpt_part_index(p, *part, s % ep);
    zt_ckpt_part_shape(p, *part, &rows, &len);
    if (ep > 1) zt_plan_rows(rows, len, p->norm_blocks, w / ep, nested_piece(s / ep, w / ep, nest_group(e, true, w / ep)), lo, hi);
    else zt_plan_rows(rows, len, p->norm_blocks, w, nested_piece(s, w, nest_group(e, false, w)), lo, hi);
}

/* this rank's writer rows of parameter i: the plan's piece, or with the experts stored the writer
 * rows of data-parallel rank s (the same rows where the plan shards, a part of them under hybrid) */
static void own_rows(const zt_engine *e, int i, int64_t *row0, int64_t *rows) {
    const zt_param_plan *p = &zt_engine_plan(e)->p[i];
    if (!experts_stored(e)) {
        *row0 = p->row_begin[p->shard];
        *rows = p->row_begin[p->shard + 1] - *row0;
        return;
    }
    const zt_param_desc *d = &zt_engine_model(e)->params[i];
    int part = d->tp_part;
    int64_t lo, hi;
    zt_ckpt_writer_rows(e, d, zt_ckpt_writers(e), zt_engine_rank(e), &part, &lo, &hi);
    *row0 = lo;
    *rows = hi - lo;
}

/* Where this writer's rows of parameter i start in what kind_read reads: the parameter's local
 * layout (the full tensor under ddp/zero1/zero2, the piece under zero3) for kind 0, the state's
 * rows of the parameter for the others (the piece where the optimizer shards, else the whole);
 * the writer's rows are the piece, or (hybrid, the experts stored) a part of it. */
size_t zt_ckpt_kind_base(const zt_engine *e, int i, int k) {
    const zt_param_plan *p = &zt_engine_plan(e)->p[i];
    int64_t row0, rows, held0 = 0; /* the layout's first row: the piece's, or the tensor's */
    if (k > 0 ? zt_engine_shards_optim(e) : zt_store_local_is_piece(e)) held0 = p->row_begin[p->shard];
    own_rows(e, i, &row0, &rows);
    return (size_t)((row0 - held0) * p->row_len);
}

/* n elements of kind k of parameter i, from element `at` of the parameter's local layout (kind 0)
 * or of its rows in the state layout (state_base + at), through fp32: parameters stored as bf16
 * (bf16-low), states in files or in bf16. */
int zt_ckpt_kind_read(zt_engine *e, int k, int i, size_t at, size_t n, float *dst, zt_error *err) {
    if (k > 0) return zt_engine_state_read(e, k - 1, zt_ckpt_state_base(e, i) + at, n, dst, err);
    return zt_store_read(e, i, at, n, dst, err);
}

int zt_ckpt_kind_write(zt_engine *e, int k, int i, size_t at, size_t n, const float *src, zt_error *err) {
    if (k > 0) return zt_engine_state_write(e, k - 1, zt_ckpt_state_base(e, i) + at, n, src, err);
    return zt_store_write(e, i, at, n, src, err);
}

/* Idle fp32 memory to bounce kind k through (*floats of it), or NULL. */
float *zt_ckpt_kind_bounce(zt_engine *e, int k, size_t *floats) {
    if (k > 0) return zt_engine_state_bounce(e, floats);
    return zt_store_bounce(e, floats); /* bf16's update chunk, the files' staging, or NULL */
}

/* Rows [row0, row0 + rows) of kind k of parameter i in shard s's slice, and (for the local
 * writer) where they are in memory as fp32: NULL for an optimizer state that lives in NVMe
 * files, for bf16 states and for bf16 parameters (bf16-low), which go through kind_read. */
float *zt_ckpt_local_rows(zt_engine *e, int i, int k, int64_t *row0, int64_t *rows) {
    own_rows(e, i, row0, rows);
    if (k == 0) { /* the pieces (zero3, zero1/zero2's fp32 master under bf16/fp16 compute) or full */
        float *w = zt_store_local_fp32(e, i); /* NULL: bf16 or in a file */
        return w ? w + zt_ckpt_kind_base(e, i, 0) : NULL;
    }
    float *state = zt_engine_state_ptr(e, k - 1);
    return state ? state + zt_ckpt_state_base(e, i) + zt_ckpt_kind_base(e, i, k) : NULL;
}

/* The job (every rank: the data-parallel ones and, under tensor parallelism, every part, under
 * pipeline parallelism every stage) and this rank's place in it; the files are numbered
 * stage-major, then part-major: stage p's tp part t's writer s is file (p x tp + t) x S + s. */
const zt_mesh *zt_ckpt_mesh_of(const zt_engine *e) { return zt_engine_options_of(e)->mesh; }
zt_comm *zt_ckpt_job_comm(const zt_engine *e) { return zt_ckpt_mesh_of(e)->world > 1 ? zt_ckpt_mesh_of(e)->world_comm : NULL; }
int zt_ckpt_file_index(const zt_engine *e) {
    int s = experts_stored(e) ? zt_engine_rank(e) : zt_engine_plan(e)->shard;
    return (zt_ckpt_mesh_of(e)->pp_rank * zt_ckpt_mesh_of(e)->tp + zt_ckpt_mesh_of(e)->tp_rank) * zt_ckpt_writers(e) + s;
}
/* Parameter i is written by this rank's part: a cut one by every part, a whole one by part 0 (the
 * parts hold the same bits); under pipeline parallelism by its owning stage only (a tied copy on
 * another stage holds the same bits). */
bool zt_ckpt_part_writes(const zt_engine *e, int i) {
    return (zt_engine_model(e)->params[i].tp_parts > 1 || zt_ckpt_mesh_of(e)->tp_rank == 0) && (!zt_engine_pipeline(e) || zt_pipeline_writes(zt_engine_pipeline(e), i));
}
/* The model the manifest describes: the whole one (a pipeline stage's engine runs a part of it). */
const zt_model *zt_ckpt_whole_model(const zt_engine *e) { return zt_engine_pipeline(e) ? zt_pipeline_full_model(zt_engine_pipeline(e)) : zt_engine_model(e); }
/* The stage writing the whole model's parameter i (0 without a pipeline). */
int zt_ckpt_stage_of(const zt_engine *e, int i) { return zt_engine_pipeline(e) ? zt_pipeline_owner(zt_engine_pipeline(e), i) : 0; }

bool zt_ckpt_is_writer(const zt_engine *e) {
    if (experts_stored(e)) return true; /* every data-parallel rank: its part's experts */
    if (zt_engine_replica_comm(e)) return zt_comm_rank(zt_engine_replica_comm(e)) == 0;
    if (!zt_engine_shards_optim(e)) return zt_engine_rank(e) == 0;
    return true;
}

