#!/usr/bin/env bash
# test_ncu_summary.sh — tools/ncu_summary.py on a hand-written CSV in the layout of
# `ncu --csv --page raw` (a header row naming "Kernel Name", a units row, one row per kernel;
# the "==PROF==" lines ncu may print first): the numbers below are made up for the test, not
# a measurement. Checks the family sums, the unit conversions (usecond, msecond, nsecond;
# Kbyte, Mbyte), the achieved GB/s, the time-weighted percentages and the longest-kernel list;
# and that a file with no kernel table is refused in one line.
set -u
py=${PYTHON:-python3}
tool=$(cd "$(dirname "$0")/.." && pwd)/tools/ncu_summary.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { if eval "$2"; then echo "ok - $1"; else echo "FAIL - $1" && fail=1; fi; }

cat >"$tmp/raw.csv" <<'CSV'
==PROF== Connected to process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","","","","","","","","Mbyte","Kbyte","%","usecond","%"
"0","1234","bench","h","norm_apply_kernel<unsigned short, 8, false>","1","13","(256, 1, 1)","(4, 128, 1)","0","9.0","30","2000","80","8","10"
"1","1234","bench","h","norm_apply_kernel<unsigned short, 8, true>","1","13","(256, 1, 1)","(4, 128, 1)","0","9.0","10","6000","40","8","30"
"2","1234","bench","h","conv_tc_fwd_kernel(sg_conv_args)","1","13","(128, 1, 1)","(512, 2, 1)","0","9.0","1","1000","5","100","60"
CSV
"$py" "$tool" "$tmp/raw.csv" --title "fixture" --top 2 >"$tmp/out.md" 2>"$tmp/err.txt"
rc=$?
cat "$tmp/out.md" "$tmp/err.txt"
ok "exit 0" '[ $rc -eq 0 ]'
ok "title and totals" 'grep -q "^# fixture" "$tmp/out.md" && grep -q "^3 kernels, 0.116 ms summed" "$tmp/out.md"'
# norm_apply: 16 us, 30+2+10+6 = 48 MB, 48e6 B / 16 us = 3000 GB/s; DRAM % (80*8+40*8)/16 = 60
ok "family row (sums, GB/s, weighted %)" 'grep -Fq "| \`norm_apply_kernel\` | 2 | 0.016 | 13.8 | 48.0 | 3000 | 60.0 | 20.0 |" "$tmp/out.md"'
ok "a parenthesised name is a family too" 'grep -Fq "| \`conv_tc_fwd_kernel\` | 1 | 0.100 | 86.2 | 2.0 | 20 | 5.0 | 60.0 |" "$tmp/out.md"'
ok "families by time" '[ "$(grep -n conv_tc_fwd_kernel "$tmp/out.md" | head -1 | cut -d: -f1)" -lt "$(grep -n "norm_apply_kernel\`" "$tmp/out.md" | head -1 | cut -d: -f1)" ]'
ok "longest kernels: two, the conv first, launch order kept" 'grep -Fq "| 2 | \`conv_tc_fwd_kernel(sg_conv_args)\` | 100.0 | (512, 2, 1) | (128, 1, 1) |" "$tmp/out.md" && [ $(grep -c "^| [0-9]* | \`" "$tmp/out.md") -eq 2 ]'

# msecond and nsecond durations, no byte columns: '-' where a value cannot be had
cat >"$tmp/raw2.csv" <<'CSV'
"ID","Kernel Name","gpu__time_duration.sum"
"","","msecond"
"0","a_kernel","0.5"
"1","b_kernel","250"
CSV
printf '"ID","Kernel Name","gpu__time_duration.sum"\n"","","nsecond"\n"0","c_kernel","1500"\n' >"$tmp/raw3.csv"
"$py" "$tool" "$tmp/raw2.csv" >"$tmp/out2.md" && "$py" "$tool" "$tmp/raw3.csv" >"$tmp/out3.md"
ok "msecond converted" 'grep -Fq "| \`b_kernel\` | 1 | 250.000 |" "$tmp/out2.md" && grep -Fq "| \`a_kernel\` | 1 | 0.500 | 0.2 | - | - | - | - |" "$tmp/out2.md"'
ok "nsecond converted" 'grep -q "^1 kernels, 0.002 ms summed" "$tmp/out3.md"'

echo "==PROF== No kernels were profiled." >"$tmp/none.csv"
"$py" "$tool" "$tmp/none.csv" >"$tmp/o4" 2>"$tmp/e4"
rc=$?
ok "no kernel table: exit 1, one line naming the file" '[ $rc -eq 1 ] && [ $(wc -l <"$tmp/e4") -eq 1 ] && grep -q "none.csv: no header row" "$tmp/e4"'
exit $fail
