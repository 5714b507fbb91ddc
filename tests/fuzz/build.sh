#!/bin/sh
# build.sh — builds the libFuzzer targets (checkpoint reader, model configs) and the seed generator.
#   tests/fuzz/build.sh OUTDIR     ->  OUTDIR/fuzz_ckpt, OUTDIR/make_seeds, OUTDIR/fuzz_config,
#                                      OUTDIR/fuzz_weights, OUTDIR/fuzz_engine_table, OUTDIR/fuzz_data
# Needs clang (libFuzzer ships with it) and libzstd. See tests/fuzz/README.md.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/ckpt-fuzz}
mkdir -p "$OUT"
SRC="$ROOT/checkpoints/*.c $ROOT/common/sg_base.c"
FLAGS="-std=c11 -D_GNU_SOURCE -I$ROOT -g -O1 -Wall -Wextra -Werror"
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DCKPT_LIBFUZZER \
    "$ROOT/tests/fuzz/ckpt_fuzz_target.c" $SRC -ljansson -lzstd -lpthread -lm -o "$OUT/fuzz_ckpt"
# shellcheck disable=SC2086
clang $FLAGS "$ROOT/tests/fuzz/make_seeds.c" $SRC -ljansson -lzstd -lpthread -lm -o "$OUT/make_seeds"
echo "built $OUT/fuzz_ckpt and $OUT/make_seeds"
# the config fuzzer: model flags -> tools/cli -> builder -> plan -> verify (needs jansson, and
# the graph library for the tools' backend choice)
CFG_SRC="$ROOT/tools/cli.c $ROOT/planner/*.c $ROOT/graph/*.c $ROOT/kernels/cpu/*.c $SRC"
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSG_LIBFUZZER \
    "$ROOT/tests/fuzz/config_fuzz_target.c" $CFG_SRC $(pkg-config --cflags --libs jansson openblas) \
    -lzstd -lpthread -lm -o "$OUT/fuzz_config"
echo "built $OUT/fuzz_config"
# the weights fuzzer: a diffusers folder (config.json, scheduler, safetensors) -> config -> plan
# -> every parameter read
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSG_LIBFUZZER \
    "$ROOT/tests/fuzz/weights_fuzz_target.c" $CFG_SRC $(pkg-config --cflags --libs jansson openblas) \
    -lzstd -lpthread -lm -o "$OUT/fuzz_weights"
echo "built $OUT/fuzz_weights"
# the engine table fuzzer: parse -> JSON round trip -> the check against its model's plan
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSG_LIBFUZZER \
    "$ROOT/tests/fuzz/engine_table_fuzz_target.c" $CFG_SRC \
    $(pkg-config --cflags --libs jansson openblas) -lzstd -lpthread -lm -o "$OUT/fuzz_engine_table"
echo "built $OUT/fuzz_engine_table"
# the data fuzzer: each input as IDX images, a PNG and a JPEG
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DSG_LIBFUZZER \
    "$ROOT/tests/fuzz/data_fuzz_target.c" "$ROOT"/data/*.c "$ROOT/common/sg_base.c" \
    $(pkg-config --cflags --libs libpng libjpeg zlib) -lm -o "$OUT/fuzz_data"
# shellcheck disable=SC2086
clang -std=c11 -g -O1 -Wall -Wextra -Werror "$ROOT/tests/fuzz/make_data_seeds.c" \
    $(pkg-config --cflags --libs libpng libjpeg zlib) -o "$OUT/make_data_seeds"
echo "built $OUT/fuzz_data and $OUT/make_data_seeds"
