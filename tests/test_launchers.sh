#!/usr/bin/env bash
# The design card's commands work verbatim from the repository root after tools/setup.sh:
# ./plan --model unet_cifar, ./train, tools/verify (links to build/ made by the setup).
# Skips (77) when the tested build is not the setup's build/ (the links point there).
# Usage: test_launchers.sh SOURCE_DIR BINARY_DIR
set -u
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
src=$1 bin=$2
[ "$(realpath "$bin")" = "$(realpath "$src/build")" ] || { echo "not the setup's build/: skip"; exit 77; }
cd "$src" || exit 1
ok "./plan --model unet_cifar" './plan --model unet_cifar --no-table | grep -q "parameters      35,746,307"'
ok "./train --help" './train --help | grep -q -- "--resume DIR|CKPT"'
ok "./sample --help" './sample --help >/dev/null'
ok "tools/verify --help" 'tools/verify --help | grep -q "usage: verify"'
ok "git ignores them" '[ -z "$(git status --porcelain --ignored=no -- plan train sample tools/verify 2>/dev/null)" ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
