/* dist.h — the communicator a data-parallel run hands to its backend (docs/data-parallel.md).
 *
 * One process per rank (mpirun / srun start them); each has its own plan, arena and backend.
 * The backend learns who it is and how to reach the others through this small interface, so
 * graph/ does not depend on MPI: graph/dist_mpi.c implements it on MPI when the build has MPI,
 * and without MPI only the one-rank communicator exists.
 *
 * What each backend takes from it:
 *   rank, size         the global index offsets of the step's random draws (rank * per-rank
 *                      elements) and the all-reduce's participants;
 *   allreduce_sum      the CPU backend's OP_ALLREDUCE: a sum in a FIXED order (rank 0 + rank 1
 *                      + ... + rank N-1, left to right), identical bits on every rank;
 *   bcast              the CUDA backend's NCCL bootstrap (rank 0's ncclUniqueId to every rank);
 *   allgather_u64      the parameter checksum check of tools/ (one value per rank).
 * Every function is collective: every rank calls it, in the same order.
 */
#ifndef SG_DIST_H
#define SG_DIST_H

#include <stdint.h>

#include "common/sg_base.h"

typedef struct sg_dist sg_dist;

struct sg_dist {
    int rank, size;
    int local_rank;   /* index among the ranks on this machine: which GPU to use */
    int cpu_sharers;  /* ranks on this machine whose CPUs (affinity masks) overlap this rank's,
                       * itself included: they share those CPUs (the CPU backend's threads) */
    const char *name; /* "mpi" or "single" */
    void *ctx;
    /* buf[0..n) := the sum over ranks of every rank's buf, in rank order, the same bits on
     * every rank. tmp is n floats of scratch (the caller allocates it once, up front). */
    int (*allreduce_sum)(sg_dist *d, float *buf, float *tmp, int64_t n);
    /* rank 0's bytes into buf on every rank */
    int (*bcast)(sg_dist *d, void *buf, int64_t bytes);
    /* all[r] = rank r's v, on every rank (all holds size values) */
    int (*allgather_u64)(sg_dist *d, uint64_t v, uint64_t *all);
    /* stop every rank (a rank that failed alone would leave the others waiting forever) */
    void (*abort)(sg_dist *d, int code);
};

/* The communicator of this process: MPI's world when the build has MPI and the process was
 * started by a launcher (mpirun, srun: their environment says so), else the one-rank
 * communicator. Without MPI in the build but with a launcher's environment of more than one
 * rank, returns NULL with an error saying so (N copies would otherwise train N identical
 * one-rank runs into the same directory). *argc, *argv go to MPI_Init. */
sg_dist *sg_dist_init(int *argc, char ***argv);
/* Ends MPI (when it was started) and frees d; NULL is fine. */
void sg_dist_finalize(sg_dist *d);
/* The ranks the launcher's environment announces (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * SLURM_STEP_NUM_TASKS ...), 0 when none is set: not started by a launcher. */
int sg_dist_launcher_size(void);
/* Does this build have MPI? */
int sg_dist_have_mpi(void);

#endif
