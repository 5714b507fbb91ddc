#!/usr/bin/env bash
# failed_digest.sh BUILD_DIR: after a ctest run that failed, each failed test's lines that say
# what failed (FAIL, error, assert; at most 40 a test; else its last 15 lines), from ctest's LastTest.log. CI prints it
# last, where a log shortened to its head and tail still shows it: a test's own output can run
# to hundreds of lines, and its FAIL line sits in the middle.
set -u
tmp=${1:?usage: failed_digest.sh BUILD_DIR}/Testing/Temporary
[ -r "$tmp/LastTestsFailed.log" ] && [ -r "$tmp/LastTest.log" ] || {
    echo "failed_digest: no failed tests recorded under $tmp"
    exit 0
}
echo "== what failed (from $tmp/LastTest.log)"
while IFS= read -r entry; do
    name=${entry#*:}
    echo "-- $name"
    awk -v t="$name" '
        /^[0-9]+\/[0-9]+ Test: / { s = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", s); mine = (s == t); next }
        mine && /^Output:/ { out = 1; next }
        out && /^<end of output>/ {
            out = 0; mine = 0
            if (!n) {  # nothing said what failed (a timeout, a crash): the last lines of its output
                print "   (no FAIL or error line; its last lines:)"
                for (i = (k > 15 ? k - 15 : 0); i < k; i++) print "   " last[i % 15]
            }
            next
        }
        out { last[k++ % 15] = substr($0, 1, 400) }
        out && /FAIL|[Ee]rror|[Aa]ssert|[Tt]imeout|Segmentation|Abort/ {
            print "   " substr($0, 1, 400)
            if (++n >= 40) { print "   (more in the log)"; exit }
        }
    ' "$tmp/LastTest.log"
done <"$tmp/LastTestsFailed.log"
