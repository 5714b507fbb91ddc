/* ckpt.h — stepgraph checkpoints: write, open, read, rotate, export.
 *
 * A checkpoint (.sgck) is one file: a fixed header, JSON metadata, zstd-compressed tensor
 * payloads, a tensor index and a trailer holding a checksum of everything before it. The
 * byte layout is specified in docs/checkpoint-format.md; this header is the only way the rest
 * of stepgraph touches it.
 *
 * Guarantees:
 * - Writes are crash-safe: the file is written under a temporary name in the destination
 *   directory, fsync'd, renamed over the destination and the directory fsync'd. An error or
 *   a crash at any point leaves the previous file at that path intact.
 * - The same tensors, metadata and options give the same file bytes, whatever the number of
 *   threads (tensors are cut into fixed-size blocks, each an independent zstd frame).
 * - Reading validates everything: the header, the metadata, the index, the whole-file checksum
 *   at open, then every tensor's checksum again after decompression. Errors never crash and
 *   name the file and, when a payload is damaged, the tensor.
 *
 * Errors: functions returning int return SG_OK (0) or SG_ERR; functions returning pointers
 * return NULL. Either way sg_last_error() says what happened. Nothing here prints or exits.
 * An opened ckpt_file is immutable: reads from several threads at once are safe.
 */
#ifndef CKPT_H
#define CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/sg_base.h"

#define CKPT_MAX_DIMS 4
#define CKPT_MAX_NAME 1024 /* bytes in a tensor name, excluding the NUL */
#define CKPT_MAX_TENSORS (1 << 20)
#define CKPT_FORMAT_VERSION 1
#define CKPT_DEFAULT_LEVEL 3
#define CKPT_DEFAULT_BLOCK (4 << 20) /* raw bytes per zstd frame */

/* ---------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------- */

/* One tensor to save. Names must be unique and non-empty, printable ASCII (0x20..0x7e).
 * Conventions (docs/model.md): parameters under their plain names, EMA copies "ema:" + name,
 * AdamW moments "adam_m:" + name and "adam_v:" + name. */
typedef struct {
    const char *name;
    int role;                     /* sg_role */
    int dtype;                    /* sg_dtype */
    int ndim;                     /* 0..CKPT_MAX_DIMS; ndim 0 is a scalar */
    int64_t shape[CKPT_MAX_DIMS]; /* dims >= 0; bytes == prod(shape) * dtype size */
    const void *data;             /* host memory, little-endian values */
    int64_t bytes;
    int64_t offset; /* arena offset, recorded for information only */
} ckpt_tensor_desc;

typedef enum {
    CKPT_SHUFFLE_AUTO = 0, /* per tensor: try both on a sample, keep the smaller */
    CKPT_SHUFFLE_ON,       /* always shuffle multi-byte dtypes */
    CKPT_SHUFFLE_OFF,
} ckpt_shuffle_mode;

/* Where a write can fail; passed to the fault hook. */
typedef enum {
    CKPT_IO_CREATE = 0, /* creating the temporary file */
    CKPT_IO_WRITE,      /* each write(2) of the temporary file */
    CKPT_IO_FSYNC,      /* fsync of the temporary file */
    CKPT_IO_RENAME,     /* rename over the destination */
    CKPT_IO_DIRSYNC,    /* fsync of the directory */
} ckpt_io_stage;

/* Fault injection for tests: called before each I/O step with the bytes written so far.
 * Return 0 to go on, or an errno value (e.g. ENOSPC) to make that step fail with it. */
typedef int (*ckpt_fault_fn)(ckpt_io_stage stage, int64_t bytes_written, void *ctx);

typedef struct {
    int level;           /* zstd level; 0 means CKPT_DEFAULT_LEVEL; negative = zstd's fast modes */
    int threads;         /* compression threads; 0 means the online CPUs (at most 32) */
    int shuffle;         /* ckpt_shuffle_mode */
    int64_t block_bytes; /* raw bytes per zstd frame, multiple of 64; 0 means CKPT_DEFAULT_BLOCK */
    ckpt_fault_fn fault; /* tests only; NULL in normal use */
    void *fault_ctx;
} ckpt_write_opts;

/* Write n tensors and the metadata (a JSON object; NULL means "{}") to path, crash-safely.
 * opts may be NULL (defaults). On error the temporary file is removed and a file already at
 * path is untouched. If only the final directory fsync fails, the new file is in place and
 * SG_ERR is still returned (its durability is unknown). */
int ckpt_write(const char *path, const char *meta_json, const ckpt_tensor_desc *t, int n,
               const ckpt_write_opts *opts);

/* Write n bytes to path with the same temp + fsync + rename + fsync-dir protocol. */
int ckpt_write_file_atomic(const char *path, const void *data, int64_t n,
                           const ckpt_write_opts *opts);
/* The same for the concatenation of n_parts buffers (e.g. a header, an array, a trailer). */
int ckpt_write_parts_atomic(const char *path, const void *const *parts, const int64_t *sizes,
                            int n_parts, const ckpt_write_opts *opts);

/* ---------------------------------------------------------------------------------------
 * Rotation: dir/ckpt_<step, at least 8 digits>.sgck plus dir/latest, a one-line text file
 * naming the newest checkpoint ("ckpt_00001000.sgck\n").
 * ------------------------------------------------------------------------------------- */

/* Save a checkpoint for `step` into dir (created if missing), then point dir/latest at it
 * (crash-safely), then delete the oldest ckpt_*.sgck beyond keep_last (keep_last <= 0 keeps
 * all) and temporary files left by crashed writers. One writer per directory. A crash at any
 * point leaves `latest` naming a complete checkpoint. path_out (may be NULL) receives the
 * path written. */
int ckpt_save_rotating(const char *dir, int64_t step, const char *meta_json,
                       const ckpt_tensor_desc *t, int n, const ckpt_write_opts *opts, int keep_last,
                       char *path_out, size_t path_cap);

/* The newest checkpoint in dir: the one dir/latest names when that file exists, else the
 * ckpt_*.sgck with the highest step. Writes its path to buf. SG_ERR when there is none. */
int ckpt_latest(const char *dir, char *buf, size_t cap);

/* The checkpoint dir/latest names (its path in buf) when that is a checkpoint file that exists;
 * else SG_ERR, the error naming what is wrong with latest (absent, not a checkpoint's name,
 * naming a missing file). */
int ckpt_latest_named(const char *dir, char *buf, size_t cap);

/* The path of step's checkpoint in dir. */
int ckpt_rotating_path(const char *dir, int64_t step, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------- */

typedef struct ckpt_file ckpt_file;

enum {
    /* Do not check payload checksums at open (header, metadata and index are still checked;
     * every payload is still checked when read). `ckpt verify` uses it to list every damaged
     * tensor instead of stopping at the first. */
    CKPT_OPEN_LAZY = 1u << 0,
    /* Skip every checksum, at open and on read. Only for fuzzing the parsers: a damaged file
     * opened this way may give wrong values (never a crash). */
    CKPT_OPEN_NO_CHECKSUMS = 1u << 1,
};

typedef enum { CKPT_CODEC_RAW = 0, CKPT_CODEC_ZSTD = 1 } ckpt_codec;

/* What the index says about one tensor. name points into the ckpt_file. */
typedef struct {
    const char *name;
    int role;  /* sg_role */
    int dtype; /* sg_dtype */
    int ndim;
    int64_t shape[CKPT_MAX_DIMS]; /* unused dims are 1 */
    int64_t numel;
    int64_t offset;           /* arena offset given at write time */
    int64_t raw_bytes;        /* after decompression */
    int64_t stored_bytes;     /* in the file */
    int64_t file_offset;      /* where the payload starts */
    int codec;                /* ckpt_codec */
    int shuffled;             /* byte planes were shuffled before zstd */
    uint64_t raw_checksum;    /* XXH64 of the raw bytes */
    uint64_t stored_checksum; /* XXH64 of the stored bytes */
} ckpt_entry;

/* Open and validate a checkpoint (header, metadata, index, whole-file checksum; when that
 * fails, the error names the damaged tensor). The file is memory-mapped. */
ckpt_file *ckpt_open(const char *path);
ckpt_file *ckpt_open_ex(const char *path, unsigned flags);
/* The same over bytes in memory. The buffer is borrowed: keep it alive until ckpt_close. */
ckpt_file *ckpt_open_mem(const void *data, size_t size, unsigned flags);
void ckpt_close(ckpt_file *f);

int ckpt_count(const ckpt_file *f);
int ckpt_tensor_info(const ckpt_file *f, int i, ckpt_entry *out);
/* Index of the tensor called name, or -1. */
int ckpt_find(const ckpt_file *f, const char *name);
/* The metadata JSON text (NUL-terminated, valid JSON object). */
const char *ckpt_meta(const ckpt_file *f);
const char *ckpt_path(const ckpt_file *f);
int64_t ckpt_file_size(const ckpt_file *f);
int ckpt_version(const ckpt_file *f);
int64_t ckpt_block_bytes(const ckpt_file *f);

/* Decompress tensor i into dst (cap >= raw_bytes), undo the shuffle, check its checksum.
 * The error names the tensor. */
int ckpt_read(const ckpt_file *f, int i, void *dst, int64_t cap);
/* Read n tensors on up to `threads` threads (0: the online CPUs). Stops at the first error. */
int ckpt_read_many(const ckpt_file *f, const int *idx, void *const *dst, const int64_t *cap, int n,
                   int threads);
/* Check tensor i's stored and raw checksums without keeping the data. */
int ckpt_check_tensor(const ckpt_file *f, int i);

/* ---------------------------------------------------------------------------------------
 * Values: statistics and comparison (used by `ckpt stats` / `ckpt diff` and tools/verify)
 * ------------------------------------------------------------------------------------- */

typedef struct {
    int64_t count;    /* elements */
    int64_t nan, inf; /* non-finite elements (floating dtypes only) */
    double min, max;  /* over finite elements; 0 when there are none */
    double mean, std; /* over finite elements (population std) */
} ckpt_value_stats;

/* Statistics of n elements of dtype at data. */
int ckpt_stats(const void *data, int dtype, int64_t n, ckpt_value_stats *out);

typedef struct {
    int64_t ndiff;          /* elements whose bits differ */
    int64_t first;          /* flat index of the first differing element, -1 if none */
    double max_abs;         /* max |a - b| over elements where both are finite; */
    int64_t max_abs_index;  /* its flat index, -1 if none */
    int64_t nonfinite_diff; /* differing elements where a or b is NaN or Inf */
} ckpt_value_diff;

/* Bitwise comparison of two arrays of n elements of dtype. */
int ckpt_compare(const void *a, const void *b, int dtype, int64_t n, ckpt_value_diff *out);

/* ---------------------------------------------------------------------------------------
 * Export
 * ------------------------------------------------------------------------------------- */

/* Write the model weights of f as a safetensors file with the diffusers UNet2DModel
 * parameter names and PyTorch layouts: role param (or role ema with ema != 0, "ema:" prefix
 * removed); conv weights [Co][K][K][Ci] -> [Co][Ci][K][K]; "*.to_qkv.{weight,bias}" split
 * into to_q / to_k / to_v Linear tensors; "*.to_out.0.weight" [C][1][1][C] -> [C][C].
 * Written crash-safely. */
int ckpt_export_safetensors(const ckpt_file *f, const char *out_path, int ema);

/* ---------------------------------------------------------------------------------------
 * diffusers interop (ckpt_diffusers.c, ckpt_safetensors.c)
 * ------------------------------------------------------------------------------------- */

/* A folder that diffusers loads as it is: UNet2DModel.from_pretrained(dir) (config.json and
 * diffusion_pytorch_model.safetensors), DDPMScheduler (scheduler_config.json: the linear betas
 * and T trained with) and DDPMPipeline.from_pretrained(dir) (model_index.json, unet/,
 * scheduler/). Weights: the EMA copies (ema != 0) or the raw parameters. A model diffusers
 * cannot express (pooling without resample convs, a head count whose channels per head
 * differ between blocks) is refused, naming why, before anything is written. */
int ckpt_export_diffusers(const ckpt_file *f, const char *dir, int ema);
/* diffusers' UNet2DModel config.json text for a stepgraph model config object (the
 * checkpoint metadata's "config", sg_model_json's); SG_ERR naming what diffusers lacks. */
int ckpt_diffusers_unet_config(const char *config_json, char *buf, size_t cap);
/* The other way: a diffusers folder (config.json or unet/config.json; scheduler_config.json
 * or scheduler/scheduler_config.json when present) as a stepgraph config object
 * {"model":"diffusers","img":..,"ch":..,...,"down_pad":..,"T":..,"beta1":..,"betaT":..}.
 * SG_ERR naming the first field stepgraph's UNet does not compute (e.g. flip_sin_to_cos). */
int ckpt_diffusers_to_config(const char *dir, char *buf, size_t cap);
/* What a diffusers folder's scheduler_config.json says about sampling (not the model's, so
 * ckpt_diffusers_to_config does not read it): its _class_name into scheduler (absent: ""),
 * timestep_spacing into spacing (absent: that scheduler's default, "linspace" for
 * DPMSolverMultistepScheduler and "leading" for the others; "" when the folder has no scheduler
 * config), steps_offset (absent: 0), variance_type "fixed_large" (*var_large 1; else 0),
 * use_karras_sigmas true (*karras 1; else 0). Each string is cut to its buffer's cap. SG_ERR
 * where a field has the wrong type. */
int ckpt_diffusers_sampling(const char *dir, char *scheduler, char *spacing, size_t cap,
                            int *steps_offset, int *var_large, int *karras);
/* Do two stepgraph config objects describe the same network (img, channels, levels, res
 * blocks, groups, resampling, down_pad, attention placement and heads; training fields are
 * ignored)? SG_ERR naming the first difference, "<source> is another architecture: ...". */
int ckpt_config_check_arch(const char *expected_json, const char *got_json, const char *source);

/* A safetensors file, opened and validated (header bounds, dtypes, shapes, offsets): NULL
 * with a clear error for anything malformed. Data is read on demand. */
typedef struct ckpt_st ckpt_st;
ckpt_st *ckpt_st_open(const char *path);
void ckpt_st_close(ckpt_st *s);
int ckpt_st_count(const ckpt_st *s);
const char *ckpt_st_name(const ckpt_st *s, int i);
int ckpt_st_find(const ckpt_st *s, const char *name);
const char *ckpt_st_model(const ckpt_st *s); /* __metadata__.model, "" if none */
/* Fill the stepgraph parameter `name` (stepgraph layout, `shape`, fp32) from the diffusers
 * tensors that hold it (see ckpt_safetensors.c: OIHW convs, to_q/to_k/to_v, Linear to_out.0;
 * F32, F16 or BF16). SG_ERR naming the missing or misshapen tensor. */
int ckpt_st_read_param(ckpt_st *s, const char *name, int ndim, const int64_t *shape, float *dst);
/* The first tensor no ckpt_st_read_param call used, or -1: weights this model has no place
 * for. */
int ckpt_st_first_unused(const ckpt_st *s);

/* ---------------------------------------------------------------------------------------
 * Names of the format's enumerations (stable across builds; the file stores these codes)
 * ------------------------------------------------------------------------------------- */

const char *ckpt_role_name(int role);       /* "param", ...; "?" if out of range */
const char *ckpt_dtype_name(int dtype);     /* "f32", ... */
int ckpt_role_from_name(const char *name);  /* -1 if unknown */
int ckpt_dtype_from_name(const char *name); /* -1 if unknown */

#endif
