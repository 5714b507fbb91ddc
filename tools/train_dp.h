/* train_dp.h — the data-parallel hooks of tools/train.c (docs/data-parallel.md), kept apart so
 * that train.c only calls them: start the communicator and set the plan's rank count, say who
 * writes, keep a stop request collective, and compare a checksum of the training state across
 * the ranks every K steps (off the hot path: between steps, after the step's sync).
 */
#ifndef SG_TRAIN_DP_H
#define SG_TRAIN_DP_H

#include "graph/dist.h"
#include "graph/exec.h"

typedef struct {
    sg_dist *dist;   /* never NULL after train_dp_init succeeded */
    int check_every; /* the state checksum comparison, every K steps (0: only at the end) */
    /* test hook (env SG_DP_INJECT_DIVERGENCE=R, R a rank of the run: anything else is an error
     * of train_dp_init): rank R adds one ulp to its first parameter before its first check, so
     * the check must fire; -1 otherwise */
    int inject_rank;
    void *buf;     /* host copy of one state region, allocated once */
    uint64_t *all; /* one word per rank: the gathered flags and checksums */
    int64_t buf_bytes;
} train_dp;

/* Start the communicator (MPI_Init under a launcher) and set cfg->ranks: the launcher's world
 * size when started by one (even 1: `mpirun -np 1` runs the data-parallel step), 0 otherwise.
 * want_ranks > 0 (train --ranks N) must equal that count, except that --ranks 1 in a plain
 * process runs the data-parallel step on one rank (its all-reduce included: how the NCCL path
 * is exercised on one GPU without MPI). A global batch that does not divide over the ranks is
 * an error here, before any work. */
int train_dp_init(train_dp *dp, int *argc, char ***argv, sg_model_cfg *cfg, int want_ranks);
/* The rank that prints, writes metrics, checkpoints and samples. */
int train_dp_is_root(const train_dp *dp);
/* A stop request (signal) seen by ANY rank stops every rank after the same step: returns the
 * OR over the ranks of `mine`. One tiny collective per call; 0 ranks: `mine`. */
int train_dp_any(train_dp *dp, int mine);
/* Every rank hashes its parameters, AdamW moments and EMA (XXH64) and compares with rank 0's;
 * SG_ERR naming the first rank that differs. Collective. */
int train_dp_check_state(train_dp *dp, sg_exec *e, int64_t step);
/* After a resume: a note when the checkpoint was written on another rank count (the bits of
 * the continued run differ from an uninterrupted one); prints on the root only. */
void train_dp_note_resume(const train_dp *dp, const sg_exec *e);
/* A failure on one rank would leave the others waiting in the next collective: with more than
 * one rank this aborts them all (MPI_Abort); otherwise it returns code. */
int train_dp_fail(train_dp *dp, int code);
void train_dp_finalize(train_dp *dp);

#endif
