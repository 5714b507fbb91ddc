#!/bin/sh
# build.sh — builds the libFuzzer target of the checkpoint reader and the seed generator.
#   tests/fuzz/build.sh OUTDIR     ->  OUTDIR/fuzz_ckpt, OUTDIR/make_seeds
# Needs clang (libFuzzer ships with it) and libzstd. See tests/fuzz/README.md.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/ckpt-fuzz}
mkdir -p "$OUT"
SRC="$ROOT/checkpoints/*.c $ROOT/common/sg_base.c"
FLAGS="-std=c11 -D_GNU_SOURCE -I$ROOT -g -O1 -Wall -Wextra -Werror"
# shellcheck disable=SC2086
clang $FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DCKPT_LIBFUZZER \
    "$ROOT/tests/fuzz/ckpt_fuzz_target.c" $SRC -lzstd -lpthread -lm -o "$OUT/fuzz_ckpt"
# shellcheck disable=SC2086
clang $FLAGS "$ROOT/tests/fuzz/make_seeds.c" $SRC -lzstd -lpthread -lm -o "$OUT/make_seeds"
echo "built $OUT/fuzz_ckpt and $OUT/make_seeds"
