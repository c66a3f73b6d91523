#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Prove that mk/report.py's verdict cannot be fooled (make report-test).

    report_test.py <src>      (the assembled tree, for kunit.py)

A synthetic run that matches its manifest must pass; each of these broken
runs must fail, with the reason named in the output:
  - the model without BTS: "ds: BTS absent" on the console and the
    hardware KUnit cases skipping;
  - a KUnit suite left out;
  - a kselftest case that skips;
  - a kselftest program that did not run;
  - fewer cases than the manifest says;
  - a stale KUnit JSON beside a console whose KUnit output is gone;
  - a kunit.py that cannot parse the stream;
  - a TAP stream whose plan does not count its results;
  - an XFAIL, which no manifest can see;
  - a failed KUnit case, named with its first expectation (where, what);
  - a failed kselftest case, named with its harness's first messages;
  - a kernel splat in the middle of a line of test output;
  - a first-pass program whose cases would count for the second pass;
  - ONLY= naming a program that is in no manifest;
  - a run that provokes a splat on purpose (the manifest's "provoked"):
    a splat before it, the provoking line missing, and another splat or a
    timeout after it;
and with ONLY=, a program not named may be missing, and the provoked splat
itself does not fail its run.
"""

import os
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(TOP, "mk", "report.py")

MANIFEST = """\
console ds: BTS available
kunit hw 2
kunit sim 1
kselftest x86:prog_64 2
kselftest x86:plain_64 1
kselftest emu/x86:prog_64 2
skip kunit:sim.needs_nothing_else -- allowed for the test of the test
"""

KUNIT = """\
KTAP version 1
1..2
    KTAP version 1
    # Subtest: hw
    1..2
    ok 1 records_branches
    ok 2 records_user_only
ok 1 hw
    KTAP version 1
    # Subtest: sim
    1..1
    ok 1 needs_nothing_else # SKIP allowed
ok 2 sim
"""

KSELFTEST = """\
TAP version 13
1..2
# selftests: x86: prog_64
# ok 1 bts.one
# ok 2 bts.two
ok 1 selftests: x86: prog_64
# selftests: x86: plain_64
ok 2 selftests: x86: plain_64
==== KSELFTEST PASS emu ====
TAP version 13
1..1
# selftests: x86: prog_64
# ok 1 bts.one
# ok 2 bts.two
ok 1 selftests: x86: prog_64
"""

MODEL_TAP = "TAP version 13\nok 1 - a\nok 2 - b\n1..2\n"


def console(kunit=KUNIT, ds="ds: BTS available, PEBS absent"):
    return ("[    0.1] Command line: console=ttyS0\n[    0.2] %s\n%s"
            "==== KSELFTEST BEGIN ====\n==== KSELFTEST END ====\n"
            "==== END OF TESTS ====\n" % (ds, kunit))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Case:
    def __init__(self, root, name):
        self.dir = os.path.join(root, name)
        self.mdir = os.path.join(root, name + ".manifests")
        os.makedirs(self.dir)
        os.makedirs(self.mdir)
        write(os.path.join(self.mdir, name), MANIFEST)
        write(os.path.join(self.dir, "console.log"), console())
        write(os.path.join(self.dir, "results.log"), KSELFTEST)

    def run(self, src, *extra):
        env = dict(os.environ, REPORT_MANIFESTS=self.mdir)
        res = subprocess.run([sys.executable, REPORT] + list(extra) + [src, self.dir],
                             env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        return res.returncode, res.stdout


def main():
    src = sys.argv[1]
    root = tempfile.mkdtemp(prefix="report-test.")
    failures = 0

    def expect(name, mutate, want_fail, needle, *extra):
        nonlocal failures
        case = Case(root, name)
        mutate(case)
        rc, out = case.run(src, *extra)
        ok = (rc != 0) == want_fail and needle in out
        print("%s %s" % ("ok" if ok else "not ok", name))
        if not ok:
            failures += 1
            print("".join("#   " + line + "\n" for line in out.splitlines()[-12:]), end="")

    def no_bts(case):
        kunit = KUNIT.replace("ok 1 records_branches", "ok 1 records_branches # SKIP no BTS")
        kunit = kunit.replace("ok 2 records_user_only", "ok 2 records_user_only # SKIP no BTS")
        write(os.path.join(case.dir, "console.log"),
              console(kunit, "ds: BTS absent, PEBS absent"))

    def suite_left_out(case):
        kunit = KUNIT.replace("1..2\n", "1..1\n", 1)
        kunit = kunit[:kunit.index("    KTAP version 1\n    # Subtest: sim")]
        write(os.path.join(case.dir, "console.log"), console(kunit))

    def selftest_skips(case):
        write(os.path.join(case.dir, "results.log"),
              KSELFTEST.replace("# ok 2 bts.two", "# ok 2 bts.two # SKIP no records", 1))

    def program_missing(case):
        text = KSELFTEST.replace("# selftests: x86: plain_64\nok 2 selftests: x86: plain_64\n", "")
        write(os.path.join(case.dir, "results.log"), text)

    def fewer_cases(case):
        text = KSELFTEST.replace("# ok 2 bts.two\n", "", 1)
        write(os.path.join(case.dir, "results.log"), text)

    def stale_json(case):
        # A good run's verdict, then a console whose boot lost its KUnit.
        Case.run(case, src)
        write(os.path.join(case.dir, "console.log"), console(kunit=""))

    def unparsable(case):
        write(os.path.join(case.dir, "console.log"),
              console(KUNIT.replace("    1..2\n", "    1..3\n", 1)))

    def bad_plan(case):
        os.unlink(os.path.join(case.dir, "console.log"))
        os.unlink(os.path.join(case.dir, "results.log"))
        write(os.path.join(case.dir, "tap.log"), MODEL_TAP.replace("1..2", "1..3"))
        write(os.path.join(case.mdir, os.path.basename(case.dir)), "plan 3\n")

    expect("good", lambda case: None, False, "7 passed, 0 failed, 1 skipped")
    expect("no_bts", no_bts, True, "no console line matches 'ds: BTS available'")
    expect("suite_left_out", suite_left_out, True, "KUnit suite sim missing")
    expect("selftest_skips", selftest_skips, True,
           "x86:prog_64: bts.two skipped; the manifest allows no such skip")
    expect("program_missing", program_missing, True, "kselftest x86:plain_64 missing")
    expect("fewer_cases", fewer_cases, True, "kselftest x86:prog_64 ran 1 cases, the manifest expects 2")
    expect("stale_json", stale_json, True, "no KUnit cases found")
    expect("unparsable", unparsable, True, "KUnit suite hw ran")
    expect("bad_plan", bad_plan, True, "TAP plan 3, 2 results")

    def xfail(case):
        write(os.path.join(case.dir, "results.log"),
              KSELFTEST.replace("# ok 2 bts.two", "# ok 2 bts.two # XFAIL known broken", 1))

    def splat_mid_line(case):
        text = console().replace("==== KSELFTEST END ====",
                                 "# [OK] fineBUG: sleeping function called from invalid context\n"
                                 "==== KSELFTEST END ====")
        write(os.path.join(case.dir, "console.log"), text)

    def emu_pass_lost(case):
        # The first pass's last program never reported: its cases must not
        # count for the second pass.
        text = KSELFTEST.replace("ok 1 selftests: x86: prog_64\n# selftests: x86: plain_64\n"
                                 "ok 2 selftests: x86: plain_64\n", "", 1)
        write(os.path.join(case.dir, "results.log"), text)

    provoking = "vm: provoking HARDLOCKUP on cpu 1 through lkdtm\n"
    lockup = provoking + "Watchdog detected hard LOCKUP on cpu 1\nCall Trace:\n"

    def provoked(early_splat="", marker=provoking):
        def mutate(case):
            manifest = os.path.join(case.mdir, os.path.basename(case.dir))
            with open(manifest, "a") as f:
                f.write("provoked ^vm: provoking HARDLOCKUP on cpu 1 through lkdtm$"
                        " -- ^Call Trace:$|^Watchdog detected hard LOCKUP on cpu 1$\n"
                        "console ^Watchdog detected hard LOCKUP on cpu 1$\n")
            text = console().replace("==== KSELFTEST END ====\n",
                                     "==== KSELFTEST END ====\n" + early_splat +
                                     lockup.replace(provoking, marker))
            write(os.path.join(case.dir, "console.log"), text)
        return mutate

    expect("provoked", provoked(), False, "7 passed, 0 failed, 1 skipped")
    expect("provoked_after_splat", provoked("WARNING: CPU: 0 PID: 1 at x\n"), True,
           "splat WARNING: CPU: 0 PID: 1")
    expect("provoked_missing", provoked(marker=""), True,
           "provoked (no console line matches '^vm: provoking HARDLOCKUP")
    # What follows the provoking line is not all forgiven: another splat
    # (an oops while the run waits) or the host's timeout still fails.
    expect("provoked_then_oops", provoked(marker=provoking + "Oops: 0000\n"), True,
           "splat Oops: 0000")
    # The watchdog's report is a splat: before the marker, or of another
    # CPU, it fails the run.
    expect("provoked_early_lockup", provoked("Watchdog detected hard LOCKUP on cpu 1\n"),
           True, "splat Watchdog detected hard LOCKUP on cpu 1")
    expect("provoked_other_cpu", provoked(marker=provoking +
                                          "Watchdog detected hard LOCKUP on cpu 0\n"),
           True, "splat Watchdog detected hard LOCKUP on cpu 0")
    expect("provoked_then_timeout", provoked(marker=provoking + "vm: TIMEOUT after 9s\n"),
           True, "splat vm: TIMEOUT")
    def kunit_fails(case):
        write(os.path.join(case.dir, "console.log"), console(KUNIT.replace(
            "    ok 2 records_user_only\n",
            "    # records_user_only: EXPECTATION FAILED at ds_kunit.c:12\n"
            "    Expected count == 0, but\n"
            "        count == 3 (0x3)\n"
            "    not ok 2 records_user_only\n", 1).replace("ok 1 hw", "not ok 1 hw", 1)))

    expect("kunit_fails", kunit_fails, True,
           "kunit hw.records_user_only EXPECTATION FAILED at ds_kunit.c:12 | "
           "Expected count == 0, but | count == 3 (0x3)")

    def selftest_fails(case):
        write(os.path.join(case.dir, "results.log"), KSELFTEST.replace(
            "# ok 2 bts.two",
            "# #  RUN           bts.two ...\n"
            "# # prog.c:200:two:Expected 3 (3) <= n (2)\n"
            "# # prog.c:201:two:next 7\n"
            "# # two: Test terminated by timeout\n"
            "# #            FAIL  bts.two\n"
            "# not ok 2 bts.two", 1).replace(
            "ok 1 selftests: x86: prog_64", "not ok 1 selftests: x86: prog_64", 1))

    expect("selftest_fails", selftest_fails, True,
           "x86:prog_64: bts.two prog.c:200:two:Expected 3 (3) <= n (2) | "
           "prog.c:201:two:next 7 | two: Test terminated by timeout")
    expect("xfail", xfail, True, "bts.two")
    expect("splat_mid_line", splat_mid_line, True, "splat # [OK] fineBUG: sleeping")
    expect("emu_pass_lost", emu_pass_lost, True, "kselftest x86:prog_64 missing")
    expect("only_partial", lambda case: program_missing(case), False,
           "0 failed", "--only", "x86:prog_64")
    expect("only_typo", lambda case: None, True,
           "x86:nope_64 is in no run's manifest", "--only", "x86:prog_64,x86:nope_64")
    shutil.rmtree(root)
    print("report-test: %s" % ("all ok" if not failures else "%d FAILED" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
