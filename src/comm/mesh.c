/* mesh.c - the parallel mesh (mesh.h): the sizes checked once, this rank's coordinates, and the
 * sub-communicators of the tensor-, context-, data- and pipeline-parallel axes, the engine's dp x cp
 * group and hybrid's two sub-axes of it, expert parallelism's ep and edp groups (and hybrid's two of
 * the edp group).
 *
 * Invariants: the coordinates come from zt_mesh_layout alone (world rank = ((pp_rank x dp + dp_rank)
 * x cp + cp_rank) x tp + tp_rank, dp_rank = replicate_rank x shard + shard_rank, dp_cp_rank =
 * (replicate_rank x cp + cp_rank) x shard + shard_rank); every split below uses them as its color
 * and key, so a comm's rank order is its axis' order. */
#include "comm/mesh.h"
#include "comm/launcher.h"

#include <stdio.h>
#include <stdlib.h>

int zt_mesh_layout(int world, int rank, const zt_mesh_sizes *s, zt_mesh *out, zt_error *err) {
    *out = (zt_mesh){0};
    if (world < 1 || rank < 0 || rank >= world)
        return zt_error_set(err, ZT_ERR_USAGE, "mesh: rank %d of a world of %d", rank, world);
    if (s->tp < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.tensor_parallel_size: %d, expected at least 1", s->tp);
    int cp = s->cp > 0 ? s->cp : 1;
    if (s->cp < 0)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.context_parallel_size: %d, expected at least 1", s->cp);
    if (s->pp < 1)
        return zt_error_set(err, ZT_ERR_USAGE, "parallel.pipeline_parallel_size: %d, expected at least 1", s->pp);
    int64_t cut = (int64_t)s->tp * cp * s->pp;
    char cps[64] = "";
    if (cp > 1) snprintf(cps, sizeof cps, " x parallel.context_parallel_size %d", cp);
    if (world % cut != 0)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "parallel.tensor_parallel_size: %d%s x parallel.pipeline_parallel_size %d = %lld does "
                            "not divide the world size %d", s->tp, cps, s->pp, (long long)cut, world);
    int dp = (int)(world / cut);
    int shard = s->hybrid ? s->shard : dp;
    if (shard < 1 || dp % shard != 0)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "parallel.hybrid_shard_size %d does not divide the data-parallel size %d (world %d / "
                            "(parallel.tensor_parallel_size %d%s x parallel.pipeline_parallel_size %d))",
                            shard, dp, world, s->tp, cps, s->pp);
    out->world = world;
    out->rank = rank;
    out->tp = s->tp;
    out->cp = cp;
    out->pp = s->pp;
    out->dp = dp;
    zt_mesh_coords(out, rank, &out->tp_rank, &out->cp_rank, &out->dp_rank, &out->pp_rank);
    out->shard = shard;
    out->replicate = dp / shard;
    out->shard_rank = out->dp_rank % shard;
    out->replicate_rank = out->dp_rank / shard;
    out->dp_cp = dp * cp;
    out->dp_cp_rank = (out->replicate_rank * cp + out->cp_rank) * shard + out->shard_rank;
    int ep = s->ep > 0 ? s->ep : 1;
    if (s->ep < 0 || out->dp_cp % ep != 0)
        return zt_error_set(err, ZT_ERR_USAGE,
                            "parallel.expert_parallel_size %d does not divide the data-parallel ranks %d (world %d / "
                            "(parallel.tensor_parallel_size %d x parallel.pipeline_parallel_size %d)%s)", s->ep,
                            out->dp_cp, world, s->tp, s->pp, cp > 1 ? ", context-parallel ranks included" : "");
    out->ep = ep;
    out->ep_rank = out->dp_cp_rank % ep;
    out->edp = out->dp_cp / ep;
    out->edp_rank = out->dp_cp_rank / ep;
    out->edp_shard = out->edp, out->edp_shard_rank = out->edp_rank;
    out->edp_replicate = 1, out->edp_replicate_rank = 0;
    if (s->hybrid) { /* the experts sharded inside a shard group, replicated across (mesh.h) */
        int es = zt_mesh_edp_shard_size(shard * cp, ep);
        out->edp_shard = es;
        out->edp_shard_rank = es ? out->edp_rank % es : 0;
        out->edp_replicate = es ? out->edp / es : 0;
        out->edp_replicate_rank = es ? out->edp_rank / es : 0;
    }
    return ZT_OK;
}

int zt_mesh_edp_shard_size(int S, int ep) { return S % ep == 0 ? S / ep : ep % S == 0 ? 1 : 0; }

void zt_mesh_coords(const zt_mesh *m, int r, int *tp_rank, int *cp_rank, int *dp_rank, int *pp_rank) {
    *tp_rank = r % m->tp;
    *cp_rank = r / m->tp % m->cp;
    *dp_rank = r / (m->tp * m->cp) % m->dp;
    *pp_rank = r / (m->tp * m->cp * m->dp);
}

int zt_mesh_world_rank(const zt_mesh *m, int tp_rank, int cp_rank, int dp_rank, int pp_rank) {
    return ((pp_rank * m->dp + dp_rank) * m->cp + cp_rank) * m->tp + tp_rank;
}

bool zt_mesh_holds_loss(const zt_mesh *m, int r) {
    int t, c, d, p;
    zt_mesh_coords(m, r, &t, &c, &d, &p);
    (void)p; /* every stage: a stage before the last holds its units' auxiliary losses (0 without
              * experts: its 0 comes first in rank order and leaves the sum's bits as they were) */
    return t == 0;
}

void zt_mesh_free(zt_mesh *m) {
    if (!m) return;
    zt_comm_free(m->shard_comm);
    zt_comm_free(m->replicate_comm);
    zt_comm_free(m->pp_comm);
    zt_comm_free(m->tp_comm);
    zt_comm_free(m->cp_comm);
    zt_comm_free(m->ep_comm);
    zt_comm_free(m->edp_shard_comm); /* (edp_replicate_comm is another group's comm) */
    zt_comm_free(m->edp_comm);
    if (m->owns_dp_cp) zt_comm_free(m->dp_cp_comm);
    if (m->owns_dp) zt_comm_free(m->dp_comm);
    free(m);
}

/* The comm of the ranks of parent that share `color`, ordered by `key`, named `name`. */
static int split(zt_comm *parent, int color, int key, const char *name, zt_comm **out, zt_error *err) {
    int rc = zt_comm_split(parent, color, key, out, err);
    if (rc) return zt_error_prefix(err, "mesh: %s group", name);
    zt_comm_set_name(*out, name);
    return ZT_OK;
}

int zt_mesh_create(zt_comm *world, const zt_mesh_sizes *s, zt_mesh **out, zt_error *err) {
    *out = NULL;
    zt_mesh *m = calloc(1, sizeof *m);
    if (!m) return zt_error_set(err, ZT_ERR_NOMEM, "mesh: out of memory");
    int W = world ? zt_comm_size(world) : 1, r = world ? zt_comm_rank(world) : 0;
    int rc = zt_mesh_layout(W, r, s, m, err);
    if (rc) goto fail;
    m->world_comm = world;
    if (!world) { /* one process: nothing to split */
        *out = m;
        return ZT_OK;
    }
    int tp = m->tp, cp = m->cp, dp = m->dp;
    /* colors: the coordinates the group shares; keys: the coordinate along the axis */
    if (tp > 1 && (rc = split(world, r / tp, m->tp_rank, "tp", &m->tp_comm, err))) goto fail;
    if (cp > 1 && (rc = split(world, (m->pp_rank * dp + m->dp_rank) * tp + m->tp_rank, m->cp_rank, "cp",
                              &m->cp_comm, err))) goto fail;
    if (m->pp > 1 && (rc = split(world, r % (tp * cp * dp), m->pp_rank, "pp", &m->pp_comm, err))) goto fail;
    if (tp * cp * m->pp == 1) {
        m->dp_comm = world;
    } else {
        if ((rc = split(world, (m->pp_rank * cp + m->cp_rank) * tp + m->tp_rank, m->dp_rank, "dp", &m->dp_comm,
                        err))) goto fail;
        m->owns_dp = true;
    }
    if (cp == 1) {
        m->dp_cp_comm = m->dp_comm;
    } else {
        if ((rc = split(world, m->pp_rank * tp + m->tp_rank, m->dp_cp_rank, "dp_cp", &m->dp_cp_comm, err)))
            goto fail;
        m->owns_dp_cp = true;
    }
    if (m->ep > 1) { /* within the dp_cp comm: the ep groups are runs of ep consecutive dp_cp ranks */
        if ((rc = split(m->dp_cp_comm, m->edp_rank, m->ep_rank, "ep", &m->ep_comm, err))) goto fail;
        if (m->edp > 1 && (rc = split(m->dp_cp_comm, m->ep_rank, m->edp_rank, "edp", &m->edp_comm, err))) goto fail;
        /* hybrid: the edp ranks inside a shard group */
        if (s->hybrid && m->edp > 1 && m->edp_shard > 1 &&
            (rc = split(m->edp_comm, m->edp_replicate_rank, m->edp_shard_rank, "edp_shard", &m->edp_shard_comm, err)))
            goto fail;
    }
    if (s->hybrid) {
        /* a shard group is shard x cp x tp consecutive world ranks: on one node when the launcher
         * placed ranks by slot and a node holds that many (checked when the launcher says so) */
        if ((rc = zt_launcher_check_shard_groups(world, m->shard * cp * tp, err))) goto fail;
        if ((rc = split(m->dp_cp_comm, m->replicate_rank, m->cp_rank * m->shard + m->shard_rank, "shard",
                        &m->shard_comm, err)) ||
            (rc = split(m->dp_cp_comm, m->cp_rank * m->shard + m->shard_rank, m->replicate_rank, "replicate",
                        &m->replicate_comm, err)))
            goto fail;
        /* ... and those holding the same expert piece across the shard groups: the replicate group
         * (ep divides S) or the whole edp group (S divides ep), the same ranks in the same order */
        if (m->ep > 1 && m->edp_shard && m->edp_replicate > 1)
            m->edp_replicate_comm = m->shard * cp % m->ep == 0 ? m->replicate_comm : m->edp_comm;
    }
    *out = m;
    return ZT_OK;
fail:
    zt_mesh_free(m);
    return rc;
}

void zt_mesh_describe(const zt_mesh *m, char *buf, size_t cap) {
    char dp[64];
    if (m->replicate > 1 && m->shard > 1)
        snprintf(dp, sizeof dp, "%d (replicate %d x shard %d)", m->dp, m->replicate, m->shard);
    else
        snprintf(dp, sizeof dp, "%d", m->dp);
    char cp[32] = "", cpr[24] = ""; /* named when the sequences are split */
    if (m->cp > 1) {
        snprintf(cp, sizeof cp, " x cp %d", m->cp);
        snprintf(cpr, sizeof cpr, ", cp %d", m->cp_rank);
    }
    int n = snprintf(buf, cap, "tp %d%s x dp %s x pp %d on %d rank%s; this rank: tp %d%s, dp %d, pp %d", m->tp, cp, dp,
                     m->pp, m->world, m->world == 1 ? "" : "s", m->tp_rank, cpr, m->dp_rank, m->pp_rank);
    if (m->ep > 1 && n > 0 && (size_t)n < cap) /* expert parallelism: within the data-parallel ranks */
        snprintf(buf + n, cap - (size_t)n, "; ep %d (expert data parallel %d): ep rank %d", m->ep, m->edp, m->ep_rank);
}
