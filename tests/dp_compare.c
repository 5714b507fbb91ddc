/* dp_compare.c — the fp32 comparison of tests/test_dp_mpi.sh: two checkpoints of the same
 * configuration, one from N ranks and one from 1, after the same steps.
 *
 *   dp_compare A B TOL
 *
 * For each role (param, adam_m, adam_v, ema) over all of its tensors: the normwise relative
 * difference ||a - b||_2 / ||b||_2 (in double), which must be <= TOL; the step counters must
 * be equal; every value finite. Normwise and not elementwise: the two runs differ only in the
 * order the batch's contributions to each gradient element are summed, and an element whose
 * contributions cancel can have a large relative error while the update as a whole agrees to a
 * few ulp (docs/data-parallel.md argues the bound). Exit 0 within tolerance, 1 outside, 2 on a
 * usage or file error. Prints one line per role.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt.h"
#include "common/sg_base.h"

static const int roles[] = {ROLE_PARAM, ROLE_ADAM_M, ROLE_ADAM_V, ROLE_EMA};

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dp_compare A.sgck B.sgck TOL\n");
        return 2;
    }
    const double tol = atof(argv[3]);
    ckpt_file *a = ckpt_open(argv[1]), *b = ckpt_open(argv[2]);
    if (!a || !b) {
        fprintf(stderr, "dp_compare: %s\n", sg_last_error());
        return 2;
    }
    double num[4] = {0}, den[4] = {0}, maxabs[4] = {0};
    int64_t count[4] = {0};
    int bad = 0;
    for (int i = 0; i < ckpt_count(a); i++) {
        ckpt_entry ea, eb;
        ckpt_tensor_info(a, i, &ea);
        int j = ckpt_find(b, ea.name);
        if (j < 0) {
            fprintf(stderr, "dp_compare: %s has no tensor %s\n", argv[2], ea.name);
            return 2;
        }
        ckpt_tensor_info(b, j, &eb);
        if (ea.raw_bytes != eb.raw_bytes || ea.dtype != eb.dtype) {
            fprintf(stderr, "dp_compare: %s differs in size or dtype\n", ea.name);
            return 2;
        }
        void *va = malloc((size_t)ea.raw_bytes + 8), *vb = malloc((size_t)eb.raw_bytes + 8);
        if (!va || !vb || ckpt_read(a, i, va, ea.raw_bytes) || ckpt_read(b, j, vb, eb.raw_bytes)) {
            fprintf(stderr, "dp_compare: %s: %s\n", ea.name, va && vb ? sg_last_error() : "oom");
            return 2;
        }
        if (!strcmp(ea.name, "step") && memcmp(va, vb, 8)) {
            fprintf(stderr, "dp_compare: step %lld vs %lld\n", (long long)*(int64_t *)va,
                    (long long)*(int64_t *)vb);
            bad = 1;
        }
        int r = -1;
        for (int k = 0; k < 4; k++)
            if (ea.role == roles[k]) r = k;
        if (r >= 0 && ea.dtype == DT_F32) {
            const float *x = va, *y = vb;
            for (int64_t k = 0; k < ea.numel; k++) {
                if (!isfinite(x[k]) || !isfinite(y[k])) {
                    fprintf(stderr, "dp_compare: %s[%lld] is not finite\n", ea.name, (long long)k);
                    bad = 1;
                    break;
                }
                double d = (double)x[k] - (double)y[k];
                num[r] += d * d;
                den[r] += (double)y[k] * y[k];
                if (fabs(d) > maxabs[r]) maxabs[r] = fabs(d);
            }
            count[r] += ea.numel;
        }
        free(va);
        free(vb);
    }
    for (int r = 0; r < 4; r++) {
        double rel = den[r] > 0 ? sqrt(num[r] / den[r]) : sqrt(num[r]);
        int ok = count[r] > 0 && rel <= tol;
        printf("%-7s %9lld values  normwise rel diff %.3e  max |diff| %.3e  %s\n",
               sg_role_names[roles[r]], (long long)count[r], rel, maxabs[r],
               ok ? "ok" : "OUTSIDE TOLERANCE");
        bad |= !ok;
    }
    ckpt_close(a);
    ckpt_close(b);
    return bad;
}
