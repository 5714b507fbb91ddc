/* make_seeds.c — writes small valid checkpoints (every dtype, shuffled / raw / empty /
 * multi-frame payloads) and a few JSON documents as the fuzzer's starting corpus.
 * usage: make_seeds DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/ckpt.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char path[512];
    float w[96];
    uint16_t h[33];
    int32_t i32[5] = {1, -2, 3, 1000, -7};
    uint8_t u8[40];
    uint32_t u32[3] = {7, 8, 9};
    for (int i = 0; i < 96; i++) w[i] = (float)(i % 13) * 0.01f - 0.05f;
    for (int i = 0; i < 33; i++) h[i] = (uint16_t)(0x3f80 + i);
    for (int i = 0; i < 40; i++) u8[i] = (uint8_t)(i * 37);
    ckpt_tensor_desc t[] = {
        {.name = "conv_in.weight",
         .role = ROLE_PARAM,
         .dtype = DT_F32,
         .ndim = 4,
         .shape = {4, 3, 2, 4},
         .data = w,
         .bytes = sizeof w},
        {.name = "ema:conv_in.weight",
         .role = ROLE_EMA,
         .dtype = DT_F32,
         .ndim = 4,
         .shape = {4, 3, 2, 4},
         .data = w,
         .bytes = sizeof w},
        {.name = "h",
         .role = ROLE_SAVED,
         .dtype = DT_BF16,
         .ndim = 1,
         .shape = {33},
         .data = h,
         .bytes = sizeof h},
        {.name = "i",
         .role = ROLE_STATE,
         .dtype = DT_I32,
         .ndim = 1,
         .shape = {5},
         .data = i32,
         .bytes = sizeof i32},
        {.name = "u8",
         .role = ROLE_INPUT,
         .dtype = DT_U8,
         .ndim = 2,
         .shape = {5, 8},
         .data = u8,
         .bytes = sizeof u8},
        {.name = "u32", .role = ROLE_STATE, .dtype = DT_U32, .ndim = 0, .data = u32, .bytes = 4},
        {.name = "empty", .role = ROLE_TEMP, .dtype = DT_F32, .ndim = 2, .shape = {0, 3}},
    };
    const char *meta = "{\"model\":\"unet_tiny\",\"config\":{\"ch\":32,\"ch_mult\":[1,2]},"
                       "\"step\":5,\"env\":{\"gpu\":\"\\u00e9\"}}";
    struct {
        int n, shuffle;
        int64_t block;
    } v[] = {{7, CKPT_SHUFFLE_AUTO, 0},
             {7, CKPT_SHUFFLE_ON, 64},
             {3, CKPT_SHUFFLE_OFF, 128},
             {1, CKPT_SHUFFLE_ON, 64},
             {0, 0, 0}};
    for (int k = 0; k < (int)(sizeof v / sizeof v[0]); k++) {
        ckpt_write_opts o = {.shuffle = v[k].shuffle, .block_bytes = v[k].block, .threads = 1};
        snprintf(path, sizeof path, "%s/seed_ckpt_%d.sgck", argv[1], k);
        if (ckpt_write(path, k == 4 ? NULL : meta, t, v[k].n, &o)) {
            fprintf(stderr, "%s\n", sg_last_error());
            return 1;
        }
    }
    const char *json[] = {meta, "[1,2.5e-3,-0,true,false,null,\"\\ud83d\\ude00\"]",
                          "{\"a\":{\"b\":[{\"c\":1}]}}"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/seed_json_%d.json", argv[1], k);
        FILE *f = fopen(path, "w");
        fputs(json[k], f);
        fclose(f);
    }
    return 0;
}
