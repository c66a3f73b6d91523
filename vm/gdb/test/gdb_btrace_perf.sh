#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# gdb_btrace.sh's sessions over perf's BTS event, and gdb over perf against
# gdb over PTRACE_BTS (for a machine whose perf has the BTS event).
exec "$(dirname "$0")/gdb_btrace.sh" perf
