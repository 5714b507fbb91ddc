/* dist.c — the communicators of graph/dist.h: one rank (always), and MPI's world (when the
 * build has MPI, SG_HAVE_MPI).
 *
 * The MPI all-reduce is NOT MPI_Allreduce. The MPI standard lets a reduction use any order the
 * operation's associativity allows ("the order of evaluation can be changed, taking advantage
 * of the associativity of the operation"); its advice to implementors only RECOMMENDS the same
 * result for the same arguments in the same order, and Open MPI's tuned collectives pick the
 * algorithm (and so the summation tree) by message size and communicator size. Floating-point
 * addition is not associative, so neither "the same bits on every run" nor "the same bits as a
 * given order" is promised. stepgraph's promise needs both, so the order is fixed here:
 *
 *   a chain in rank order: rank 0 sends its buffer to rank 1; rank r > 0 receives the partial
 *   sum s_{r-1} and forms s_r = s_{r-1} + x_r element by element (fp32, in that operand order),
 *   then sends s_r to rank r+1; the last rank holds s_{N-1} = ((x_0 + x_1) + x_2) + ... and
 *   broadcasts it (a copy: the same bits everywhere).
 *
 * N-1 sequential hops plus a broadcast: slower than a ring for large N, which does not matter
 * where it runs (the CPU backend, CI's 2 ranks); the CUDA backend uses NCCL instead. Messages
 * go in chunks of at most 2^28 floats (MPI counts are int).
 */
#include "graph/dist.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sg_base.h"

#ifdef SG_HAVE_MPI
#include <mpi.h>
#endif

int sg_dist_have_mpi(void) {
#ifdef SG_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

int sg_dist_launcher_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (int i = 0; i < SG_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

/* ---- one rank: every collective is the identity */

static int single_allreduce(sg_dist *d, float *buf, float *tmp, int64_t n) {
    (void)d, (void)buf, (void)tmp, (void)n;
    return SG_OK;
}
static int single_bcast(sg_dist *d, void *buf, int64_t bytes) {
    (void)d, (void)buf, (void)bytes;
    return SG_OK;
}
static int single_allgather(sg_dist *d, uint64_t v, uint64_t *all) {
    (void)d;
    all[0] = v;
    return SG_OK;
}
static void single_abort(sg_dist *d, int code) {
    (void)d;
    exit(code);
}

/* ---- MPI */
#ifdef SG_HAVE_MPI

#define SG_MPI_CHUNK (1 << 28)

#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        if (e_ != MPI_SUCCESS) {                                                                   \
            char s_[MPI_MAX_ERROR_STRING];                                                         \
            int l_ = 0;                                                                            \
            MPI_Error_string(e_, s_, &l_);                                                         \
            return sg_set_error("%s:%d: %s: %s", __FILE__, __LINE__, #call, s_);                   \
        }                                                                                          \
    } while (0)

static int mpi_allreduce(sg_dist *d, float *buf, float *tmp, int64_t n) {
    const int r = d->rank, last = d->size - 1;
    for (int64_t c0 = 0; c0 < n; c0 += SG_MPI_CHUNK) {
        const int cnt = (int)(n - c0 < SG_MPI_CHUNK ? n - c0 : SG_MPI_CHUNK);
        float *x = buf + c0;
        if (r > 0) {
            MPI_TRY(MPI_Recv(tmp, cnt, MPI_FLOAT, r - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            /* s_r = s_{r-1} + x_r: the partial sum of the lower ranks on the left */
            for (int i = 0; i < cnt; i++) x[i] = tmp[i] + x[i];
        }
        if (r < last) MPI_TRY(MPI_Send(x, cnt, MPI_FLOAT, r + 1, 0, MPI_COMM_WORLD));
        MPI_TRY(MPI_Bcast(x, cnt, MPI_FLOAT, last, MPI_COMM_WORLD));
    }
    return SG_OK;
}

static int mpi_bcast(sg_dist *d, void *buf, int64_t bytes) {
    (void)d;
    for (int64_t c0 = 0; c0 < bytes; c0 += SG_MPI_CHUNK) {
        const int cnt = (int)(bytes - c0 < SG_MPI_CHUNK ? bytes - c0 : SG_MPI_CHUNK);
        MPI_TRY(MPI_Bcast((char *)buf + c0, cnt, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    return SG_OK;
}

static int mpi_allgather(sg_dist *d, uint64_t v, uint64_t *all) {
    (void)d;
    MPI_TRY(MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
    return SG_OK;
}

static void mpi_abort(sg_dist *d, int code) {
    (void)d;
    MPI_Abort(MPI_COMM_WORLD, code);
}

/* The ranks of this machine (MPI-3's shared-memory split) whose affinity masks overlap this
 * rank's, itself included: one where the launcher bound each rank to its own cores, all of
 * them where it bound none (they then share every CPU), the ranks of a socket where it bound
 * ranks to sockets. 1 where it cannot tell. */
static int mpi_cpu_sharers(int rank) {
    int n = 1;
#ifdef CPU_COUNT
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return 1;
    int local = 1;
    MPI_Comm_size(node, &local);
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine)) CPU_ZERO(&mine);
    cpu_set_t *all = malloc(sizeof(cpu_set_t) * (size_t)local);
    /* every rank takes part in the collective, whatever it found */
    if (all && MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                             node) == MPI_SUCCESS) {
        n = 0;
        for (int r = 0; r < local; r++) {
            cpu_set_t both;
            CPU_AND(&both, &mine, &all[r]);
            n += CPU_COUNT(&both) > 0;
        }
        if (n < 1) n = 1;
    }
    free(all);
    MPI_Comm_free(&node);
#else
    (void)rank;
#endif
    return n;
}

static int mpi_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (int i = 0; i < SG_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}
#endif

sg_dist *sg_dist_init(int *argc, char ***argv) {
    sg_dist *d = calloc(1, sizeof *d);
    if (!d) return sg_set_error("out of host memory"), NULL;
    d->size = d->cpu_sharers = 1;
    d->name = "single";
    d->allreduce_sum = single_allreduce;
    d->bcast = single_bcast;
    d->allgather_u64 = single_allgather;
    d->abort = single_abort;
    const int launched = sg_dist_launcher_size();
#ifdef SG_HAVE_MPI
    if (launched > 0) {
        if (MPI_Init(argc, argv) != MPI_SUCCESS) {
            free(d);
            return sg_set_error("MPI_Init failed"), NULL;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &d->size);
        d->local_rank = mpi_local_rank();
        d->cpu_sharers = mpi_cpu_sharers(d->rank);
        d->name = "mpi";
        d->allreduce_sum = mpi_allreduce;
        d->bcast = mpi_bcast;
        d->allgather_u64 = mpi_allgather;
        d->abort = mpi_abort;
    }
#else
    (void)argc, (void)argv;
    if (launched > 1) {
        free(d);
        return sg_set_error("started as one of %d ranks by a launcher (mpirun/srun), but this "
                            "build has no MPI: each copy would train the same one-rank run. "
                            "Install libopenmpi-dev and rebuild (tools/setup.sh), or run one "
                            "process",
                            launched),
               NULL;
    }
#endif
    return d;
}

void sg_dist_finalize(sg_dist *d) {
    if (!d) return;
#ifdef SG_HAVE_MPI
    if (!strcmp(d->name, "mpi")) MPI_Finalize();
#endif
    free(d);
}
