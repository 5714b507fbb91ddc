/* train_step.c — the graphs the executor runs: the whole training step (batch gather,
 * timesteps, noise, the UNet, the loss, its backward pass by autodiff, the data-parallel
 * all-reduce, gradient clipping, AdamW, EMA, the loss watch and the step increment) and the
 * forward pass alone for sampling. The network itself comes from unet.c.
 */
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

int sg_build_train_step(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (sg_model_validate(c)) return SG_ERR;
    memset(io, -1, sizeof *io);
    builder b = {.g = g, .c = c, .train = 1};
    int N = sg_model_rank_batch(c); /* this rank's samples; c->batch is the global batch */
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
    int in2[2] = {io->seed, io->step};
    sg_op_args ta = {.sample_t = {.N = N, .T = c->T}};
    io->t = sg_builder_node(&b, OP_SAMPLE_T, in2, 2, &ta, "t", 0);
    int in3b[3] = {io->x0, io->seed, io->step};
    io->eps = sg_builder_node(&b, OP_NOISE, in3b, 3, NULL, "eps", 0);
    int in3c[3] = {io->x0, io->eps, io->t};
    sg_op_args da = {
        .ddpm = {.T = c->T, .beta1 = c->beta1, .betaT = c->betaT, .out_dt = c->act_dt}};
    io->xt = sg_builder_node(&b, OP_DDPM_NOISE, in3c, 3, &da, "x_t", 0);
    io->pred = sg_unet(&b, io->xt, io->t);
    if (b.err) return SG_ERR;
    /* the loss scale: the gradient of the loss is 1/ranks, so the all-reduce SUM of the ranks'
     * gradients is the gradient of the global batch's mean loss (1/1 = 1 in one process) */
    int mse_in[2] = {io->pred, io->eps}, mse_out[SG_MAX_OUT] = {io->loss};
    sg_op_args ma = {.mse = {.loss_scale = c->ranks > 0 ? (float)(1.0 / c->ranks) : 1.0f}};
    if (sg_node_add(g, OP_MSE, mse_in, 2, mse_out, &ma, "mse") < 0) return SG_ERR;
    io->n_params = b.n_params;

    if (ad_backward(g, io->loss)) return SG_ERR;
    for (int i = 0; i < g->nt; i++)
        if (g->t[i].role == ROLE_PARAM && !g->t[g->t[i].grad].has_contrib)
            return sg_set_error("parameter %s receives no gradient", g->t[i].name);

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
    int a_in[6] = {io->params, io->grads, io->adam_m, io->adam_v, io->clip_scale, io->step};
    int a_out[SG_MAX_OUT] = {io->params, io->adam_m, io->adam_v, io->lr};
    sg_op_args aa = {.adamw = {.warmup = c->warmup,
                               .lr = c->lr,
                               .b1 = c->b1,
                               .b2 = c->b2,
                               .eps = c->eps,
                               .wd = c->wd,
                               .schedule = c->lr_schedule,
                               .lr_min = c->lr_min,
                               .decay_steps = c->lr_decay_steps}};
    if (sg_node_add(g, OP_ADAMW, a_in, 6, a_out, &aa, "adamw") < 0) return SG_ERR;
    /* the step counter still holds the step being finished (0-based): the EMA warm-up's s */
    int e_in[3] = {io->ema, io->params, io->step}, e_out[SG_MAX_OUT] = {io->ema};
    sg_op_args ea = {.ema = {.decay = c->ema_decay,
                             .warmup = c->ema_warmup,
                             .inv_gamma = c->ema_inv_gamma,
                             .power = c->ema_power}};
    if (sg_node_add(g, OP_EMA, e_in, 3, e_out, &ea, "ema") < 0) return SG_ERR;
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
    int64_t xs[4] = {c->batch, c->img, c->img, c->in_ch}, ts[1] = {c->batch};
    io->xt = sg_tensor_new(g, "x_t", c->act_dt, ROLE_INPUT, 4, xs);
    io->t = sg_tensor_new(g, "t", DT_I32, ROLE_INPUT, 1, ts);
    io->pred = sg_unet(&b, io->xt, io->t);
    if (b.err) return SG_ERR;
    io->n_params = b.n_params;
    io->params = region(g, ROLE_PARAM, "params");
    g->n_forward = g->nn;
    return SG_OK;
}
