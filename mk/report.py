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
    # BUG: and WARNING: start the line in a real report; "RETBleed: WARNING:"
    # and the like are boot-time advice, not splats.
    r"^\s*(?:\[[ \d.]+\] )?BUG:", r"^\s*(?:\[[ \d.]+\] )?WARNING:", r"Oops", r"KASAN", r"Kernel panic",
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


KSELFTEST_BEGIN = "==== KSELFTEST BEGIN ===="
KTAP_TOP_RE = re.compile(r"^(KTAP version|TAP version|1\.\.|ok |not ok |# )")


def parse_kunit(src, console, tally, run):
    # KUnit runs during boot; the kselftest TAP echoed on the console later
    # would read as more KTAP, so kunit.py gets the boot part only.  Kernel
    # messages (column 0, not KTAP) that land between a KTAP header and its
    # first line derail kunit.py's nesting: drop them.
    boot = console + ".boot"
    with open(console, errors="replace") as f, open(boot, "w") as out:
        for line in f:
            if KSELFTEST_BEGIN in line:
                break
            if line[:1].isspace() or KTAP_TOP_RE.match(line):
                out.write(line)
    jpath = console + ".kunit.json"
    res = subprocess.run([sys.executable,
                          os.path.join(src, "tools/testing/kunit/kunit.py"),
                          "parse", "--json=" + jpath, boot],
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
    reasons = {}
    with open(console, errors="replace") as f:
        for line in f:
            m = re.search(r"ok \d+ (\S+) # SKIP (.*)", line)
            if m:
                reasons[m.group(1)] = m.group(2).strip()
    for name, status in cases:
        tally.add(status if status in ("PASS", "SKIP") else "FAIL",
                  "%s kunit %s" % (run, name),
                  reasons.get(name.rsplit(".", 1)[-1], ""))
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


def scan_qemu(rundir, tally, run):
    status = os.path.join(rundir, "qemu.status")
    if os.path.exists(status):
        with open(status) as f:
            rc = f.read().strip()
        if rc not in ("0", "124"):
            tally.add("FAIL", run + " qemu", "(QEMU exited with status %s)" % rc)
    stderr = os.path.join(rundir, "qemu.stderr")
    if os.path.exists(stderr):
        with open(stderr, errors="replace") as f:
            for line in f:
                if "BTS:" in line:
                    tally.add("FAIL", run + " qemu", line.strip())


PLAIN_TAP_RE = re.compile(r"^(not ok|ok) \d+ (?:- )?(.*?)(?:\s+#\s*(SKIP)\b\s*(.*))?$")


def parse_plain_tap(path, tally, run):
    """A TAP stream of its own (the machine model's test)."""
    cases = 0
    with open(path, errors="replace") as f:
        for line in f:
            m = PLAIN_TAP_RE.match(line.rstrip("\n"))
            if m:
                cases += 1
                tally.add(tap_status(m.group(1), m.group(3)),
                          "%s %s" % (run, m.group(2)), m.group(4) or "")
    if not cases:
        tally.add("FAIL", run, "(no TAP results in %s)" % path)
    print("%s: %d cases (%s)" % (run, cases, path))


def main():
    src = sys.argv[1]
    runs = sys.argv[2:]
    tally = Tally()
    for rundir in runs:
        run = os.path.basename(rundir.rstrip("/"))
        tap = os.path.join(rundir, "tap.log")
        if os.path.exists(tap):
            parse_plain_tap(tap, tally, run)
            continue
        console = os.path.join(rundir, "console.log")
        scan_qemu(rundir, tally, run)
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
