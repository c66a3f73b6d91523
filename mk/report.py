#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Judge the VM test runs against their manifests and print the summary line.

    report.py [--only A,B] [--failed WHAT]... <src> <run dir>...
    report.py --list <manifest> [--pass P] [--only A,B]  (a run's kselftests)

Every run directory (from mk/vm.sh: console.log, results.log; or from
mk/qemu-test.sh: tap.log) is judged against vm/expected/<run>, the manifest of
what that run must report (its format is described in vm/expected/README).
Any difference fails the run: a missing or unexpected KUnit suite or kselftest
program, a different number of cases, a skip the manifest does not allow (or
an allowed skip that did not happen), a console line that is not there, a TAP
plan that does not match.

Also, as before:
  - KUnit: the KTAP in console.log, parsed by the tree's kunit.py; each case
    counts.
  - kselftest: the TAP in results.log; each harness case counts where a
    program reports cases, otherwise the program counts once.
  - the console is scanned for kernel splats and for the end-of-tests marker.
--only A,B (make test ONLY=A,B) checks, of the kselftest programs, only those
named (each must be in some run's manifest, and runs whose manifest has none
of them did not run); KUnit is checked in full all the same.
A run directory holding a file "not-run" (mk/test.py: the deadline came
first, or a build the run needs failed) fails with the reason it gives.
--failed WHAT fails a step that is not a run (a build, a check).
The last line is "N passed, N failed, N skipped"; the exit status is non-zero
on any failure, splat, missing marker, difference from a manifest or empty run.
"""

import fnmatch
import json
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# REPORT_MANIFESTS: another folder of manifests (mk/report_test.py).
MANIFESTS = os.environ.get("REPORT_MANIFESTS", os.path.join(TOP, "vm", "expected"))
END_MARKER = "==== END OF TESTS ===="
SPLATS = [
    # Anywhere in a line: a kernel message can land in the middle of a
    # test's output.  "RETBleed: WARNING:" and the like are boot-time
    # advice, not splats; WARN() prints "WARNING: CPU: n PID: m".
    r"BUG: ", r"WARNING: CPU: \d+ PID:", r"-\[ cut here \]-", r"---\[ end trace",
    r"Call Trace:", r"Oops", r"KASAN", r"Kernel panic",
    r"general protection fault", r"possible circular locking",
    r"possible recursive locking", r"inconsistent lock state",
    r"DEBUG_LOCKS_WARN_ON", r"suspicious RCU usage", r"INFO: task .* blocked",
    r"rcu: INFO: .* stall", r"kmemleak: .* new suspected memory leaks",
    r"UBSAN:", r"vm: TIMEOUT",
    # A PMI nobody claimed: a threshold interrupt the Debug Store code
    # (or perf) lost track of, e.g. one the CPU delivered late.
    r"NMI received for unknown reason", r"Dazed and confused",
    # The NMI watchdog's report has no "BUG:"; from user mode, no trace.
    r"Watchdog detected hard LOCKUP",
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


class Manifest:
    """vm/expected/<run>: what a run must report."""

    def __init__(self, path):
        self.path = path
        self.kunit = {}         # suite -> cases
        self.kselftest = {}     # "collection:program" -> cases
        self.skips = []         # [pattern, reason, times matched]
        self.console = []       # regular expressions
        self.plan = None        # TAP plan of a tap.log run
        self.time = None        # seconds the run takes (mk/test.py's bound)
        self.provoked = None    # where the splat provoked on purpose begins
        self.provoked_splat = None  # and the splat lines it may print
        self.errors = []
        with open(path) as f:
            for num, line in enumerate(f, 1):
                self.parse(num, line.split("#", 1)[0].strip(), line)

    def parse(self, num, line, raw):
        if not line:
            return
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        try:
            if word == "kunit":
                suite, cases = rest.split()
                self.kunit[suite] = int(cases)
            elif word == "kselftest":
                prog, cases = rest.split()
                self.kselftest[prog] = int(cases)
            elif word == "plan":
                self.plan = int(rest)
            elif word == "time":
                self.time = int(rest)
            elif word == "provoked":
                # "#" may be part of the patterns: take them from the raw line.
                marker, sep, splat = raw.strip()[len("provoked"):].partition(" -- ")
                if not sep or not splat.strip():
                    raise ValueError("provoked needs ' -- <its splat lines>'")
                self.provoked = re.compile(marker.strip())
                self.provoked_splat = re.compile(splat.strip())
            elif word == "skip":
                pattern, sep, reason = rest.partition(" -- ")
                if not sep or not reason.strip():
                    raise ValueError("a skip needs ' -- <reason>'")
                self.skips.append([pattern.strip(), reason.strip(), 0])
            elif word == "console":
                # "#" may be part of the pattern: take it from the raw line.
                self.console.append(re.compile(raw.strip()[len("console"):].strip()))
            else:
                raise ValueError("unknown keyword %r" % word)
        except (ValueError, re.error) as e:
            self.errors.append("%s:%d: %s" % (self.path, num, e))

    def allows_skip(self, name):
        for skip in self.skips:
            if fnmatch.fnmatchcase(name, skip[0]):
                skip[2] += 1
                return True
        return False


class Run:
    """What one run reported: case counts per suite and program, skips."""

    def __init__(self, name):
        self.name = name
        self.kunit = {}
        self.kselftest = {}
        self.skipped = []       # manifest-style names of the skipped cases
        self.plan = None
        self.results = 0


def kunit_cases(node, prefix, out):
    name = prefix + node.get("name", "")
    for case in node.get("test_cases", []):
        out.append((name + "." + case["name"], case["status"]))
    for sub in node.get("sub_groups", []):
        kunit_cases(sub, name + "." if node.get("name") else "", out)


KSELFTEST_BEGIN = "==== KSELFTEST BEGIN ===="
KTAP_TOP_RE = re.compile(r"^(KTAP version|TAP version|1\.\.|ok |not ok |# )")


# "# case: EXPECTATION FAILED at file:line", then its indented details.
KUNIT_FAILED_RE = re.compile(r"# (\S+): ((?:EXPECTATION|ASSERTION) FAILED at \S+)")
KUNIT_DETAIL_RE = re.compile(r"^\s+(?!#|ok |not ok )\S")
KUNIT_FAILED_LINES = 8


def parse_kunit(src, console, tally, run):
    # KUnit runs during boot; the kselftest TAP echoed on the console later
    # would read as more KTAP, so kunit.py gets the boot part only.  Kernel
    # messages (column 0, not KTAP) that land between a KTAP header and its
    # first line derail kunit.py's nesting: drop them.
    boot = console + ".boot"
    jpath = console + ".kunit.json"
    # Never judge a verdict left over from an earlier run.
    for stale in (boot, jpath, console + ".kunit.txt"):
        if os.path.exists(stale):
            os.unlink(stale)
    with open(console, errors="replace") as f, open(boot, "w") as out:
        for line in f:
            if KSELFTEST_BEGIN in line:
                break
            if line[:1].isspace() or KTAP_TOP_RE.match(line):
                out.write(line)
    res = subprocess.run([sys.executable,
                          os.path.join(src, "tools/testing/kunit/kunit.py"),
                          "parse", "--json=" + jpath, boot],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    with open(console + ".kunit.txt", "w") as f:
        f.write(res.stdout)
    if not os.path.exists(jpath):
        tally.add("FAIL", run.name + " kunit", "(kunit.py parse produced nothing)")
        return
    with open(jpath) as f:
        data = json.load(f)
    cases = []
    for group in data.get("sub_groups", []):
        kunit_cases(group, "", cases)
    if not cases:
        tally.add("FAIL", run.name + " kunit", "(no KUnit cases found)")
    # kunit.py exits non-zero on failed cases and on a stream it could not
    # parse; the first is tallied case by case, the second is a failure here.
    if res.returncode != 0 and all(s in ("PASS", "SKIP") for _, s in cases):
        tally.add("FAIL", run.name + " kunit",
                  "(kunit.py parse exited %d; see %s)" %
                  (res.returncode, console + ".kunit.txt"))
    # Some stream errors (numbering, plans) kunit.py only prints.
    if "[ERROR]" in res.stdout:
        tally.add("FAIL", run.name + " kunit",
                  "(kunit.py reports errors in the KTAP; see %s)" % (console + ".kunit.txt"))
    reasons, failed = {}, {}
    with open(console, errors="replace") as f:
        follow = None
        for line in f:
            m = re.search(r"ok \d+ (\S+) # SKIP (.*)", line)
            if m:
                reasons[m.group(1)] = m.group(2).strip()
            # A failed case's first expectations, where and what, so that
            # a CI log that keeps only the verdict still says why.
            m = KUNIT_FAILED_RE.search(line)
            if m:
                follow = failed.setdefault(m.group(1), [])
                if len(follow) < KUNIT_FAILED_LINES:
                    follow.append(m.group(2))
                continue
            if follow is not None and KUNIT_DETAIL_RE.match(line) and \
                    len(follow) < KUNIT_FAILED_LINES:
                follow.append(line.strip())
            else:
                follow = None
    for case, lines in failed.items():
        reasons.setdefault(case, " | ".join(lines))
    for name, status in cases:
        suite = name.split(".", 1)[0]
        run.kunit[suite] = run.kunit.get(suite, 0) + 1
        status = status if status in ("PASS", "SKIP") else "FAIL"
        if status == "SKIP":
            run.skipped.append("kunit:" + name)
        tally.add(status, "%s kunit %s" % (run.name, name),
                  reasons.get(name.rsplit(".", 1)[-1], ""))
    print("%s: KUnit: %d cases (details in %s)" %
          (run.name, len(cases), console + ".kunit.txt"))


TAP_RE = re.compile(r"^(not ok|ok) \d+ (.*?)(?:\s+#\s*(SKIP|TIMEOUT|XFAIL|XPASS)"
                    r"\b\s*(.*))?$")
NESTED_RE = re.compile(r"^# (not ok|ok) \d+ (.*?)(?:\s+#\s*(SKIP|XFAIL|XPASS)"
                       r"\b\s*(.*))?$")
# What the harness printed for a case: "# # file.c:123:case:Expected ...",
# "# # case: Test terminated by timeout", but not its RUN/OK/FAIL lines.
CASE_RUN_RE = re.compile(r"^# #\s+RUN\s")
CASE_MSG_RE = re.compile(r"^# # (?!\s*(?:OK|FAIL|SKIP|XFAIL|XPASS)\s)(\S.*)$")
CASE_MSG_LINES = 3
# vm/init: the kselftests that follow ran again with ds.force_emulation=1.
PASS_RE = re.compile(r"^==== KSELFTEST PASS (\S+) ====$")


def tap_status(ok, directive):
    if directive == "SKIP":
        return "SKIP"
    # No test of this project expects to fail: an XFAIL would be a failure
    # the manifest cannot see, an XPASS a test that no longer tests.
    if directive in ("TIMEOUT", "XFAIL", "XPASS"):
        return "FAIL"
    return "PASS" if ok == "ok" else "FAIL"


def program_name(tap_name, prefix):
    # "selftests: x86: ptrace_bts_64 # exit=1" -> "x86:ptrace_bts_64"
    coll, _, prog = tap_name[len("selftests: "):].partition(":")
    return prefix + coll.strip() + ":" + prog.split("#", 1)[0].strip()


def parse_kselftest(path, tally, run):
    if not os.path.exists(path):
        tally.add("FAIL", run.name + " kselftest", "(no results.log)")
        return
    nested = []
    prefix = ""
    msgs = []
    with open(path, errors="replace") as f:
        lines = [line.rstrip("\r\n") for line in f]
    for line in lines:
        m = PASS_RE.match(line)
        if m:
            # A program of the first pass that never reported its result
            # must not lend its cases to the second pass.
            prefix = m.group(1) + "/"
            nested = []
            continue
        if CASE_RUN_RE.match(line):
            msgs = []
            continue
        m = CASE_MSG_RE.match(line)
        if m:
            msgs.append(m.group(1))
            continue
        m = NESTED_RE.match(line)
        if m:
            # A failed case names what failed, so that a CI log is enough.
            nested.append((m, " | ".join(msgs[:CASE_MSG_LINES])))
            msgs = []
            continue
        m = TAP_RE.match(line)
        if not m or not m.group(2).startswith("selftests: "):
            continue
        prog = program_name(m.group(2), prefix)
        status = tap_status(m.group(1), m.group(3))
        reason = m.group(4) or ""
        run.kselftest[prog] = len(nested) or 1
        for n, msg in nested:
            st = tap_status(n.group(1), n.group(3))
            if st == "SKIP":
                run.skipped.append("%s: %s" % (prog, n.group(2)))
            tally.add(st, "%s %s: %s" % (run.name, prog, n.group(2)),
                      n.group(4) or (msg if st == "FAIL" else ""))
        nested_failed = any(tap_status(n.group(1), n.group(3)) == "FAIL"
                            for n, _ in nested)
        if not nested or (status == "FAIL" and not nested_failed):
            if status == "SKIP" and not nested:
                run.skipped.append(prog)
            tally.add(status, "%s %s" % (run.name, prog),
                      reason or ("(exit status)" if status == "FAIL" else ""))
        nested = []
    if not run.kselftest:
        tally.add("FAIL", run.name + " kselftest", "(no kselftest results)")
    print("%s: kselftest: %d programs" % (run.name, len(run.kselftest)))


def scan_console(path, tally, run, man=None):
    """Splats and the end marker.  With a manifest's provoked, the lines
    from the first that matches it on belong to a splat the run provokes
    on purpose, last: the line must be there, and from it on only the
    splat lines the manifest names are no failures."""
    if not os.path.exists(path):
        tally.add("FAIL", run.name + " boot", "(no console.log)")
        return []
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    splats = [line for line in lines if SPLAT_RE.search(line)]
    if man is not None and man.provoked is not None:
        start = next((i for i, line in enumerate(lines)
                      if man.provoked.search(line)), None)
        if start is None:
            tally.add("FAIL", run.name + " provoked",
                      "(no console line matches '%s')" % man.provoked.pattern)
        else:
            splats = [line for i, line in enumerate(lines) if SPLAT_RE.search(line)
                      and (i < start or not man.provoked_splat.search(line))]
    for line in splats[:20]:
        tally.add("FAIL", run.name + " splat", line.strip())
    if not any(END_MARKER in line for line in lines):
        tally.add("FAIL", run.name + " boot", "(no end-of-tests marker: the VM "
                  "crashed, hung or timed out)")
    return lines


def scan_qemu(rundir, tally, run):
    status = os.path.join(rundir, "qemu.status")
    if os.path.exists(status):
        with open(status) as f:
            rc = f.read().strip()
        if rc not in ("0", "124"):
            tally.add("FAIL", run.name + " qemu", "(QEMU exited with status %s)" % rc)
    stderr = os.path.join(rundir, "qemu.stderr")
    if os.path.exists(stderr):
        with open(stderr, errors="replace") as f:
            for line in f:
                if "BTS:" in line:
                    tally.add("FAIL", run.name + " qemu", line.strip())


PLAIN_TAP_RE = re.compile(r"^(not ok|ok) \d+ (?:- )?(.*?)(?:\s+#\s*(SKIP)\b\s*(.*))?$")
PLAN_RE = re.compile(r"^1\.\.(\d+)$")


def parse_plain_tap(path, tally, run):
    """A TAP stream of its own (the machine model's test)."""
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = PLAN_RE.match(line)
            if m:
                run.plan = int(m.group(1))
                continue
            m = PLAIN_TAP_RE.match(line)
            if m:
                run.results += 1
                status = tap_status(m.group(1), m.group(3))
                if status == "SKIP":
                    run.skipped.append(m.group(2))
                tally.add(status, "%s %s" % (run.name, m.group(2)), m.group(4) or "")
    if not run.results:
        tally.add("FAIL", run.name, "(no TAP results in %s)" % path)
    elif run.plan != run.results:
        tally.add("FAIL", run.name, "(TAP plan %s, %d results in %s)" %
                  (run.plan, run.results, path))
    print("%s: %d cases (%s)" % (run.name, run.results, path))


def compare_counts(kind, want, have, only, fail):
    for name, cases in sorted(want.items()):
        if name not in have:
            if only is None or name.split("/")[-1] in only:
                fail("%s %s missing (the manifest expects %d cases)" % (kind, name, cases))
        elif have[name] != cases:
            fail("%s %s ran %d cases, the manifest expects %d" %
                 (kind, name, have[name], cases))
    for name in sorted(set(have) - set(want)):
        fail("%s %s ran (%d cases) but is not in the manifest" % (kind, name, have[name]))


def manifest_of(name):
    path = os.path.join(MANIFESTS, name)
    return Manifest(path) if os.path.exists(path) else None


def check_manifest(run, console_lines, tally, only):
    path = os.path.join(MANIFESTS, run.name)

    def fail(why):
        tally.add("FAIL", run.name + " manifest", why)

    if not os.path.exists(path):
        fail("(no manifest %s)" % path)
        return
    man = Manifest(path)
    for err in man.errors:
        fail(err)
    compare_counts("KUnit suite", man.kunit, run.kunit, None, fail)
    compare_counts("kselftest", man.kselftest, run.kselftest, only, fail)
    if man.plan is not None and man.plan != run.plan:
        fail("TAP plan %s, the manifest expects %d" % (run.plan, man.plan))
    for name in run.skipped:
        if not man.allows_skip(name):
            fail("%s skipped; the manifest allows no such skip" % name)
    for pattern, reason, matched in man.skips:
        if not matched and (only is None or pattern.startswith("kunit:")):
            fail("'%s' ran, but the manifest expects it to skip (%s)" % (pattern, reason))
    for regex in man.console:
        if not any(regex.search(line) for line in console_lines):
            fail("no console line matches '%s'" % regex.pattern)
    print("%s: checked against %s" % (run.name, path))


def option(args, name):
    return args[args.index(name) + 1] if name in args else None


def list_programs(path, args):
    """--list <manifest> [--pass P] [--only A,B]: the kselftests of a run
    (of its pass P), those of them in A,B with --only; comma-separated."""
    prefix = option(args, "--pass")
    prefix = prefix + "/" if prefix else ""
    only = option(args, "--only")
    man = Manifest(path)
    if man.errors:
        sys.exit("\n".join(man.errors))
    progs = [p[len(prefix):] for p in man.kselftest
             if (p.startswith(prefix) if prefix else "/" not in p)]
    if only is not None:
        progs = [p for p in progs if p in only.split(",")]
    print(",".join(progs))
    return 0


def check_only(only, rundirs, tally):
    """ONLY=...: every program named must be in some run's manifest."""
    known = set()
    for rundir in rundirs:
        path = os.path.join(MANIFESTS, os.path.basename(rundir.rstrip("/")))
        if os.path.exists(path):
            known.update(p.split("/")[-1] for p in Manifest(path).kselftest)
    for prog in sorted(set(only) - known):
        tally.add("FAIL", "ONLY", "%s is in no run's manifest" % prog)


def main():
    args = sys.argv[1:]
    if args and args[0] == "--list":
        return list_programs(args[1], args[2:])
    only = None
    if args and args[0] == "--only":
        only = [p for p in args[1].split(",") if p]
        args = args[2:]
    tally = Tally()
    # --failed <what>: a step before the runs failed (mk/test.py).
    while args and args[0] == "--failed":
        tally.add("FAIL", args[1])
        args = args[2:]
    src, rundirs = args[0], args[1:]
    if only is not None:
        check_only(only, rundirs, tally)
    for rundir in rundirs:
        run = Run(os.path.basename(rundir.rstrip("/")))
        if only is not None and not os.path.isdir(rundir):
            print("%s: not run (none of ONLY is in its manifest)" % run.name)
            continue
        not_run = os.path.join(rundir, "not-run")
        if os.path.exists(not_run):
            # mk/test.py: the deadline came first, or a build it needs failed.
            with open(not_run) as f:
                tally.add("FAIL", run.name, "not run: " + f.read().strip())
            continue
        tap = os.path.join(rundir, "tap.log")
        console_lines = []
        if os.path.exists(tap):
            parse_plain_tap(tap, tally, run)
        else:
            console = os.path.join(rundir, "console.log")
            scan_qemu(rundir, tally, run)
            print("%s: serial log %s" % (run.name, console))
            console_lines = scan_console(console, tally, run, manifest_of(run.name))
            if os.path.exists(console):
                parse_kunit(src, console, tally, run)
            parse_kselftest(os.path.join(rundir, "results.log"), tally, run)
        check_manifest(run, console_lines, tally, only)
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
