/* npz.h — a numpy .npz archive of one uint8 array: what `sample --npz` writes, the form FID
 * tools read (the ADM / guided-diffusion evaluator takes arr_0 as [N, H, W, 3] uint8).
 *
 * The archive is a zip of one stored (uncompressed) member, NAME.npy (format 1.0, header padded
 * to 64 bytes, C order), with a fixed timestamp, so the same array gives the same bytes. Zip64
 * records are used where the member or its offsets pass 4 GiB (or always, when asked: tests).
 * This module only frames the array: npz_u8_frame gives the bytes that go before and after it,
 * and the caller writes head, the array, tail (durably: checkpoints/ckpt.h's atomic writer).
 */
#ifndef SG_NPZ_H
#define SG_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "common/sg_base.h"

enum { NPZ_MAX_DIMS = 8, NPZ_NAME_MAX = 64, NPZ_HEAD_MAX = 512, NPZ_TAIL_MAX = 512 };

typedef struct {
    uint8_t head[NPZ_HEAD_MAX]; /* zip local header, then the .npy header */
    size_t head_n;
    uint8_t tail[NPZ_TAIL_MAX]; /* central directory, zip64 records where used, end record */
    size_t tail_n;
} npz_frame;

/* Frame x (prod(shape) bytes, 1 <= ndim <= NPZ_MAX_DIMS, every dimension >= 0) as the member
 * `name` (letters, digits and '_', at most NPZ_NAME_MAX - 5 characters; ".npy" is appended).
 * zip64: 0 where needed, 1 always. SG_ERR with a message on bad arguments. */
int npz_u8_frame(const char *name, const uint8_t *x, const int64_t *shape, int ndim, int zip64,
                 npz_frame *f);

#endif
