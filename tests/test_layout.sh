#!/bin/bash
# test_layout.sh — the layout rules of docs/architecture.md:
# 1. who may include whom, checked on every #include "folder/..." of the C, CUDA and header
#    files: a file may include its own folder and the folders listed for it, nothing else;
# 2. no two files share a name (CMakeLists.txt and README.md aside), so that a name says
#    which file is meant, to readers and tools alike.
# Exits 1 listing every break of a rule.
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

# folder -> the project folders its files may include (besides itself)
declare -A allowed=(
    [common]=""
    [planner]="common"
    [kernels]="common"
    [data]="common"
    [checkpoints]="common"
    [graph]="common planner kernels checkpoints"
    [tools]="common planner graph data checkpoints"
)

bad=0
for dir in "${!allowed[@]}"; do
    [ -d "$dir" ] || continue
    while IFS= read -r hit; do
        file=${hit%%:*}
        inc=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$hit")
        [ "$inc" = "$dir" ] && continue
        ok=0
        for a in ${allowed[$dir]}; do [ "$inc" = "$a" ] && ok=1; done
        if [ $ok = 0 ]; then
            echo "FAIL $file includes $inc/ (allowed from $dir/: itself ${allowed[$dir]})"
            bad=1
        fi
    done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include "[a-z_]+/' "$dir" \
                 --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh')
done
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    dups=$(git -C "$root" ls-files | awk -F/ '$NF != "CMakeLists.txt" && $NF != "README.md" {print $NF}' |
        sort | uniq -d)
    for d in $dups; do
        echo "FAIL files named $d: $(git -C "$root" ls-files | grep -E "(^|/)$d\$" | tr '\n' ' ')"
        bad=1
    done
fi
[ $bad = 0 ] && echo "layout: every include follows the folder rules; no two files share a name"
exit $bad
