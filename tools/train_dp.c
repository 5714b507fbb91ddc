/* train_dp.c — the data-parallel hooks of tools/train.c (see train_dp.h). */
#include "tools/train_dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt_hash.h"
#include "tools/cli.h"

int train_dp_init(train_dp *dp, int *argc, char ***argv, sg_model_cfg *cfg, int want_ranks) {
    memset(dp, 0, sizeof *dp);
    dp->check_every = 100;
    dp->inject_rank = -1;
    dp->dist = sg_dist_init(argc, argv);
    if (!dp->dist) return SG_ERR;
    /* the test hook names a rank of this run, strictly (atoi read a typo as rank 0) */
    const char *inj = getenv("SG_DP_INJECT_DIVERGENCE");
    if (inj && *inj &&
        cli_parse_int("SG_DP_INJECT_DIVERGENCE", inj, 0, dp->dist->size - 1, &dp->inject_rank))
        return SG_ERR;
    dp->all = calloc((size_t)dp->dist->size, sizeof(uint64_t));
    if (!dp->all) return sg_set_error("out of host memory");
    cfg->ranks = strcmp(dp->dist->name, "mpi") ? 0 : dp->dist->size;
    if (want_ranks > 0 && want_ranks != (cfg->ranks ? cfg->ranks : 1))
        return sg_set_error("--ranks %d, but this run has %d process(es): start it with mpirun "
                            "-np %d (or srun)",
                            want_ranks, cfg->ranks ? cfg->ranks : 1, want_ranks);
    if (want_ranks == 1) cfg->ranks = 1; /* one process, the data-parallel step all the same */
    if (cfg->ranks > 0 && cfg->batch % cfg->ranks)
        return sg_set_error("--batch %d is the global batch and must divide evenly over the %d "
                            "ranks (try --batch %d)",
                            cfg->batch, cfg->ranks, (cfg->batch / cfg->ranks + 1) * cfg->ranks);
    return sg_model_check_batch(cfg); /* and into --grad-accum micro-batches per rank */
}

int train_dp_is_root(const train_dp *dp) {
    return !dp->dist || dp->dist->rank == 0;
}

int train_dp_any(train_dp *dp, int mine) {
    if (!dp->dist || dp->dist->size == 1) return mine;
    if (dp->dist->allgather_u64(dp->dist, (uint64_t)mine, dp->all)) return 1;
    int any = 0;
    for (int r = 0; r < dp->dist->size; r++) any |= dp->all[r] != 0;
    return any;
}

int train_dp_check_state(train_dp *dp, sg_exec *e, int64_t step) {
    if (!dp->dist || dp->dist->size == 1) return SG_OK;
    const sg_step_io *io = &e->plan.io;
    const int regions[4] = {io->params, io->adam_m, io->adam_v, io->ema};
    const int64_t bytes = e->plan.g.t[io->params].bytes;
    if (!dp->buf) {
        dp->buf = malloc((size_t)bytes);
        if (!dp->buf) return sg_set_error("out of host memory for the state checksum");
        dp->buf_bytes = bytes;
    }
    if (dp->inject_rank == dp->dist->rank) {
        float p0;
        if (sg_exec_read(e, io->params, dp->buf)) return SG_ERR;
        memcpy(&p0, dp->buf, 4);
        p0 = nextafterf(p0, INFINITY);
        memcpy(dp->buf, &p0, 4);
        if (sg_exec_write(e, io->params, dp->buf)) return SG_ERR;
        dp->inject_rank = -1;
    }
    uint64_t h = 0;
    for (int k = 0; k < 4; k++) {
        if (sg_exec_read(e, regions[k], dp->buf)) return SG_ERR;
        h = ckpt_xxh64(dp->buf, (size_t)bytes, h);
    }
    const int n = dp->dist->size;
    uint64_t *all = dp->all;
    int rc = dp->dist->allgather_u64(dp->dist, h, all);
    for (int r = 1; r < n && !rc; r++)
        if (all[r] != all[0])
            rc = sg_set_error("after step %lld the training state of rank %d (xxh64 %016llx) "
                              "differs from rank 0's (%016llx): the ranks diverged",
                              (long long)step, r, (unsigned long long)all[r],
                              (unsigned long long)all[0]);
    return rc;
}

void train_dp_note_resume(const train_dp *dp, const sg_exec *e) {
    if (!train_dp_is_root(dp) || e->ckpt_ranks == e->plan.cfg.ranks) return;
    int was = e->ckpt_ranks ? e->ckpt_ranks : 1, now = e->plan.cfg.ranks ? e->plan.cfg.ranks : 1;
    fprintf(stderr,
            "train: warning: the checkpoint was written by a run on %d rank(s); continuing on "
            "%d. The run goes on from the same state and global batch, but its bits will "
            "differ from a run that stayed on %d (another gradient summation order)\n",
            was, now, was);
}

int train_dp_fail(train_dp *dp, int code) {
    if (dp->dist && dp->dist->size > 1) {
        fflush(NULL);
        dp->dist->abort(dp->dist, code);
    }
    return code;
}

void train_dp_finalize(train_dp *dp) {
    free(dp->buf);
    free(dp->all);
    sg_dist_finalize(dp->dist);
    memset(dp, 0, sizeof *dp);
}
