/* sample_graph.c — the sampling plan's denoising step: after the forward pass that
 * sg_build_forward made (x_t, t -> pred), the sampler's update and its step counter, so that
 * one run of the plan (one replay of its CUDA graph) is one denoising step with nothing from
 * the host (graph/sampler.h says how sg_sample_ex drives it).
 *
 * State, all persistent (bottom of the arena):
 *   sample_x      fp32 [N, img, img, in_ch]: the sampler's x, kept in fp32 whatever x_t's dtype
 *   sample_table  u8 [T][SG_SAMPLE_ROW_BYTES]: the step table (common/sg_sample_step.h), one
 *                 row per denoising step, written once per run by the host (T rows: DDPM's
 *                 T steps at most)
 *   sample_step   i64: the step counter k (-1 before the first step: the update then draws x_T)
 *   sample_key    u64[2]: {seed, first}: the run seed and the index of the batch's first value
 *                 in the run (its first image x the values per image)
 *   sample_x0h    fp32 like sample_x: the x0 the previous step predicted, which a multistep
 *                 solver's step reads (DPM-Solver++(2M); zeroed with x_T, untouched by DDPM
 *                 and DDIM rows): one more image batch of fp32, whichever sampler runs, so one
 *                 plan serves them all
 * Nodes: sample_step (x, pred, table, k, key, x0h -> x, x_t, t, x0h) then step_inc (k += 1).
 * Classifier-free guidance (sg_model_guided): the forward pass holds each of the batch's images
 * twice, the conditional copies first and the unconditional ones (the null class) after them
 * (the host writes the labels); x stays one copy, the update mixes the two predictions and
 * writes both copies of x_t and t.
 */
#include "common/sg_sample_step.h"
#include "planner/model.h"

int sg_build_sampler(sg_graph *g, const sg_model_cfg *c, sg_step_io *io) {
    if (io->xt < 0 || io->t < 0 || io->pred < 0)
        return sg_set_error("the sampler's update needs a forward pass (x_t, t, pred)");
    int64_t xs[4] = {c->batch, c->img, c->img, c->in_ch}, tab[2] = {c->T, SG_SAMPLE_ROW_BYTES};
    int64_t one[1] = {1}, two[1] = {2};
    io->sample_x = sg_tensor_new(g, "sample_x", DT_F32, ROLE_INPUT, 4, xs);
    io->sample_table = sg_tensor_new(g, "sample_table", DT_U8, ROLE_INPUT, 2, tab);
    io->sample_k = sg_tensor_new(g, "sample_step", DT_I64, ROLE_STATE, 1, one);
    io->sample_key = sg_tensor_new(g, "sample_key", DT_U64, ROLE_STATE, 1, two);
    io->sample_x0h = sg_tensor_new(g, "sample_x0h", DT_F32, ROLE_INPUT, 4, xs);
    if (io->sample_x < 0 || io->sample_table < 0 || io->sample_k < 0 || io->sample_key < 0 ||
        io->sample_x0h < 0)
        return SG_ERR;
    int in[6] = {io->sample_x, io->pred,       io->sample_table,
                 io->sample_k, io->sample_key, io->sample_x0h};
    int out[SG_MAX_OUT] = {io->sample_x, io->xt, io->t, io->sample_x0h};
    sg_op_args a = {.sampler = {.T = c->T,
                                .xt_dt = g->t[io->xt].dtype,
                                .guided = sg_model_guided(c),
                                .guidance = c->guidance,
                                .rescale = c->guidance_rescale}};
    io->sample_node = sg_node_add(g, OP_SAMPLE_STEP, in, 6, out, &a, "sample_update");
    if (io->sample_node < 0) return SG_ERR;
    int k_in[1] = {io->sample_k}, k_out[SG_MAX_OUT] = {io->sample_k, -1, -1, -1};
    if (sg_node_add(g, OP_STEP_INC, k_in, 1, k_out, NULL, "sample_step_inc") < 0) return SG_ERR;
    return SG_OK;
}
