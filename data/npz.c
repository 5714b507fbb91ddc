/* npz.c — one uint8 array framed as a numpy .npz (see npz.h).
 *
 * The zip records follow PKWARE's APPNOTE (4.3.7 local file header, 4.3.12 central directory
 * header, 4.3.14 / 4.3.15 zip64 end of central directory record and locator, 4.3.16 end of
 * central directory record, 4.5.3 the zip64 extended information extra field); the .npy header
 * numpy's format 1.0 (magic, version, a little-endian uint16 length, a Python dict literal
 * padded with spaces and ended by '\n' so that the data starts 64-byte aligned).
 */
#include "data/npz.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* little-endian stores into a record being built */
typedef struct {
    uint8_t *p;
    size_t n;
} rec;
static void put(rec *r, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) r->p[r->n++] = (uint8_t)(v >> (8 * i));
}
static void put_bytes(rec *r, const void *s, size_t n) {
    memcpy(r->p + r->n, s, n);
    r->n += n;
}

enum {
    ZIP_DATE = (0 << 9) | (1 << 5) | 1, /* 1980-01-01, MS-DOS date: the same bytes every time */
    ZIP_V20 = 20,                       /* version needed: stored member */
    ZIP_V45 = 45,                       /* version needed: zip64 */
};
static const uint32_t U32_MAX = 0xFFFFFFFFu;

/* the zip64 extended information extra field: both sizes (the offset 0 fits its field) */
static void put_zip64_sizes(rec *r, uint64_t size) {
    put(r, 0x0001, 2), put(r, 16, 2), put(r, size, 8), put(r, size, 8);
}

int npz_u8_frame(const char *name, const uint8_t *x, const int64_t *shape, int ndim, int zip64,
                 npz_frame *f) {
    size_t name_len = name ? strlen(name) : 0;
    if (name_len < 1 || name_len > NPZ_NAME_MAX - 5 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz"
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_") != name_len)
        return sg_set_error("npz: bad member name");
    if (ndim < 1 || ndim > NPZ_MAX_DIMS) return sg_set_error("npz: %d dimensions", ndim);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > UINT64_MAX / 2 / (uint64_t)shape[i]))
            return sg_set_error("npz: bad shape");
        n *= (uint64_t)shape[i];
    }
    if (n > 0 && !x) return sg_set_error("npz: no data");

    /* the .npy header */
    char dict[NPZ_HEAD_MAX];
    int k = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)shape[i],
                      i + 1 < ndim ? " " : "");
    if (ndim > 1) k--; /* "(5,)" keeps its comma, "(2, 3)" does not */
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    const size_t pre = 10; /* magic 6, version 2, length 2 */
    size_t hlen = (size_t)k + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    char npy[NPZ_HEAD_MAX];
    memcpy(npy, "\x93NUMPY\x01\x00", 8);
    npy[8] = (char)(hlen & 0xff), npy[9] = (char)(hlen >> 8);
    memcpy(npy + pre, dict, (size_t)k);
    memset(npy + pre + k, ' ', hlen - (size_t)k - 1);
    npy[pre + hlen - 1] = '\n';
    const size_t npy_n = pre + hlen;

    /* the member: the .npy header and the array, stored */
    const uint64_t size = npy_n + n;
    uLong crc = crc32(0L, (const Bytef *)npy, (uInt)npy_n);
    for (uint64_t off = 0; off < n;) {
        const uint64_t chunk = n - off < (1u << 30) ? n - off : (1u << 30);
        crc = crc32(crc, x + off, (uInt)chunk);
        off += chunk;
    }
    char member[NPZ_NAME_MAX];
    snprintf(member, sizeof member, "%s.npy", name);
    const size_t mlen = strlen(member);
    const size_t local_n = 30 + mlen + 20; /* the zip64 extra field's 20 at most */
    if (!zip64) zip64 = size + local_n + 46 + mlen + 20 >= U32_MAX;
    const int ver = zip64 ? ZIP_V45 : ZIP_V20;
    const uint32_t size32 = zip64 ? U32_MAX : (uint32_t)size;

    rec h = {f->head, 0};
    put(&h, 0x04034b50, 4), put(&h, ver, 2), put(&h, 0, 2), put(&h, 0, 2); /* stored */
    put(&h, 0, 2), put(&h, ZIP_DATE, 2), put(&h, crc, 4), put(&h, size32, 4), put(&h, size32, 4);
    put(&h, mlen, 2), put(&h, zip64 ? 20 : 0, 2), put_bytes(&h, member, mlen);
    if (zip64) put_zip64_sizes(&h, size);
    const uint64_t cd_off = h.n + size; /* the member's local header is at 0 */
    put_bytes(&h, npy, npy_n);
    f->head_n = h.n;

    rec t = {f->tail, 0};
    put(&t, 0x02014b50, 4), put(&t, ver, 2), put(&t, ver, 2), put(&t, 0, 2), put(&t, 0, 2);
    put(&t, 0, 2), put(&t, ZIP_DATE, 2), put(&t, crc, 4), put(&t, size32, 4), put(&t, size32, 4);
    put(&t, mlen, 2), put(&t, zip64 ? 20 : 0, 2), put(&t, 0, 2); /* no comment */
    put(&t, 0, 2), put(&t, 0, 2), put(&t, 0, 4), put(&t, 0, 4);  /* disk, attributes, offset 0 */
    put_bytes(&t, member, mlen);
    if (zip64) put_zip64_sizes(&t, size);
    const uint64_t cd_n = t.n;
    if (zip64) {
        const uint64_t eocd64_off = cd_off + cd_n;
        put(&t, 0x06064b50, 4), put(&t, 44, 8), put(&t, ZIP_V45, 2), put(&t, ZIP_V45, 2);
        put(&t, 0, 4), put(&t, 0, 4), put(&t, 1, 8), put(&t, 1, 8), put(&t, cd_n, 8);
        put(&t, cd_off, 8);
        put(&t, 0x07064b50, 4), put(&t, 0, 4), put(&t, eocd64_off, 8), put(&t, 1, 4);
    }
    put(&t, 0x06054b50, 4), put(&t, 0, 2), put(&t, 0, 2), put(&t, 1, 2), put(&t, 1, 2);
    put(&t, cd_n, 4), put(&t, zip64 ? U32_MAX : cd_off, 4), put(&t, 0, 2);
    f->tail_n = t.n;
    return SG_OK;
}
