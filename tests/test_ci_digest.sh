#!/usr/bin/env bash
# .ci/failed_digest.sh against a real ctest run: a project of four tests (one passes; one fails
# with its FAIL and assertion lines among 400 others; one fails on stderr; one times out after
# printing no FAIL line) gives, for each failed test and only those, the lines that say what
# failed, or for the timeout its last 15 lines; a build with no failures recorded says so.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/ok.sh" # pass, fail, ok NAME CONDITION
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/p"
cat >"$tmp/p/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(digest NONE)
enable_testing()
add_test(NAME passes COMMAND bash -c "echo FAIL: not a failure, the test passed")
add_test(NAME fails+in_the_middle COMMAND bash -c "for i in $(seq 200); do echo head $i; done; echo 'FAIL: the middle check'; echo 'AssertionError: (1, 2)'; for i in $(seq 200); do echo tail $i; done; exit 1")
add_test(NAME fails_on_stderr COMMAND bash -c "echo 'error: it broke' >&2; exit 3")
add_test(NAME times_out COMMAND bash -c "for i in $(seq 30); do echo step $i; done; sleep 20")
set_tests_properties(times_out PROPERTIES TIMEOUT 1)
EOF
cmake -S "$tmp/p" -B "$tmp/b" >/dev/null 2>&1 && ctest --test-dir "$tmp/b" -j2 >/dev/null 2>&1
ok "the ctest run recorded 3 failures" '[ "$(wc -l <"$tmp/b/Testing/Temporary/LastTestsFailed.log")" -eq 3 ]'
bash "$root/.ci/failed_digest.sh" "$tmp/b" >"$tmp/d.txt" 2>&1
rc=$?
cat "$tmp/d.txt"
ok "exit 0" '[ $rc -eq 0 ]'
ok "each failed test named, the passing one not" \
    'grep -qx -- "-- fails+in_the_middle" "$tmp/d.txt" && grep -qx -- "-- fails_on_stderr" "$tmp/d.txt" &&
     grep -qx -- "-- times_out" "$tmp/d.txt" && ! grep -q "passes\|not a failure" "$tmp/d.txt"'
ok "the middle FAIL and its assertion, under their test, and none of the other lines" \
    'sed -n "/^-- fails+in_the_middle$/,/^-- /p" "$tmp/d.txt" | grep -qx "   FAIL: the middle check" &&
     sed -n "/^-- fails+in_the_middle$/,/^-- /p" "$tmp/d.txt" | grep -qx "   AssertionError: (1, 2)" &&
     ! grep -q "head \|tail " "$tmp/d.txt"'
ok "the stderr error line" 'grep -qx "   error: it broke" "$tmp/d.txt"'
ok "the timeout: its last 15 lines, said so" \
    'grep -q "no FAIL or error line; its last lines" "$tmp/d.txt" &&
     [ "$(grep -c "^   step " "$tmp/d.txt")" -eq 15 ] && grep -qx "   step 30" "$tmp/d.txt" &&
     grep -qx "   step 16" "$tmp/d.txt" && ! grep -qx "   step 15" "$tmp/d.txt"'
bash "$root/.ci/failed_digest.sh" "$tmp/nothing" >"$tmp/n.txt" 2>&1
rc=$?
ok "no failures recorded: said, exit 0" '[ $rc -eq 0 ] && grep -q "no failed tests recorded" "$tmp/n.txt"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
