#!/bin/sh
# make run: the branch trace of a small program, symbolized; the story of a
# crash; then the cost of tracing.
echo "== btrace -b main /usr/bin/bts-demo: the demo's branches from main on =="
btrace -b main /usr/bin/bts-demo
echo
echo "== btrace --calls -b main /usr/bin/bts-demo: the same as calls and returns =="
btrace --calls -b main /usr/bin/bts-demo
echo
echo "== /usr/bin/bts-crash: a PIE program with the C library; it crashes =="
/usr/bin/bts-crash
echo "exit status $?"
echo
echo "== btrace --on-crash=24 /usr/bin/bts-crash: the last 24 branches before the crash =="
btrace --on-crash=24 /usr/bin/bts-crash
echo "exit status $? (the same: btrace ends as the program did)"
echo
echo "== bts_bench: cost per traced instruction (emulated backend vs. single-step tracers) =="
bts_bench
