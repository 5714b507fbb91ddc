/* test_loss_watch.c — the trainer's watch, computed by the step itself (OP_LOSS_WATCH, CPU
 * backend): loss_sum is the exact float sum of the per-step losses (an independent oracle:
 * the losses read back one step at a time), and a gradient poisoned with Inf after step 3 is
 * reported as step 4, the step it happened in, not the step the host looks (step 6).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "tests/sg_test.h"

static int open_exec(sg_exec *e, const sg_model_cfg *c, uint64_t seed) {
    if (sg_exec_init(e, c, 1, sg_backend_cpu_create())) return SG_ERR;
    const sg_tensor *d = &e->plan.g.t[e->plan.io.dataset];
    uint8_t *data = malloc((size_t)d->bytes);
    uint64_t s = seed + 7;
    for (int64_t i = 0; i < d->bytes; i++) data[i] = (uint8_t)(sg_test_next(&s) >> 56);
    int rc = sg_exec_upload_dataset(e, data, d->bytes, NULL) || sg_exec_init_state(e, seed);
    free(data);
    return rc;
}

int main(void) {
    sg_model_cfg c;
    sg_model_preset(&c, "unet_tiny");
    c.data_n = 16;
    uint64_t seed = 1234567;

    /* the sum: the watch's float accumulation against the losses read after every step */
    sg_exec e;
    CHECK(open_exec(&e, &c, seed) == SG_OK, "exec: %s", sg_last_error());
    float poison = 12345.0f, sum = 0, dev = NAN;
    CHECK(sg_exec_write(&e, e.plan.io.loss_sum, &poison) == SG_OK, "write");
    float zero = 0;
    sg_exec_write(&e, e.plan.io.loss_sum, &zero); /* as the trainer does at each log line */
    for (int s = 0; s < 5; s++) {
        CHECK(sg_exec_step(&e) == SG_OK, "step: %s", sg_last_error());
        float l = sg_exec_loss(&e);
        CHECK(isfinite(l) && l > 0, "loss %g", l);
        sum += l;
    }
    sg_exec_read(&e, e.plan.io.loss_sum, &dev);
    CHECK(dev == sum, "loss_sum %.9g, the losses sum to %.9g", dev, sum);
    int64_t watch = -1;
    sg_exec_read(&e, e.plan.io.watch, &watch);
    CHECK(watch == 0, "no bad step yet, watch %lld", (long long)watch);

    /* a poisoned parameter after step 3: step 4's loss or gradient is not finite */
    sg_exec_free(&e);
    CHECK(open_exec(&e, &c, seed) == SG_OK, "exec: %s", sg_last_error());
    for (int s = 0; s < 3; s++) sg_exec_step(&e);
    sg_exec_read(&e, e.plan.io.watch, &watch);
    CHECK(watch == 0, "clean steps 1-3, watch %lld", (long long)watch);
    const sg_tensor *pr = &e.plan.g.t[e.plan.io.params];
    float *params = malloc((size_t)pr->bytes);
    sg_exec_read(&e, e.plan.io.params, params);
    params[sg_numel(pr) / 3] = INFINITY;
    sg_exec_write(&e, e.plan.io.params, params);
    free(params);
    for (int s = 3; s < 6; s++) sg_exec_step(&e);
    sg_exec_read(&e, e.plan.io.watch, &watch);
    CHECK(watch == 4, "the first bad step is 4, the watch says %lld", (long long)watch);
    sg_exec_free(&e);
    return sg_test_end();
}
