/* op_list.h — every op, one row each: the one place an op is declared.
 *
 * SG_OP_LIST is expanded three times, so none of them can disagree with it:
 * - planner/ir.h: the sg_op enum (column `op`);
 * - planner/ops.c: the op table sg_ops[] (every other column; a rule named in a row that
 *   ops.c does not define does not compile);
 * - each backend (graph/backend_cpu.c, graph/backend_cuda_run.c): its table of run functions,
 *   cpu_run_<id> / cuda_run_<id>, so a backend that lacks an op does not compile either.
 *
 * Columns:
 *   op        the enum value
 *   id        its name: the string in plans and profiles, and the backends' function suffix
 *   kind      FWD (step inputs, the model, its loss), BWD (backward), OPT (optimizer, and the
 *             sampler's update: in place on persistent state after the forward pass); read
 *             with sg_op_is_forward / sg_op_is_optimizer, never from the enum order
 *   in, out   inputs and outputs a node of the op has
 *   inpl      output 0 may share input 0's memory
 *   mm        FLOPs are matrix work (the tensor-core figure MFU is measured against)
 *   shape     shape rule: the outputs' dtype and shape from the inputs and args (ops.c)
 *   flops     FLOP rule (ops.c)
 *   ws        CUDA workspace rule in bytes (ops.c), 0 when the launcher takes none
 *   backward  backward rule (ops.c): the nodes that differentiate it; 0 for none
 *   bwd_op    the op bwd_pointwise emits (pointwise ops only); -1 otherwise
 *   recomp    the op that recomputes an output in the backward pass from the node's inputs
 *             followed by its other outputs, the first `in` of them (a two-pass op's second
 *             pass, reading what the first pass saved; attention's P from qkv alone); -1 for
 *             none. A forward output the builder marks (sg_tensor.recompute) is then not kept
 *             for the backward pass: autodiff emits this op just before the output's first
 *             backward reader (planner/autodiff.c). An op has one output it recomputes
 *
 * A new op goes at the END of the list, whatever its kind: an op's enum value is part of the
 * plan hash that checkpoints carry (planner/plan_layout.c), so inserting one in the middle
 * would make every existing checkpoint's plan "different". The group comments are for reading
 * only: the kind column says what an op is.
 *
 * Operands (inputs -> outputs) and the sg_op_args member each op reads:
 *   gather_batch    dataset, seed, step -> x0                           args.gather
 *   sample_t        seed, step -> t (i32[N])                            args.sample_t
 *   gather_labels   labels (i32[ndata]), seed, step -> y (i32[N]): the labels of gather_batch's
 *                   items, each the null class with probability p        args.labels
 *   class_emb       y (i32[N]), table (f32[rows, dim]) -> e[N, dim]: row y[n] per sample
 *                                                                       args.cemb
 *   class_emb_bwd   de, y -> dtable (f32[rows, dim]): each row the sum of its samples' de in
 *                   sample order (0 for a row no sample picked)          args.cemb
 *   noise           x0, seed, step -> eps
 *   ddpm_noise      x0, eps, t, table -> x_t (table: u8 [T][16], every timestep's sg_ddpm_row,
 *                   written once by the executor; the CPU reference recomputes them from the
 *                   args, the CUDA kernel reads them)                   args.ddpm
 *   timestep_emb    t -> emb[N, dim]                                    args.temb
 *   linear          x, w, b -> y
 *   conv2d          x, w, b -> y                                        args.conv
 *   group_norm      x, gamma, beta -> y, mean, rstd                     args.gn
 *   silu, add       x (, y) -> y
 *   silu_mul        a, b -> silu(a) * b   (a gated unit's gate)
 *   gelu            x -> x Phi(x)   (the exact GELU, PyTorch's approximate='none')
 *   add_nc          x[N,H,W,C], v[N,C] -> y
 *   concat          a, b -> channel concatenation (virtual: never copied)
 *   upsample2x, avgpool2x   x -> y
 *   attention       qkv -> y, P                                         args.attn
 *   attention_p     qkv -> P: the forward's scores and softmax alone (the recompute of P in
 *                   the backward pass: the same kernels as the forward's, same bits)
 *   dropout         x, seed, step -> y                                  args.dropout
 *   mse             pred, target -> loss
 *   mse_w           pred, target, t, weights -> loss (weights: f32[T], the min-SNR weight of
 *                   every timestep, written once by the executor)   args.mse
 *   *_bwd           dy and what the forward op saved -> gradient contributions
 *   accum           g -> y (y = g, or y += g: gradient fan-in)
 *   grad_sumsq      grads -> sumsq
 *   clip_scale      sumsq -> scale                                      args.clip
 *   adamw           params, grads, m, v, scale, step -> params, m, v, lr   args.adamw
 *   ema             ema, params, step -> ema                            args.ema
 *   adamw_ema       params, grads, m, v, ema, scale, step -> params, m, v, ema, lr: AdamW then
 *                   the EMA of the updated params in one pass over the regions (bit for bit
 *                   adamw followed by ema; the training step's optimizer)  args.optim
 *   adamw_ema_bf16  the same -> params, m, v, ema, lr, params_bf16: and the bf16 copy of the
 *                   updated params (bf16 runs; planner/train_step.c)   args.optim
 *   step_inc        step -> step
 *   loss_watch      loss, sumsq, step, watch, loss_sum -> watch, loss_sum (in place): the
 *                   first step whose loss or gradient was not finite, and the running loss
 *                   sum the trainer averages and resets per log line
 *   allreduce       grads, loss -> grads summed, loss averaged over the ranks (in place; data
 *                   parallel: after the backward pass, before the optimizer's first op)
 *                                                                       args.allreduce
 *   sample_step     x, pred, table, k, key, x0h -> x, x_t, t, x0h: one denoising step of the
 *                   sampling plan (x fp32 in place; x_t, t: the next forward's input; k the
 *                   step counter picking the table row; key {seed, first}; x0h fp32 in place,
 *                   DPM-Solver++(2M)'s x0 history; graph/sampler.h)
 *                                                                       args.sampler
 *   norm_act        x, gamma, beta -> y, mean, rstd: act(group_norm(x))  args.gn
 *   norm_act_temb   x, v, gamma, beta, seed, step -> y, mean, rstd: dropout(act(group_norm(
 *                   x + v[n,c]))), the ResBlock's second normalisation   args.gn
 *   norm_act_apply, norm_act_temb_apply
 *                   the forward's inputs, mean, rstd -> y: the second pass alone (the recompute
 *                   of y in the backward pass; the same kernel as the forward's, same bits)
 *   norm_act_bwd, norm_act_temb_bwd
 *                   dy, then the apply op's inputs -> dx, [dv,] dgamma, dbeta
 *                   (planner/op_dims.h: sg_norm_operands_of says which input is which)
 *   conv2d_add      x, w, b, r -> y = conv2d(x, w, b) rounded to y's dtype, + r: a residual
 *                   add in the conv's store (the fused plan, planner/fuse.c; the bits of
 *                   conv2d then add)                                    args.conv
 *   upconv2d        x, w, b -> y[N,2H,2W,Co] = conv2d(upsample2x(x), w, b), 3x3 pad 1, as four
 *                   2x2 convs of x with the folded weights (never the upsampled tensor; the
 *                   fused plan, planner/fuse.c). w: the fp32 master weights (the fold sums
 *                   them in fp32 and rounds the folded ones to bf16 once in bf16 runs: not
 *                   conv2d's bits)                                      args.conv
 *   upconv2d_bwd_data, upconv2d_bwd_weight
 *                   dy, w -> dx (args.conv H, W: x's); dy, x -> dw [Co,3,3,Ci], db
 *   conv2d_sc       h, w, b, x, ws, bs -> y = conv2d(h, w, b) + conv2d_1x1(x, ws, bs), summed
 *                   in fp32 and rounded once: a ResBlock's conv2 with its 1x1 shortcut folded
 *                   into the same GEMM (the fused bf16 plan, planner/fuse.c; stride 1, x
 *                   [N, H, W, Cin] at h's pixels, ws [Co, 1, 1, Cin])   args.conv (conv2's)
 */
#ifndef SG_OP_LIST_H
#define SG_OP_LIST_H

/* clang-format off */
#define SG_OP_LIST(X) \
    /* op                  id                 kind in out inpl mm shape             flops         ws            backward       bwd_op           recomp */ \
    /* step inputs, computed on the device from device-resident state */ \
    X(OP_GATHER_BATCH,      gather_batch,      FWD, 3, 1, 0, 0, shape_gather,     numel_out0,   0,            0,             -1, -1) \
    X(OP_SAMPLE_T,          sample_t,          FWD, 2, 1, 0, 0, shape_sample_t,   numel_out0,   0,            0,             -1, -1) \
    X(OP_NOISE,             noise,             FWD, 3, 1, 0, 0, shape_like0,      numel_out0,   0,            0,             -1, -1) \
    X(OP_DDPM_NOISE,        ddpm_noise,        FWD, 4, 1, 0, 0, shape_ddpm,       numel_out0,   0,            0,             -1, -1) \
    /* the model and its loss */ \
    X(OP_TIMESTEP_EMB,      timestep_emb,      FWD, 1, 1, 0, 0, shape_temb,       numel_out0,   0,            0,             -1, -1) \
    X(OP_LINEAR,            linear,            FWD, 3, 1, 0, 1, shape_linear,     flops_linear, ws_linear,    bwd_linear,    -1, -1) \
    X(OP_CONV2D,            conv2d,            FWD, 3, 1, 0, 1, shape_conv,       flops_conv,   ws_conv,      bwd_conv,      -1, -1) \
    X(OP_GROUP_NORM,        group_norm,        FWD, 3, 3, 0, 0, shape_gn,         flops_5x,     0,            bwd_gn,        -1, -1) \
    X(OP_SILU,              silu,              FWD, 1, 1, 1, 0, shape_like0,      numel_out0,   0,            bwd_pointwise, OP_SILU_BWD, -1) \
    X(OP_ADD,               add,               FWD, 2, 1, 1, 0, shape_add,        numel_out0,   0,            bwd_add,       -1, -1) \
    X(OP_ADD_NC,            add_nc,            FWD, 2, 1, 1, 0, shape_add_nc,     numel_out0,   0,            bwd_add_nc,    -1, -1) \
    X(OP_CONCAT,            concat,            FWD, 2, 1, 0, 0, shape_concat,     no_flops,     0,            bwd_concat,    -1, -1) \
    X(OP_UPSAMPLE2X,        upsample2x,        FWD, 1, 1, 0, 0, shape_up,         numel_out0,   0,            bwd_resample,  -1, OP_UPSAMPLE2X_APPLY) \
    X(OP_AVGPOOL2X,         avgpool2x,         FWD, 1, 1, 0, 0, shape_pool,       numel_out0,   0,            bwd_resample,  -1, -1) \
    X(OP_ATTENTION,         attention,         FWD, 1, 2, 0, 1, shape_attn,       flops_attn,   ws_attn,      bwd_attn,      -1, OP_ATTENTION_P) \
    X(OP_DROPOUT,           dropout,           FWD, 3, 1, 1, 0, shape_like0,      numel_out0,   0,            bwd_dropout,   -1, -1) \
    X(OP_MSE,               mse,               FWD, 2, 1, 0, 0, shape_mse,        flops_mse,    ws_reduce,    bwd_mse,       -1, -1) \
    /* backward */ \
    X(OP_MSE_BWD,           mse_bwd,           BWD, 2, 1, 0, 0, shape_like0,      numel_out0,   0,            0,             -1, -1) \
    X(OP_LINEAR_BWD_DATA,   linear_bwd_data,   BWD, 2, 1, 0, 1, shape_linear_bd,  flops_linear, ws_linear,    0,             -1, -1) \
    X(OP_LINEAR_BWD_WEIGHT, linear_bwd_weight, BWD, 2, 2, 0, 1, shape_linear_bw,  flops_linear, ws_linear,    0,             -1, -1) \
    X(OP_CONV2D_BWD_DATA,   conv2d_bwd_data,   BWD, 2, 1, 0, 1, shape_conv_bd,    flops_conv,   ws_conv,      0,             -1, -1) \
    X(OP_CONV2D_BWD_WEIGHT, conv2d_bwd_weight, BWD, 2, 2, 0, 1, shape_conv_bw,    flops_conv,   ws_conv,      0,             -1, -1) \
    X(OP_GROUP_NORM_BWD,    group_norm_bwd,    BWD, 5, 3, 0, 0, shape_gn_bwd,     flops_5x,     ws_gn_bwd,    0,             -1, -1) \
    X(OP_SILU_BWD,          silu_bwd,          BWD, 2, 1, 1, 0, shape_grads,      numel_out0,   0,            0,             -1, -1) \
    X(OP_ADD_NC_BWD,        add_nc_bwd,        BWD, 1, 1, 0, 0, shape_add_nc_bwd, flops_in0,    ws_add_nc_bwd, 0,            -1, -1) \
    X(OP_UPSAMPLE2X_BWD,    upsample2x_bwd,    BWD, 1, 1, 0, 0, shape_pool,       flops_in0,    0,            0,             -1, -1) \
    X(OP_AVGPOOL2X_BWD,     avgpool2x_bwd,     BWD, 1, 1, 0, 0, shape_up,         numel_out0,   0,            0,             -1, -1) \
    X(OP_ATTENTION_BWD,     attention_bwd,     BWD, 3, 1, 0, 1, shape_attn_bwd,   flops_attn,   ws_attn,      0,             -1, -1) \
    X(OP_DROPOUT_BWD,       dropout_bwd,       BWD, 3, 1, 1, 0, shape_like0,      numel_out0,   0,            0,             -1, -1) \
    X(OP_ACCUM,             accum,             BWD, 1, 1, 1, 0, shape_like0,      numel_out0,   0,            0,             -1, -1) \
    /* optimizer: in place on the persistent regions */ \
    X(OP_GRAD_SUMSQ,        grad_sumsq,        OPT, 1, 1, 0, 0, shape_scalar,     flops_in0,    ws_reduce,    0,             -1, -1) \
    X(OP_CLIP_SCALE,        clip_scale,        OPT, 1, 1, 0, 0, shape_scalar,     no_flops,     0,            0,             -1, -1) \
    X(OP_ADAMW,             adamw,             OPT, 6, 4, 0, 0, shape_adamw,      flops_adamw,  0,            0,             -1, -1) \
    X(OP_EMA,               ema,               OPT, 3, 1, 0, 0, shape_like0,      flops_in0,    0,            0,             -1, -1) \
    X(OP_STEP_INC,          step_inc,          OPT, 1, 1, 0, 0, shape_step,       no_flops,     0,            0,             -1, -1) \
    /* added later (at the end: see above) */ \
    X(OP_SILU_MUL,          silu_mul,          FWD, 2, 1, 1, 0, shape_add,        numel_out0,   0,            bwd_pointwise, OP_SILU_MUL_BWD, -1) \
    X(OP_SILU_MUL_BWD,      silu_mul_bwd,      BWD, 3, 2, 0, 0, shape_grads,      numel_out0,   0,            0,             -1, -1) \
    X(OP_LOSS_WATCH,        loss_watch,        OPT, 5, 2, 0, 0, shape_watch,      no_flops,     0,            0,             -1, -1) \
    X(OP_ALLREDUCE,         allreduce,         OPT, 2, 2, 0, 0, shape_allreduce,  flops_in0,    0,            0,             -1, -1) \
    X(OP_SAMPLE_STEP,       sample_step,       OPT, 6, 4, 0, 0, shape_sample_step, numel_out0,  0,            0,             -1, -1) \
    X(OP_NORM_ACT,          norm_act,          FWD, 3, 3, 0, 0, shape_norm_act,   flops_norm,   ws_norm,      bwd_norm_act,  -1, OP_NORM_ACT_APPLY) \
    X(OP_NORM_ACT_TEMB,     norm_act_temb,     FWD, 6, 3, 0, 0, shape_norm_act,   flops_norm,   ws_norm,      bwd_norm_act,  -1, OP_NORM_ACT_TEMB_APPLY) \
    X(OP_NORM_ACT_APPLY,    norm_act_apply,    BWD, 5, 1, 0, 0, shape_norm_apply, flops_norm,   0,            0,             -1, -1) \
    X(OP_NORM_ACT_TEMB_APPLY, norm_act_temb_apply, BWD, 8, 1, 0, 0, shape_norm_apply, flops_norm, 0,          0,             -1, -1) \
    /* the decoder's nearest upsample recomputed in the backward pass for the conv after it (the  \
     * same values as upsample2x; not kept from the forward pass: 64 MiB of unet_cifar's peak) */ \
    X(OP_UPSAMPLE2X_APPLY,  upsample2x_apply,  BWD, 1, 1, 0, 0, shape_up,         numel_out0,   0,            0,             -1, -1) \
    X(OP_NORM_ACT_BWD,      norm_act_bwd,      BWD, 6, 3, 0, 0, shape_norm_bwd,   flops_norm,   ws_norm,      0,             -1, -1) \
    X(OP_NORM_ACT_TEMB_BWD, norm_act_temb_bwd, BWD, 9, 4, 0, 0, shape_norm_bwd,   flops_norm,   ws_norm,      0,             -1, -1) \
    X(OP_ADAMW_EMA,         adamw_ema,         OPT, 7, 5, 0, 0, shape_adamw_ema,  flops_adamw_ema, 0,         0,             -1, -1) \
    X(OP_ADAMW_EMA_BF16,    adamw_ema_bf16,    OPT, 7, 6, 0, 0, shape_adamw_ema,  flops_adamw_ema, 0,         0,             -1, -1) \
    X(OP_GELU,              gelu,              FWD, 1, 1, 1, 0, shape_like0,      numel_out0,   0,            bwd_pointwise, OP_GELU_BWD, -1) \
    X(OP_GELU_BWD,          gelu_bwd,          BWD, 2, 1, 1, 0, shape_grads,      numel_out0,   0,            0,             -1, -1) \
    X(OP_CONV2D_ADD,        conv2d_add,        FWD, 4, 1, 0, 1, shape_conv_add,   flops_conv,   ws_conv,      bwd_conv_add,  -1, -1) \
    X(OP_UPCONV2D,          upconv2d,          FWD, 3, 1, 0, 1, shape_upconv,     flops_upconv, ws_upconv,    bwd_upconv,    -1, -1) \
    X(OP_UPCONV2D_BWD_DATA, upconv2d_bwd_data, BWD, 2, 1, 0, 1, shape_upconv_bd,  flops_upconv, ws_upconv,    0,             -1, -1) \
    X(OP_UPCONV2D_BWD_WEIGHT, upconv2d_bwd_weight, BWD, 2, 2, 0, 1, shape_conv_bw, flops_upconv, ws_upconv,  0,             -1, -1) \
    X(OP_CONV2D_SC,         conv2d_sc,         FWD, 6, 1, 0, 1, shape_conv_sc,    flops_conv_sc, 0,           bwd_conv_sc,   -1, -1) \
    /* attention's P recomputed in the backward pass for attention_bwd (the forward's bits: its  \
     * scores and softmax again, without P v; not kept from the forward pass: 160 MiB of         \
     * unet_cifar's peak at batch 128). mm 0: its GEMM is work the step does (FLOPs / step), not \
     * the model's, so MFU (matmul FLOPs over time) does not count it twice */ \
    X(OP_ATTENTION_P,       attention_p,       BWD, 1, 1, 0, 0, shape_attn_p,     flops_attn,   0,            0,             -1, -1) \
    /* the loss weighted per sample (min-SNR: --snr-gamma): mse with each sample's terms times  \
     * its timestep's entry of a weight table; and its backward */ \
    X(OP_MSE_W,             mse_w,             FWD, 4, 1, 0, 0, shape_mse,        flops_mse,    ws_reduce,    bwd_mse,       -1, -1) \
    X(OP_MSE_W_BWD,         mse_w_bwd,         BWD, 4, 1, 0, 0, shape_like0,      numel_out0,   0,            0,             -1, -1) \
    /* class-conditional models (--classes): the batch's labels (with the label dropout of      \
     * classifier-free guidance), the class embedding added to the time embedding, its backward */ \
    X(OP_GATHER_LABELS,     gather_labels,     FWD, 3, 1, 0, 0, shape_labels,     numel_out0,   0,            0,             -1, -1) \
    X(OP_CLASS_EMB,         class_emb,         FWD, 2, 1, 0, 0, shape_class_emb,  numel_out0,   0,            bwd_class_emb, -1, -1) \
    X(OP_CLASS_EMB_BWD,     class_emb_bwd,     BWD, 2, 1, 0, 0, shape_class_emb_bwd, flops_in0, 0,            0,             -1, -1)
/* clang-format on */

#endif
