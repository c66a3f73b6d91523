#!/bin/sh
# make run: the branch trace of a small program, symbolized, then the cost
# of tracing it.
echo "== btrace -f main /usr/bin/bts-demo: the demo's branches from main on =="
btrace -f main /usr/bin/bts-demo
echo
echo "== bts_bench: cost per traced instruction (emulated backend vs. single-step tracers) =="
bts_bench
