/* collective.c - alpha-beta cost of ring, tree and pairwise collectives over node-spanning groups
 * (the formulas are in collective.h). */
#include "scale/collective.h"

#include <math.h>

zt_scale_group zt_scale_group_of(const zt_scale_net *net, int size, int stride) {
    int L = net->per_node > 0 ? net->per_node : 1;
    zt_scale_group g = {1, 1, 1};
    if (size < 1) size = 1;
    if (stride < 1) stride = 1;
    if (stride == 1) { /* consecutive ranks */
        g.local = size < L ? size : L;
        g.nodes = (size + L - 1) / L;
        g.concurrent = L / g.local; /* the other groups on the node */
    } else {               /* members stride apart: on a node, the members of one group are L/stride apart */
        int per = stride < L ? (L + stride - 1) / stride : 1;
        g.local = per < size ? per : size;
        g.nodes = (size + g.local - 1) / g.local;
        g.concurrent = stride < L ? stride : L;
    }
    if (g.concurrent < 1) g.concurrent = 1;
    return g;
}

/* one pass of a reduce-scatter or all-gather */
static double one_pass(const zt_scale_net *net, zt_scale_group g, double S, double *node_out) {
    int p = g.local * g.nodes;
    *node_out = 0;
    if (p <= 1 || S <= 0) return 0;
    double frac = (double)(p - 1) / p;
    if (g.nodes == 1) return (p - 1) * net->intra_lat + S * frac / net->intra_bw;
    double b_node = net->nics * net->nic_bw / g.concurrent;
    double out = net->algo == ZT_SCALE_PAIRWISE ? (double)g.local * (p - g.local) / p * S : S * frac;
    double intra = 0;
    if (g.local > 1)
        intra = net->algo == ZT_SCALE_PAIRWISE ? (double)(g.local - 1) / p * S / net->intra_bw : S * frac / net->intra_bw;
    *node_out = out * g.concurrent;
    double inter = out / b_node;
    return (p - 1) * net->inter_lat + (inter > intra ? inter : intra);
}

zt_scale_cost zt_scale_collective(const zt_scale_net *net, zt_scale_group g, zt_scale_op op, double bytes) {
    zt_scale_cost c = {0, 0, false};
    double out;
    c.seconds = one_pass(net, g, bytes, &out);
    c.node_out_bytes = out;
    if (op != ZT_SCALE_ALL_REDUCE) return c;
    c.seconds *= 2; /* reduce-scatter + all-gather */
    c.node_out_bytes *= 2;
    if (net->algo == ZT_SCALE_RING && g.nodes > 1 && g.local * g.nodes > 1) {
        double b_node = net->nics * net->nic_bw / g.concurrent, slow = b_node;
        if (g.local > 1 && net->intra_bw < slow) slow = net->intra_bw;
        double tree = 2.0 * ((g.local - 1) * net->intra_lat + ceil(log2((double)g.nodes)) * net->inter_lat) +
                      2.0 * bytes / slow;
        if (tree < c.seconds) {
            c.seconds = tree;
            c.node_out_bytes = 2.0 * bytes * g.concurrent; /* up the tree and down again */
            c.tree = true;
        }
    }
    return c;
}
