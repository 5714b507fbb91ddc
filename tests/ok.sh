# shellcheck shell=bash
# ok.sh — sourced by the shell tests: `ok NAME CONDITION` evaluates CONDITION, counts it in
# pass or fail, and prints "FAIL: NAME" where it fails; each test prints the counts at its end
# and exits non-zero where fail is not 0.
pass=0 fail=0
ok() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
