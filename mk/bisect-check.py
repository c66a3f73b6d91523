#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make bisect-check: every prefix of the series builds, and boots at group ends.

The commits of build/src (make tree) are checked out one at a time in a git
worktree, build/bisect/src, so that only the files that differ from the
previous prefix get new mtimes and each build is incremental.  For every
prefix, three configs build a full vmlinux (and modules where the config has
them) at W=1, through ccache, under /tmp/kbuild.lock, each in its own object
tree under build/bisect/; make -k, so that a failed prefix names all its
errors and leaves every other object built for the next prefix:

  x86_64  vm/kernel.config                      (X86_DS=y, the test config)
  nods    vm/kernel.config + vm/no-ds.config    (X86_DS=n)
  i386    vm/kernel.config + vm/i386.config     (X86_DS=y)

A prefix fails on a build error or on a W=1 warning in a file the series adds
or changes up to that prefix.  A prefix whose entry changes no file kbuild
reads (tools/, Documentation/, MAINTAINERS ...) is skipped.  At the end of a
group (a "# group: <name>" line in patches/series) the x86_64 kernel boots in
QEMU (TCG) with an initramfs that only powers off: every KUnit suite in the
console log must pass and the log must hold no kernel splat (mk/report.py's
patterns).

Environment: FROM=N starts at entry N, TO=N stops after it, KEEP_GOING=1 goes
on after a failed prefix, JOBS (default 2), BUILDS=x86_64,nods,i386 picks
builds.  Logs: build/bisect/logs/<NNNN>-<build>.log.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "mk"))
import series  # noqa: E402
from report import SPLAT_RE  # noqa: E402

BUILD = series.BUILD
SRC = series.SRC
BIS = os.path.join(BUILD, "bisect")
WT = os.path.join(BIS, "src")
LOGS = os.path.join(BIS, "logs")
JOBS = os.environ.get("JOBS") or "2"
KCC = "ccache gcc" if subprocess.run(["sh", "-c", "command -v ccache"],
                                     stdout=subprocess.DEVNULL).returncode == 0 \
    else "gcc"
VM = os.path.join(TOP, "vm")
BUILDS = [
    ("x86_64", "x86_64", [os.path.join(VM, "kernel.config")]),
    ("nods", "x86_64", [os.path.join(VM, "kernel.config"),
                        os.path.join(VM, "no-ds.config")]),
    ("i386", "i386", [os.path.join(VM, "kernel.config"),
                      os.path.join(VM, "i386.config")]),
]
# What kbuild never reads: an entry that changes only these builds nothing new.
NOT_KERNEL = re.compile(r"^(tools/|Documentation/|LICENSES/|MAINTAINERS$|"
                        r"CREDITS$|README$|\.mailmap$|.*\.gitignore$|"
                        r"scripts/checkpatch\.pl$|scripts/spelling\.txt$)")
# A compiler or linker finding: path:line[:col]: warning|error
FINDING_RE = re.compile(r"^(\S+?):(\d+):(?:\d+:)?\s*(warning|error):")
PLAN_RE = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?1\.\.(\d+)\s*$")
SUITE_RE = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?(not ok|ok) \d+ (\S+)(.*)$")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def git(*args, cwd=SRC):
    res = run(["git", *args], cwd=cwd)
    if res.returncode:
        raise SystemExit("bisect-check: git %s failed:\n%s" %
                         (" ".join(args), res.stdout))
    return res.stdout


def mmss(sec):
    return "%d:%02d" % (sec // 60, sec % 60)


def checkout(commit):
    if os.path.isdir(WT) and run(["git", "rev-parse", "--git-dir"],
                                 cwd=WT).returncode:
        # build/src was unpacked afresh (make base): the worktree is stale
        subprocess.run(["rm", "-rf", WT], check=True)
    if not os.path.isdir(WT):
        os.makedirs(BIS, exist_ok=True)
        run(["git", "worktree", "prune"], cwd=SRC)
        git("worktree", "add", "-q", "--detach", WT, commit)
    else:
        # only the files that differ are rewritten (mtimes of the rest stay)
        git("checkout", "-q", "--detach", "-f", commit, cwd=WT)
        git("clean", "-fdq", cwd=WT)


def kernel_paths(paths):
    return [p for p in paths if not NOT_KERNEL.match(p)]


def defined_in_tree(sym):
    """Whether a Kconfig symbol exists in this prefix (an option the series
    adds later is no failure of an early prefix)."""
    res = run(["git", "grep", "-qE", r"^\s*(menu)?config %s\s*$" % sym,
               "--", "*Kconfig*"], cwd=WT)
    return res.returncode == 0


def configure(name, arch, frags, obj, log):
    res = run([os.path.join(TOP, "mk", "kconfig.sh"), WT, obj, *frags],
              env=dict(os.environ, ARCH=arch))
    with open(log, "a") as f:
        f.write(res.stdout)
    if res.returncode == 0:
        return None
    missing = re.findall(r"kconfig: requested CONFIG_(\w+)=\S* but", res.stdout)
    if not missing or "kconfig: requested" not in res.stdout:
        return "config failed"
    real = [s for s in missing if defined_in_tree(s)]
    if real:
        return "config: %s not as requested" % ", ".join(real)
    return None


# kernel-doc's findings in the base version of a file, by message: W=1 runs
# kernel-doc over every file it compiles, so a file the series touches shows
# the warnings upstream left in it (arch/x86/entry/common.c has one).
_base_kdoc = {}


def base_kdoc_messages(rel):
    if rel not in _base_kdoc:
        res = run(["git", "show", "base:" + rel], cwd=SRC)
        msgs = set()
        if res.returncode == 0:
            with tempfile.NamedTemporaryFile("w", suffix=os.path.splitext(rel)[1]) as f:
                f.write(res.stdout)
                f.flush()
                kd = run(["perl", os.path.join(WT, "scripts/kernel-doc"),
                          "-none", "-Wall", f.name])
                for line in kd.stdout.splitlines():
                    m = re.match(r"^\S+?:\d+: (warning|error): (.*)$", line)
                    if m:
                        msgs.add(m.group(2).strip())
        _base_kdoc[rel] = msgs
    return _base_kdoc[rel]


def findings(log, touched, obj):
    out = []
    with open(log, errors="replace") as f:
        for line in f:
            m = FINDING_RE.match(line)
            if not m:
                continue
            path = m.group(1)
            full = os.path.normpath(os.path.join(obj, path))
            rel = os.path.relpath(full, WT) if full.startswith(WT + "/") \
                else path
            if rel not in touched:
                continue
            # A kernel-doc finding (no column) the base has too is not ours.
            k = re.match(r"^\S+?:\d+: (?:warning|error): (.*)$", line)
            if k and k.group(1).strip() in base_kdoc_messages(rel):
                continue
            out.append(line.rstrip().replace(WT + "/", ""))
    return out


def build(name, arch, frags, prefix, touched, kconfig_changed, boot):
    obj = os.path.join(BIS, "obj-" + name)
    log = os.path.join(LOGS, "%04d-%s.log" % (prefix, name))
    open(log, "w").close()
    start = time.time()
    if kconfig_changed or not os.path.isfile(os.path.join(obj, ".config")):
        why = configure(name, arch, frags, obj, log)
        if why:
            return False, why, time.time() - start, 0.0
    with open(os.path.join(obj, ".config")) as f:
        modules = "CONFIG_MODULES=y\n" in f.read()
    targets = ["bzImage" if boot else "vmlinux"] + (["modules"] if modules
                                                    else [])
    cmd = ["flock", "/tmp/kbuild.lock", "sh", "-c",
           'echo "locked $(date +%s.%N)" >&2; exec "$@"', "sh",
           "make", "-s", "-k", "-C", WT, "O=" + obj, "ARCH=" + arch,
           "-j" + JOBS,
           "W=1", "CC=" + KCC, "HOSTCC=" + KCC, *targets]
    with open(log, "a") as f:
        res = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)
    end = time.time()
    locked = start
    with open(log, errors="replace") as f:
        m = re.search(r"^locked (\d+\.\d+)$", f.read(), re.M)
        if m:
            locked = float(m.group(1))
    ours = findings(log, touched, obj)
    if res.returncode:
        errs = ours or [l.rstrip() for l in open(log, errors="replace")
                        if "error" in l.lower()][:5]
        return False, "build error:\n      " + "\n      ".join(errs[:10]), \
            end - start, locked - start
    if ours:
        return False, "W=1 findings in the series' files:\n      " + \
            "\n      ".join(ours[:20]), end - start, locked - start
    return True, "ok", end - start, locked - start


def make_initramfs(path):
    root = path + ".d"
    subprocess.run(["rm", "-rf", root], check=True)
    os.makedirs(os.path.join(root, "bin"))
    for d in ("proc", "sys", "dev"):
        os.makedirs(os.path.join(root, d))
    subprocess.run(["cp", "/bin/busybox", os.path.join(root, "bin/busybox")],
                   check=True)
    os.symlink("busybox", os.path.join(root, "bin/sh"))
    with open(os.path.join(root, "init"), "w") as f:
        # The KUnit suites are built in and ran before init.
        f.write("#!/bin/sh\n/bin/busybox echo '==== bisect-check: init "
                "reached ===='\n/bin/busybox poweroff -f\n")
    os.chmod(os.path.join(root, "init"), 0o755)
    subprocess.run("cd '%s' && find . | LC_ALL=C sort | cpio --quiet -o -H "
                   "newc -R 0:0 | gzip -1 > '%s'" % (root, path), shell=True,
                   check=True)
    subprocess.run(["rm", "-rf", root], check=True)


def boot(prefix, group, kernel=None):
    kernel = kernel or os.path.join(BIS, "obj-x86_64", "arch/x86/boot/bzImage")
    initrd = os.path.join(BIS, "initramfs.cpio.gz")
    if not os.path.isfile(initrd):
        make_initramfs(initrd)
    logdir = os.path.join(LOGS, "%04d-boot" % prefix)
    start = time.time()
    run([os.path.join(TOP, "mk", "vm.sh"), "test", kernel, initrd, logdir],
        env=dict(os.environ, VM_TIMEOUT=os.environ.get("BOOT_TIMEOUT", "900")))
    took = time.time() - start
    try:
        with open(os.path.join(logdir, "console.log"), errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return False, "no console log", took
    problems = []
    suites = {}
    for line in lines:
        m = SUITE_RE.match(line)
        if m:
            suites[m.group(2)] = (m.group(1), m.group(3))
    failed = [s for s, (v, _) in suites.items() if v == "not ok"]
    if failed:
        problems.append("KUnit suites failed: " + ", ".join(failed))
    if not suites:
        problems.append("no KUnit suite result in the console log")
    plans = [int(m.group(1)) for m in map(PLAN_RE.match, lines) if m]
    if plans and len(suites) < plans[0]:
        problems.append("%d of %d KUnit suites reported" %
                        (len(suites), plans[0]))
    splats = [l.strip() for l in lines if SPLAT_RE.search(l)]
    if splats:
        problems.append("kernel splat:\n      " + "\n      ".join(splats[:10]))
    if not any("bisect-check: init reached" in l for l in lines):
        problems.append("init never reached (crash or hang)")
    if problems:
        return False, "; ".join(problems) + " (log: %s)" % logdir, took
    return True, "%d KUnit suites passed" % len(suites), took


def main():
    names = series.read_series_names()
    head = series.recorded_head()
    if not head:
        raise SystemExit("bisect-check: no assembled tree: run 'make tree'")
    chain = git("rev-list", "--reverse", "base.." + head).split()
    if len(chain) != len(names):
        raise SystemExit("bisect-check: build/src does not match "
                         "patches/series: run 'make tree'")
    first = int(os.environ.get("FROM") or 1)
    last = int(os.environ.get("TO") or len(chain))
    keep_going = os.environ.get("KEEP_GOING") not in (None, "", "0")
    pick = (os.environ.get("BUILDS") or "").split(",")
    builds = [b for b in BUILDS if not pick[0] or b[0] in pick]
    os.makedirs(LOGS, exist_ok=True)
    base = git("rev-parse", "base^{commit}").strip()
    results = []
    failures = []
    total = time.time()
    prev = None
    for n in range(first, last + 1):
        commit, (name, group) = chain[n - 1], names[n - 1]
        parent = chain[n - 2] if n > 1 else base
        checkout(commit)
        changed = git("diff", "--name-only", "--no-renames", parent,
                      commit).split()
        touched = set(git("diff", "--name-only", "--no-renames", base,
                          commit).split())
        # what changed since the objects were last built (FROM= jumps)
        since = git("diff", "--name-only", "--no-renames", prev or base,
                    commit).split()
        kconfig_changed = prev is None or any(
            "Kconfig" in os.path.basename(p) for p in since)
        prev = commit
        print("bisect-check: %04d %s%s" % (n, name,
                                            " [end of group %s]" % group
                                            if group else ""), flush=True)
        if not kernel_paths(changed) and not group:
            print("  %04d %-7s skipped (no kernel source)" % (n, "all"),
                  flush=True)
            results.append((n, "all", "skipped", 0))
            continue
        ok_prefix = True
        for bname, arch, frags in builds:
            ok, why, took, waited = build(bname, arch, frags, n, touched,
                                          kconfig_changed,
                                          boot=bool(group) and
                                          bname == "x86_64")
            wait = " (+%s waiting for the lock)" % mmss(waited) \
                if waited >= 5 else ""
            print("  %04d %-7s %-6s %s%s%s" % (
                n, bname, "ok" if ok else "FAILED", mmss(took - waited), wait,
                "" if ok else "  " + why), flush=True)
            results.append((n, bname, "ok" if ok else "FAILED", took - waited))
            if not ok:
                ok_prefix = False
                failures.append("%04d %s: %s" % (n, bname, why.split("\n")[0]))
        if group and ok_prefix and any(b[0] == "x86_64" for b in builds):
            ok, why, took = boot(n, group)
            print("  %04d %-7s %-6s %s  %s" % (n, "boot", "ok" if ok
                                               else "FAILED", mmss(took), why),
                  flush=True)
            results.append((n, "boot", "ok" if ok else "FAILED", took))
            if not ok:
                ok_prefix = False
                failures.append("%04d boot (group %s): %s" % (n, group, why))
        if not ok_prefix and not keep_going:
            print("bisect-check: stopping at the first failed prefix "
                  "(KEEP_GOING=1 goes on)")
            break
    built = [r for r in results if r[2] != "skipped"]
    print("bisect-check: %d prefixes, %d builds/boots, %d skipped, "
          "%d failed, %s wall" % (len(set(r[0] for r in results)), len(built),
                                  len(results) - len(built), len(failures),
                                  mmss(time.time() - total)))
    for f in failures:
        print("  FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
