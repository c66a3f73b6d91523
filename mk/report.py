#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Judge one or more VM test runs and print the summary line.

For every run directory (holding console.log and results.log from mk/vm.sh):
  - KUnit: the KTAP in console.log, parsed by the tree's kunit.py; each case
    counts.
  - kselftest: the TAP in results.log; each harness case counts where a
    program reports cases, otherwise the program counts once.
  - the console is scanned for kernel splats and for the end-of-tests marker.
The last line is "N passed, N failed, N skipped"; the exit status is non-zero
on any failure, splat, missing marker or empty run.
"""

import json
import os
import re
import subprocess
import sys

END_MARKER = "==== END OF TESTS ===="
SPLATS = [
    r"BUG:", r"WARNING:", r"Oops", r"KASAN", r"Kernel panic",
    r"general protection fault", r"possible circular locking",
    r"possible recursive locking", r"inconsistent lock state",
    r"DEBUG_LOCKS_WARN_ON", r"suspicious RCU usage", r"INFO: task .* blocked",
    r"rcu: INFO: .* stall", r"kmemleak: .* new suspected memory leaks",
    r"UBSAN:", r"vm: TIMEOUT",
]
SPLAT_RE = re.compile("|".join(SPLATS))


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []
        self.skips = []

    def add(self, status, name, reason=""):
        if status == "PASS":
            self.passed += 1
        elif status == "SKIP":
            self.skipped += 1
            self.skips.append("%s: %s" % (name, reason or "no reason given"))
        else:
            self.failed += 1
            self.failures.append("%s %s" % (name, reason))


def kunit_cases(node, prefix, out):
    name = prefix + node.get("name", "")
    for case in node.get("test_cases", []):
        out.append((name + "." + case["name"], case["status"]))
    for sub in node.get("sub_groups", []):
        kunit_cases(sub, name + "." if node.get("name") else "", out)


def parse_kunit(src, console, tally, run):
    jpath = console + ".kunit.json"
    res = subprocess.run([sys.executable,
                          os.path.join(src, "tools/testing/kunit/kunit.py"),
                          "parse", "--json=" + jpath, console],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    with open(console + ".kunit.txt", "w") as f:
        f.write(res.stdout)
    if not os.path.exists(jpath):
        tally.add("FAIL", run + " kunit", "(kunit.py parse produced nothing)")
        return
    with open(jpath) as f:
        data = json.load(f)
    cases = []
    for group in data.get("sub_groups", []):
        kunit_cases(group, "", cases)
    if not cases:
        tally.add("FAIL", run + " kunit", "(no KUnit cases found)")
    for name, status in cases:
        tally.add(status if status in ("PASS", "SKIP") else "FAIL",
                  "%s kunit %s" % (run, name))
    print("%s: KUnit: %d cases (details in %s)" %
          (run, len(cases), console + ".kunit.txt"))


TAP_RE = re.compile(r"^(not ok|ok) \d+ (.*?)(?:\s+#\s*(SKIP|TIMEOUT|XFAIL)"
                    r"\b\s*(.*))?$")
NESTED_RE = re.compile(r"^# (not ok|ok) \d+ (.*?)(?:\s+#\s*(SKIP|XFAIL)"
                       r"\b\s*(.*))?$")


def tap_status(ok, directive):
    if directive == "SKIP":
        return "SKIP"
    if directive == "TIMEOUT":
        return "FAIL"
    return "PASS" if ok == "ok" else "FAIL"


def parse_kselftest(path, tally, run):
    if not os.path.exists(path):
        tally.add("FAIL", run + " kselftest", "(no results.log)")
        return
    nested = []
    programs = 0
    with open(path, errors="replace") as f:
        lines = [line.rstrip("\r\n") for line in f]
    for line in lines:
        m = NESTED_RE.match(line)
        if m:
            nested.append(m)
            continue
        m = TAP_RE.match(line)
        if not m or not m.group(2).startswith("selftests: "):
            continue
        programs += 1
        prog = m.group(2)[len("selftests: "):].strip()
        status = tap_status(m.group(1), m.group(3))
        reason = m.group(4) or ""
        for n in nested:
            tally.add(tap_status(n.group(1), n.group(3)),
                      "%s %s: %s" % (run, prog, n.group(2)), n.group(4) or "")
        nested_failed = any(tap_status(n.group(1), n.group(3)) == "FAIL"
                            for n in nested)
        if not nested or (status == "FAIL" and not nested_failed):
            tally.add(status, "%s %s" % (run, prog),
                      reason or ("(exit status)" if status == "FAIL" else ""))
        nested = []
    if not programs:
        tally.add("FAIL", run + " kselftest", "(no kselftest results)")
    print("%s: kselftest: %d programs" % (run, programs))


def scan_console(path, tally, run):
    if not os.path.exists(path):
        tally.add("FAIL", run + " boot", "(no console.log)")
        return
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    splats = [line for line in lines if SPLAT_RE.search(line)]
    for line in splats[:20]:
        tally.add("FAIL", run + " splat", line.strip())
    if not any(END_MARKER in line for line in lines):
        tally.add("FAIL", run + " boot", "(no end-of-tests marker: the VM "
                  "crashed, hung or timed out)")


def main():
    src = sys.argv[1]
    runs = sys.argv[2:]
    tally = Tally()
    for rundir in runs:
        run = os.path.basename(rundir.rstrip("/"))
        console = os.path.join(rundir, "console.log")
        print("%s: serial log %s" % (run, console))
        scan_console(console, tally, run)
        if os.path.exists(console):
            parse_kunit(src, console, tally, run)
        parse_kselftest(os.path.join(rundir, "results.log"), tally, run)
    for s in tally.skips:
        print("SKIP " + s)
    for s in tally.failures:
        print("FAIL " + s)
    total = tally.passed + tally.failed + tally.skipped
    if not total:
        tally.failed += 1
    print("%d passed, %d failed, %d skipped" %
          (tally.passed, tally.failed, tally.skipped))
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
