/* train_step.c — the graphs the executor runs: the whole training step (batch gather,
 * timesteps, noise, the UNet, the loss, its backward pass by autodiff, the copies of both for
 * the further micro-batches of gradient accumulation, the data-parallel all-reduce, gradient
 * clipping, AdamW, EMA, the loss watch and the step increment) and the forward pass alone for
 * sampling. The network itself comes from unet.c.
 */
#include <stdlib.h>
#include <string.h>

#include "planner/autodiff.h"
#include "planner/unet.h"

static int scalar_state(sg_graph *g, const char *name, sg_dtype dt) {
    int64_t one[1] = {1};
    return sg_tensor_new(g, name, dt, ROLE_STATE, 1, one);
}

/* One region tensor per persistent role: a flat f32 view over the whole role region (the
 * optimizer runs one kernel over it). Its size counts every tensor of the role at SG_ALIGN. */
static int region(sg_graph *g, sg_role role, const char *name) {
    int64_t bytes = 0;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == role && !g->t[i].region) bytes += SG_ALIGN_UP(g->t[i].bytes, SG_ALIGN);
    int64_t n[1] = {bytes / 4};
    int id = sg_tensor_new(g, name, DT_F32, role, 1, n);
    if (id >= 0) g->t[id].region = 1;
    return id;
}

/* ---- the bf16 copy of the weights (bf16 runs)
 *
 * A bf16 convolution or linear layer multiplies its weights rounded to bf16. Rather than each
 * of them converting the fp32 master weights on every call, the plan keeps the copy: a region
 * of role ROLE_PARAM_BF16 that mirrors the parameter region element for element (element j is
 * round(params element j), sg_f32_to_bf16; plan_layout.c places each copy at half its
 * parameter's offset in the region), and the forward node of every bf16 conv / linear reads its
 * weights' copy "bf16:<name>" instead of the parameter, so its backward-data node (made from it
 * by autodiff) does too; the backward-weight node writes the parameter's fp32 gradient as
 * before (the copy's gradient IS the parameter's). Who keeps the copy equal to round(params):
 * the optimizer pass (OP_ADAMW_EMA_BF16 writes it with the parameters it updates), and every
 * write into the parameter region from the host (the backends' upload: initialisation,
 * checkpoint loads, --init-from, the data-parallel broadcast; graph/backend.h). fp32 runs have
 * no copy. */

/* the bf16 copy of parameter p, made on first use */
static int weight_copy(sg_graph *g, int p) {
    for (int t = 0; t < g->nt; t++)
        if (g->t[t].copy_of == p) return t;
    char nm[SG_NAME_MAX];
    const sg_tensor w = g->t[p]; /* a copy: sg_tensor_new may move g->t */
    sg_name(nm, "bf16:%s", w.name);
    int id = sg_tensor_new(g, nm, DT_BF16, ROLE_PARAM_BF16, w.ndim, w.shape);
    if (id < 0) return -1;
    g->t[id].copy_of = p;
    g->t[id].grad = w.grad; /* its gradient is the parameter's */
    g->t[id].needs_grad = w.needs_grad;
    return id;
}

/* Every bf16 conv (conv2d, conv2d_add, conv2d_sc: both its weights) / linear forward node (so far:
 * the network's) reads its weights' copy; the region tensor "params_bf16" over the copies, when
 * there are any (else -1). */
static int bf16_weights(sg_graph *g, int *region_out) {
    int any = 0;
    *region_out = -1;
    for (int i = 0; i < g->nn; i++) {
        const int op = g->n[i].op, w = g->n[i].in[1];
        if ((op != OP_CONV2D && op != OP_CONV2D_ADD && op != OP_CONV2D_SC && op != OP_LINEAR) ||
            g->t[g->n[i].in[0]].dtype != DT_BF16 || g->t[w].role != ROLE_PARAM)
            continue;
        const int c = weight_copy(g, w);
        if (c < 0) return SG_ERR;
        g->n[i].in[1] = c;
        any = 1;
        if (op == OP_CONV2D_SC) { /* and the folded shortcut's weights */
            const int cs = weight_copy(g, g->n[i].in[4]);
            if (cs < 0) return SG_ERR;
            g->n[i].in[4] = cs;
        }
    }
    if (!any) return SG_OK;
    /* as many elements as the parameter region, element j the copy of its element j */
    int64_t bytes = 0;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == ROLE_PARAM && !g->t[i].region)
            bytes += SG_ALIGN_UP(g->t[i].bytes, SG_ALIGN);
    int64_t n[1] = {bytes / 4};
    int id = sg_tensor_new(g, "params_bf16", DT_BF16, ROLE_PARAM_BF16, 1, n);
    if (id < 0) return SG_ERR;
    g->t[id].region = 1;
    *region_out = id;
    return SG_OK;
}

/* ---- gradient accumulation: micro-batches 1 .. K-1 as copies of micro-batch 0's nodes
 *
 * Micro-batch 0 is built as the classic step's forward and backward (over batch / (ranks K)
 * samples); each further micro-batch k is a copy of those nodes, in the same order, appended
 * after them: the schedule is fwd 0, bwd 0, fwd 1, bwd 1, ..., then the optimizer once. A copy
 * reads and writes the same persistent tensors (parameters, the gradient region, the step
 * state, the dataset) and its own copy of every other tensor ("mb<k>/<name>"), so micro-batch
 * k's activations are dead before micro-batch k+1's exist and the layout puts them in the same
 * memory: the arena is that of one micro-batch. A copy's write into a persistent tensor (a
 * parameter's gradient; the loss) accumulates: micro-batch 0 overwrites, the others add, in
 * micro-batch order — the same accumulate bits autodiff uses for gradient fan-in. Which
 * samples and random numbers a copy takes is its node's `micro` (sg_node_slice). */

/* micro-batch k's tensor for micro-batch 0's tensor t (map: 0's ids -> k's, -1 not yet made) */
static int micro_tensor(sg_graph *g, int *map, int t, int k) {
    if (sg_role_persistent(g->t[t].role)) return t;
    if (map[t] >= 0) return map[t];
    int parts[2] = {-1, -1};
    for (int p = 0; p < g->t[t].nparts; p++)
        if ((parts[p] = micro_tensor(g, map, g->t[t].parts[p], k)) < 0) return -1;
    const sg_tensor x = g->t[t]; /* a copy: sg_tensor_new may move g->t */
    char nm[SG_NAME_MAX];
    sg_name(nm, "mb%d/%s", k, x.name);
    int id = sg_tensor_new(g, nm, x.dtype, x.role, x.ndim, x.shape);
    if (id < 0) return -1;
    sg_tensor *y = &g->t[id];
    y->nparts = x.nparts;
    y->parts[0] = parts[0], y->parts[1] = parts[1];
    /* a virtual normalised tensor: the copy of its node (node i's copy is i + k span) */
    if (x.vnorm >= 0) y->vnorm = x.vnorm + k * (g->n_forward + g->n_backward);
    if (sg_tensor_virtual(&x)) y->bytes = 0;
    y->needs_grad = x.needs_grad;
    y->twin = t;
    return map[t] = id;
}

/* Append micro-batches 1 .. K-1 (the nodes so far are micro-batch 0's forward and backward);
 * `loss` is the one persistent tensor besides the gradients that they write. */
static int copy_micro_batches(sg_graph *g, int K, int loss) {
    const int span = g->nn, nt0 = g->nt;
    SG_ASSERT(span == g->n_forward + g->n_backward);
    g->micro_batches = K;
    if (K <= 1) return SG_OK;
    int *map = malloc(sizeof(int) * (size_t)nt0);
    if (!map) return sg_set_error("out of host memory copying the micro-batches");
    int rc = SG_OK;
    for (int k = 1; k < K && !rc; k++) {
        for (int t = 0; t < nt0; t++) map[t] = -1;
        for (int i = 0; i < span && !rc; i++) {
            const sg_node nd = g->n[i]; /* a copy: adding nodes may move g->n */
            int in[SG_MAX_IN], out[SG_MAX_OUT] = {-1, -1, -1, -1};
            unsigned accum = nd.accum;
            for (int j = 0; j < nd.nin && !rc; j++)
                if ((in[j] = micro_tensor(g, map, nd.in[j], k)) < 0) rc = SG_ERR;
            for (int o = 0; o < nd.nout && !rc; o++) {
                if ((out[o] = micro_tensor(g, map, nd.out[o], k)) < 0) rc = SG_ERR;
                if (rc || !sg_role_persistent(g->t[out[o]].role)) continue;
                /* only the parameters' gradients and the loss are written across micro-batches */
                SG_ASSERT(g->t[out[o]].role == ROLE_GRAD || out[o] == loss);
                accum |= sg_accum_bit(o, 0);
            }
            if (rc) break;
            int id = sg_node_add(g, nd.op, in, nd.nin, out, &nd.a, g->t[out[0]].name);
            if (id < 0) {
                rc = SG_ERR;
                break;
            }
            g->n[id].accum = accum;
            g->n[id].fwd = nd.fwd >= 0 ? nd.fwd + k * span : -1;
            g->n[id].micro = k;
            for (int o = 0; o < nd.nout; o++) {
                const int p = g->t[nd.out[o]].producer;
                if (!sg_role_persistent(g->t[out[o]].role) && p >= 0)
                    g->t[out[o]].producer = p + k * span;
            }
        }
    }
    free(map);
    return rc;
}

int sg_build_train_step(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (sg_model_validate(c)) return SG_ERR;
    memset(io, -1, sizeof *io);
    builder b = {.g = g, .c = c, .train = 1};
    /* one micro-batch's samples: c->batch is the global batch = ranks x K x N */
    const int N = sg_model_micro_batch(c), K = sg_model_micro_batches(c);
    io->step = scalar_state(g, "step", DT_I64);
    io->seed = scalar_state(g, "rng_seed", DT_U64);
    io->lr = scalar_state(g, "lr", DT_F32);
    io->loss = scalar_state(g, "loss", DT_F32);
    io->grad_sumsq = scalar_state(g, "grad_sumsq", DT_F32);
    io->clip_scale = scalar_state(g, "clip_scale", DT_F32);
    int64_t ds[4] = {c->data_n, c->data_h, c->data_w, c->in_ch};
    io->dataset = sg_tensor_new(g, "dataset", DT_U8, ROLE_INPUT, 4, ds);
    b.seed_t = io->seed, b.step_t = io->step;

    int in3[3] = {io->dataset, io->seed, io->step};
    sg_op_args ga = {.gather = {.N = N, .img = c->img, .flip = c->flip, .batch = c->batch}};
    io->x0 = sg_builder_node(&b, OP_GATHER_BATCH, in3, 3, &ga, "x0", 0);
    if (c->classes > 0) {
        /* the labels of the gathered images, some dropped to the null class */
        int64_t ls[1] = {c->data_n};
        io->labels = sg_tensor_new(g, "labels", DT_I32, ROLE_INPUT, 1, ls);
        if (io->labels < 0) return SG_ERR;
        int lin[3] = {io->labels, io->seed, io->step};
        sg_op_args la = {
            .labels = {.N = N, .batch = c->batch, .classes = c->classes, .p = c->class_dropout}};
        io->class_labels = sg_builder_node(&b, OP_GATHER_LABELS, lin, 3, &la, "class_labels", 0);
    }
    int in2[2] = {io->seed, io->step};
    sg_op_args ta = {.sample_t = {.N = N, .T = c->T}};
    io->t = sg_builder_node(&b, OP_SAMPLE_T, in2, 2, &ta, "t", 0);
    int in3b[3] = {io->x0, io->seed, io->step};
    sg_op_args na = {.noise = {.C = c->in_ch, .offset = c->noise_offset}};
    io->eps = sg_builder_node(&b, OP_NOISE, in3b, 3, c->noise_offset > 0 ? &na : NULL, "eps", 0);
    /* input perturbation: x_t from the same noise (drawn again, the same bits) plus a second
     * normal per value; the target below stays eps (or v from eps) */
    io->eps_in = io->eps;
    if (c->input_perturbation > 0) {
        sg_op_args pa = na;
        pa.noise.perturb = c->input_perturbation;
        io->eps_in = sg_builder_node(&b, OP_NOISE, in3b, 3, &pa, "eps_in", 0);
    }
    /* every timestep's noising coefficients, computed once (common/sg_schedule.h) */
    int64_t tab[2] = {c->T, SG_DDPM_ROW_BYTES};
    io->ddpm_table = sg_tensor_new(g, "ddpm_table", DT_U8, ROLE_INPUT, 2, tab);
    if (io->ddpm_table < 0) return SG_ERR;
    int in4[4] = {io->x0, io->eps_in, io->t, io->ddpm_table};
    sg_op_args da = {.ddpm = {.T = c->T,
                              .schedule = c->beta_schedule,
                              .beta1 = c->beta1,
                              .betaT = c->betaT,
                              .out_dt = c->act_dt,
                              .zero_snr = c->zero_snr}};
    io->xt = sg_builder_node(&b, OP_DDPM_NOISE, in4, 4, &da, "x_t", 0);
    /* v prediction: the target v = sqrt(abar) eps - sqrt(1 - abar) x0, fp32 as eps, by the
     * noising op on (eps, x0) with the coefficients {sqrt(abar), -sqrt(1 - abar)} */
    int target = io->eps;
    if (c->prediction == SG_PRED_V) {
        io->v_table = sg_tensor_new(g, "v_table", DT_U8, ROLE_INPUT, 2, tab);
        if (io->v_table < 0) return SG_ERR;
        int vin[4] = {io->eps, io->x0, io->t, io->v_table};
        sg_op_args va = da;
        va.ddpm.out_dt = DT_F32, va.ddpm.v_target = 1;
        target = io->v = sg_builder_node(&b, OP_DDPM_NOISE, vin, 4, &va, "v", 0);
    }
    io->pred = sg_unet(&b, io->xt, io->t, io->class_labels);
    if (b.err || bf16_weights(g, &io->params_bf16)) return SG_ERR;
    /* the loss scale: the gradient of the loss is 1/(ranks K), so the sum of the K
     * micro-batches' gradients and the all-reduce SUM of the ranks' is the gradient of the
     * global batch's mean loss (1/1 = 1 in one process without accumulation) */
    int mse_in[4] = {io->pred, target, io->t, -1}, mse_out[SG_MAX_OUT] = {io->loss};
    const double parts = (double)(c->ranks > 0 ? c->ranks : 1) * K;
    sg_op_args ma = {.mse = {.loss_scale = (float)(1.0 / parts), .micro_batches = K}};
    /* min-SNR (--snr-gamma): each sample's squared error times its timestep's weight */
    if (c->snr_gamma > 0 || c->p2_gamma > 0) {
        int64_t wt[1] = {c->T};
        mse_in[3] = io->loss_weight = sg_tensor_new(g, "loss_weight", DT_F32, ROLE_INPUT, 1, wt);
        if (io->loss_weight < 0 || sg_node_add(g, OP_MSE_W, mse_in, 4, mse_out, &ma, "mse") < 0)
            return SG_ERR;
    } else {
        if (sg_node_add(g, OP_MSE, mse_in, 2, mse_out, &ma, "mse") < 0) return SG_ERR;
    }
    io->n_params = b.n_params;

    if (ad_backward(g, io->loss)) return SG_ERR;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == ROLE_PARAM && !g->t[g->t[i].grad].has_contrib)
            return sg_set_error("parameter %s receives no gradient", g->t[i].name);
    if (copy_micro_batches(g, K, io->loss)) return SG_ERR;

    io->params = region(g, ROLE_PARAM, "params");
    io->grads = region(g, ROLE_GRAD, "grads");
    io->adam_m = region(g, ROLE_ADAM_M, "adam_m");
    io->adam_v = region(g, ROLE_ADAM_V, "adam_v");
    io->ema = region(g, ROLE_EMA, "ema");
    int o[SG_MAX_OUT];
    if (c->ranks > 0) {
        /* data parallel: the one all-reduce of the step, after the backward pass and before
         * anything reads the gradients, so every rank then clips, steps and averages the same
         * numbers and stays bit-identical. Gradients sum (the 1/ranks is in the loss scale);
         * the loss is averaged over the ranks for the record. */
        int r_in[2] = {io->grads, io->loss}, r_out[SG_MAX_OUT] = {io->grads, io->loss};
        sg_op_args ra = {.allreduce = {.ranks = c->ranks, .loss_factor = (float)(1.0 / c->ranks)}};
        io->allreduce = sg_node_add(g, OP_ALLREDUCE, r_in, 2, r_out, &ra, "allreduce");
        if (io->allreduce < 0) return SG_ERR;
    }
    int s_in[1] = {io->grads};
    o[0] = io->grad_sumsq;
    if (sg_node_add(g, OP_GRAD_SUMSQ, s_in, 1, o, NULL, "grad_sumsq") < 0) return SG_ERR;
    int c_in[1] = {io->grad_sumsq};
    sg_op_args ca = {.clip = {.max_norm = c->clip}};
    o[0] = io->clip_scale;
    if (sg_node_add(g, OP_CLIP_SCALE, c_in, 1, o, &ca, "clip_scale") < 0) return SG_ERR;
    /* AdamW, then the EMA of the updated weights, in one pass over the regions; the step
     * counter still holds the step being finished (0-based): AdamW's k - 1, the EMA warm-up's s */
    int a_in[7] = {io->params, io->grads,      io->adam_m, io->adam_v,
                   io->ema,    io->clip_scale, io->step};
    int a_out[SG_MAX_OUT] = {io->params, io->adam_m, io->adam_v, io->ema, io->lr, io->params_bf16};
    /* bf16 runs: the same pass also writes the bf16 copy of the parameters it updated */
    const sg_op opt = io->params_bf16 >= 0 ? OP_ADAMW_EMA_BF16 : OP_ADAMW_EMA;
    sg_op_args aa = {.optim = {.adamw = {.warmup = c->warmup,
                                         .lr = c->lr,
                                         .b1 = c->b1,
                                         .b2 = c->b2,
                                         .eps = c->eps,
                                         .wd = c->wd,
                                         .schedule = c->lr_schedule,
                                         .lr_min = c->lr_min,
                                         .decay_steps = c->lr_decay_steps},
                               .ema = {.decay = c->ema_decay,
                                       .warmup = c->ema_warmup,
                                       .inv_gamma = c->ema_inv_gamma,
                                       .power = c->ema_power}}};
    if (sg_node_add(g, opt, a_in, 7, a_out, &aa, "adamw_ema") < 0) return SG_ERR;
    /* before the increment: it records step + 1, the 1-based step just run */
    io->watch = scalar_state(g, "nonfinite_step", DT_I64);
    io->loss_sum = scalar_state(g, "loss_sum", DT_F32);
    int w_in[5] = {io->loss, io->grad_sumsq, io->step, io->watch, io->loss_sum};
    int w_out[SG_MAX_OUT] = {io->watch, io->loss_sum};
    if (sg_node_add(g, OP_LOSS_WATCH, w_in, 5, w_out, NULL, "loss_watch") < 0) return SG_ERR;
    int st_in[1] = {io->step}, st_out[SG_MAX_OUT] = {io->step};
    if (sg_node_add(g, OP_STEP_INC, st_in, 1, st_out, NULL, "step_inc") < 0) return SG_ERR;
    return SG_OK;
}

int sg_build_forward(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (sg_model_validate(c)) return SG_ERR;
    memset(io, -1, sizeof *io);
    sg_model_cfg fc = *c;
    fc.dropout = 0; /* sampling: the network in evaluation form */
    builder b = {.g = g, .c = &fc, .train = 0};
    /* guided: each image twice (planner/sample_graph.c) */
    const int64_t fb = (sg_model_guided(c) ? 2 : 1) * (int64_t)c->batch;
    int64_t xs[4] = {fb, c->img, c->img, c->in_ch}, ts[1] = {fb};
    io->xt = sg_tensor_new(g, "x_t", c->act_dt, ROLE_INPUT, 4, xs);
    io->t = sg_tensor_new(g, "t", DT_I32, ROLE_INPUT, 1, ts);
    if (c->classes > 0 &&
        (io->class_labels = sg_tensor_new(g, "class_labels", DT_I32, ROLE_INPUT, 1, ts)) < 0)
        return SG_ERR;
    io->pred = sg_unet(&b, io->xt, io->t, io->class_labels);
    if (b.err || bf16_weights(g, &io->params_bf16)) return SG_ERR;
    io->n_params = b.n_params;
    io->params = region(g, ROLE_PARAM, "params");
    g->n_forward = g->nn;
    return SG_OK;
}
