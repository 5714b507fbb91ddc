#!/bin/sh
# build.sh — builds the libFuzzer targets (checkpoint reader, model configs) and the seed generator.
#   tests/fuzz/build.sh OUTDIR     ->  OUTDIR/fuzz_ckpt, OUTDIR/make_seeds, OUTDIR/fuzz_config
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
