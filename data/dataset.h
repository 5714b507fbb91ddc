/* dataset.h — loading training images into host memory, ready to be uploaded into the arena.
 *
 * Every loader produces the same thing: n images of h x w x c uint8 pixels, NHWC, contiguous
 * (pixels[((i*h + y)*w + x)*c + ch]), and, where the source names them, each image's class label
 * (a class-conditional model trains on them: --classes). Normalisation to [-1, 1], padding and
 * flips happen later, inside the step (cpu_gather_batch and its CUDA twin), so the uploaded dataset
 * stays 1 byte per value.
 *
 * Errors: SG_ERR with a one-line sg_last_error() naming the file, what was expected and what
 * was found, and how to get the data. Nothing here exits or prints.
 */
#ifndef SG_DATASET_H
#define SG_DATASET_H

#include <stdint.h>

#include "common/sg_base.h"

/* Where Debian's dataset-fashion-mnist package installs Fashion-MNIST (gzipped IDX). */
#define DATA_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    uint8_t *pixels; /* [n][h][w][c], owned; NULL when empty */
    int64_t n;
    int h, w, c;
    /* the class of each image, 0 <= labels[i] < nclasses, or NULL (and nclasses 0) where the
     * source has none: CIFAR-10's label byte; Fashion-MNIST's label file (where it lies beside
     * the images); the synthetic set's shape (6 classes); a folder's top-level subfolder, in
     * byte order of their names (when every image lies in one); an idx:FILE has none */
    int32_t *labels;
    int nclasses;
    char source[512]; /* where the images came from: a path, or the synthetic spec */
} sg_dataset;
/* the most classes a dataset (and a class-conditional model) may have */
#define DATA_MAX_CLASSES 4096

/* Loads the dataset named by spec into *ds (overwritten; zeroed on failure):
 *   "fmnist"             Fashion-MNIST training images, 60000 x 28x28x1 (DATA_FMNIST_DIR)
 *   "fmnist:test"        its 10000 test images
 *   "cifar10:DIR"        CIFAR-10 binary, DIR/data_batch_1..5.bin: 50000 x 32x32x3
 *                        (DIR may also be the folder holding cifar-10-batches-bin/)
 *   "cifar10:DIR:test"   DIR/test_batch.bin: 10000 x 32x32x3
 *   "idx:FILE"           one IDX file of unsigned bytes, gzipped or raw: magic 0x00000803
 *                        (n, h, w; c = 1) or 0x00000804 (n, h, w, c)
 *   "synthetic[:N[:HxWxC]]"  N procedural images (default 1024, 32x32x1), see data_synthetic
 * Returns SG_OK or SG_ERR. */
int data_load(sg_dataset *ds, const char *spec);
/* data_load's specs and, for a tool that knows its model, "folder:DIR" (data_load_folder:
 * your PNG/JPEG images decoded to size x size x c, the model's image size and channels). */
int data_load_for_model(sg_dataset *ds, const char *spec, int size, int c);

/* Frees the pixels and labels and zeroes *ds; safe on a zeroed or already freed dataset. */
void data_free(sg_dataset *ds);

/* The individual loaders behind data_load, same contract. */
int data_load_idx(sg_dataset *ds, const char *path);
int data_load_cifar10(sg_dataset *ds, const char *dir, int test_split);
/* Your own images: every .png, .jpg and .jpeg in dir and its subfolders, at most
 * DATA_MAX_FOLDER_DEPTH deep (sorted by their paths relative to dir; names starting with '.'
 * skipped; symbolic links followed), converted to c = 1
 * (grey) or 3 (RGB) channels, centre-cropped to a square and box-resized to size x size.
 * An unreadable image is an error naming the file (data/image_folder.c), and so are a
 * truncated one and one of more than DATA_MAX_IMAGE_PIXELS pixels. */
#define DATA_MAX_IMAGE_PIXELS ((int64_t)1 << 28) /* 16384 x 16384 */
#define DATA_MAX_FOLDER_DEPTH 16
/* The images are decoded on threads: as many as the CPUs this process may run on, at most
 * DATA_MAX_THREADS (each holds one decoded image), or n (> 0) set here; 0 restores the
 * default. The pixels do not depend on it. */
#define DATA_MAX_THREADS 16
void data_set_threads(int n);
/* A long load's progress (data_load_folder): fn(ctx, done, total, 0) with done of total images
 * decoded, called by the loading thread once the load has run after_s seconds, then at most
 * every every_s seconds; and when it was called, once more at the end, final = 1 (done ==
 * total, or fewer where a failure stopped the load); fn NULL: none (the default). For a
 * progress line; nothing here prints. */
typedef void (*data_progress_fn)(void *ctx, int64_t done, int64_t total, int final);
void data_set_progress(data_progress_fn fn, void *ctx, double after_s, double every_s);
int data_load_folder(sg_dataset *ds, const char *dir, int size, int c);

/* n procedural images of h x w x c: one shape per image (disc, ring, square, diamond, or a
 * box of horizontal or vertical stripes) at a random position and size, light on a dark
 * background with anti-aliased edges, random colours when c > 1. Deterministic: a function
 * of (index, h, w, c) only, computed in integer arithmetic so every machine makes the same
 * bytes. Easy to learn, so tests can watch the loss fall. 1 <= c <= 4, 4 <= h, w <= 4096. */
int data_synthetic(sg_dataset *ds, int64_t n, int h, int w, int c);

#endif
