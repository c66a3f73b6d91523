#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make test: build what the runs need, boot the runs, give one verdict.

    test.py [--runs a,b] [--deadline EPOCH] [--lanes N]

Every step is a job with the jobs it needs (a kernel, QEMU, an initramfs),
started as soon as those are done, within the host's two cores:
  - one build at a time (a kernel, QEMU, the selftests: each runs -j2);
  - up to --lanes VMs (default 2: a TCG run keeps about one host core
    busy), and no more than one beside a build;
  - fetches and small steps (an initramfs, the package downloads) at once.
Priorities order the builds (the test kernel, wanted by nine runs, then
the selftests and the model's QEMU) and start the longest runs first; a
run whose initramfs is seconds away is waited for before a shorter one.

The deadline (DEADLINE=<epoch seconds>, which .ci/run sets) bounds the
whole: a VM run's timeout is the smaller of its bound (BOUND_FACTOR times
the time its manifest says it takes, plus BOUND_SLACK) and the time left
(the model's own test has its timeouts, mk/qemu-test.sh). When
the deadline comes, what still runs is stopped, and the runs that never
booted are written down as not run, by name: mk/report.py fails them.

Then the time table (every job: when it started, its wall and CPU time,
the ccache hits of a build) and the totals, and last mk/report.py's
verdict, whose last line is "N passed, N failed, N skipped".

The environment carries make's options: ONLY, VM_APPEND, PROVOKE (WHAT,
or WHAT@run,run to provoke only in those runs), RUNS, LANES, FUZZ_BLOCKS
(ptrace_bts_fuzz's blocks per case, "emulated,hardware"; make soak).
"""

import os
import resource
import shlex
import signal
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
LOGS = os.path.join(BUILD, "logs")
JOBLOGS = os.path.join(LOGS, "jobs")
MAKE0 = [os.environ.get("MAKE", "make"), "-s", "--no-print-directory", "-C", TOP]
# Once deps, base and tree are done, no job runs them again (Makefile).
MAKE = MAKE0 + ["TREE_DONE=1"]

# A run's timeout: BOUND_FACTOR x its measured time + BOUND_SLACK seconds.
# The times were measured with a build or a second VM beside each run; a
# later 2-core machine ran 'stress' in 365 s against its 140 (2.6x), so
# 3x, and the deadline still bounds the whole.
BOUND_FACTOR = 3
BOUND_SLACK = 120
# A kselftest's own timeout in the guest (run_kselftest.sh -o): longer
# than the 300 s of a VM alone, since a build or a VM shares the host,
# and shorter than the run's timeout.
KSFT_TIMEOUT = 600
# Left at the deadline for stopping what runs and writing the verdict.
DEADLINE_RESERVE = 60
# Stopped jobs get SIGTERM, then SIGKILL this many seconds later.
STOP_GRACE = 10
CORES = 2

# The BTS machine model: Debian's QEMU 7.2 patched (vm/qemu/), with a
# GenuineIntel CPU stripped of what TCG lacks.
QEMU_BTS = os.path.join(BUILD, "qemu", "qemu-system-x86_64")
BTS_CPU = ("Skylake-Client,-pcid,-x2apic,-tsc-deadline,-hle,-rtm,-invpcid,"
           "-rdseed,-3dnowprefetch,-xsavec,bts=on")
# The same with a stand-in architectural PMU, so that perf's Intel driver
# loads: perf and ptrace sharing the Debug Store.
PMU_CPU = BTS_CPU + ",arch-pmu=on"
# The other readings of what the SDM leaves open (vm/qemu/README.md,
# "Evidence"): the BTS suites must pass under each.
BTS_ALT_CPU = BTS_CPU + (",bts-cpl=target,pmi-skid=64,pmi-late=on,"
                         "bts-trap-from=insn,bts-threshold=store")
PMU_ALT_CPU = PMU_CPU + ",bts-cpl=either,pmi-skid=160,bts-threshold=cross"

# ptrace_bts_fuzz's blocks per case (it runs four): in 'tcg' untraced and
# emulated, in 'bts' untraced, on the hardware and emulated. The first
# blocks of each seed are always the same ones: make test covers a third
# and two fifths of the blocks it covered before (1,500 and 1,000 per
# case), and make soak (FUZZ_BLOCKS=3000,1000: emulated, hardware) twice
# and as many, without the runs' bounds. A case may take 300 s.
FUZZ = {"fuzz_emu": 500, "fuzz_hw": 400}
HW = "ds.meltdown_kernel=1"
EMU = ""
# The fuzzer's blocks per case, through kselftest's runner
FUZZ_ARGS = "vm.env=KSELFTEST_PTRACE_BTS_FUZZ_64_ARGS=--case-blocks=%s"
NOEMU = "ds.emulation=0"
# The Debug Store sample (samples/ds/): vm/init loads the test kernel's
# module over a workload and the manifest checks its report. The run's
# initramfs carries the module, so it waits for the test kernel.
SAMPLE = "vm.sample=1"

# The kernels: make target, bzImage.
KERNELS = {
    "kernel": "obj",                 # the test config
    "i386-kernel": "obj-i386-test",  # the same as an i386 kernel
    "nods-kernel": "obj-nods",       # without X86_DS
    "stress-kernel": "obj-stress",   # with KASAN, fault injection, memcg
}

# The runs (vm/expected/<run> says what each proves): kernel, machine
# (None: stock QEMU, -cpu max), kernel arguments, extra environment.
RUNS = [
    # the emulated backend
    ("tcg", "kernel", None, FUZZ_ARGS % "%(fuzz_emu)d" + " " + SAMPLE, {}),
    # the hardware backend, then the ptrace_bts_* programs again with
    # ds.force_emulation=1
    ("bts", "kernel", BTS_CPU, HW + " " + FUZZ_ARGS % "%(fuzz_hw)d" + " " + SAMPLE,
     {}),
    # perf and ptrace sharing the Debug Store
    ("pmu", "kernel", PMU_CPU, HW, {}),
    # bts and pmu under the model's other readings of the SDM
    ("bts-alt", "kernel", BTS_ALT_CPU, HW, {}),
    ("pmu-alt", "kernel", PMU_ALT_CPU, HW, {}),
    # a default Intel machine with the NMI watchdog on: no false report,
    # then a hard lockup provoked and reported (the stuck CPU's RCU stall
    # report, after rcu_cpu_stall_timeout, must not come first)
    ("watchdog", "kernel", PMU_CPU, HW + " vm.lockup=1 rcupdate.rcu_cpu_stall_timeout=100"
     " kunit.filter_glob=x86_ds_hw", {"VM_WATCHDOG": "nmi_watchdog=1"}),
    # kexec into the same kernel while a hardware trace records: the new
    # kernel finds the Debug Store clear
    ("kexec", "kernel", PMU_CPU, HW + " vm.kexec=1 kunit.filter_glob=x86_ds_hw", {}),
    # the 32-bit kernel and userspace
    ("i386", "i386-kernel", None, EMU, {}),
    # without X86_DS every request is EIO
    ("nods", "nods-kernel", None, "", {}),
    # without the emulated backend (ds.emulation=0 keeps it from registering,
    # as a kernel built without it has none): EOPNOTSUPP; with perf holding
    # BTS: EBUSY. make check builds X86_DS_EMULATE=n (mk/builds.sh).
    ("noemu", "kernel", None, NOEMU, {}),
    ("busy", "kernel", PMU_CPU, NOEMU + " ds.meltdown_kernel=1", {}),
    # hostile use: ptrace_bts_hostile and the x86_ds_stress KUnit suite
    ("stress", "stress-kernel", None, EMU, {}),
    ("stress-bts", "stress-kernel", BTS_CPU, HW, {}),
]
RUN_NAMES = [r[0] for r in RUNS] + ["model", "gdbcheck"]


class Job:
    def __init__(self, name, cmd, needs=(), kind="light", prio=50, env=None,
                 phase=None):
        self.name = name
        self.cmd = cmd
        self.needs = list(needs)
        self.kind = kind            # "build", "vm" or "light"
        self.prio = prio            # lower starts first
        self.env = env or {}
        self.phase = phase or name
        self.proc = None
        self.start = self.end = None
        self.cpu = 0.0
        self.status = None          # "ok", "failed", "not run: why", "stopped"
        self.ccache = None
        self.run = None             # the run's name, for a VM job
        self.timeout = None

    @property
    def log(self):
        return os.path.join(JOBLOGS, self.name + ".log")


def manifest_time(run):
    """The run's measured time, from its manifest's "time <s>" line."""
    path = os.path.join(TOP, "vm", "expected", run)
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if len(words) == 2 and words[0] == "time":
                return int(words[1])
    sys.exit("test: %s has no 'time <seconds>' line" % path)


def manifest_list(run, only, emu=False):
    cmd = ["python3", os.path.join(TOP, "mk", "report.py"), "--list",
           os.path.join(TOP, "vm", "expected", run)]
    if emu:
        cmd += ["--pass", "emu"]
    if only is not None:
        cmd += ["--only", only]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [p for p in out.strip().split(",") if p]


def provoke_for(run):
    what = os.environ.get("PROVOKE", "")
    if "@" in what:
        what, _, runs = what.partition("@")
        if run not in runs.split(","):
            return ""
    return what


def make_jobs(runs, only):
    jobs = {}

    def add(job):
        jobs[job.name] = job
        return job

    add(Job("deps", MAKE0 + ["deps"], prio=0))
    add(Job("tree", MAKE0 + ["tree"], ["deps"], prio=0, phase="base, tree"))
    add(Job("checks", MAKE + ["test-checks"], ["tree"], prio=60,
            phase="report-test, ds-owner-check, kdoc-check"))
    # Builds, in the order they are wanted: the test kernel serves nine
    # runs, QEMU six of them and more; the selftests every run.
    order = ["kernel", "selftests", "qemu", "stress-kernel", "i386-kernel",
             "nods-kernel"]
    progs, emu = {}, {}
    for name, *_ in RUNS:
        if name in runs:
            progs[name] = manifest_list(name, only)
            emu[name] = manifest_list(name, only, emu=True)
    # With ONLY=, a run whose manifest has none of them does not boot.
    runs = [r for r in runs if r in ("model", "gdbcheck") or progs[r] or only is None]
    wanted = set()
    for name, kernel, cpu, _, _ in RUNS:
        if name in runs:
            wanted.add(kernel)
            if cpu:
                wanted.add("qemu")
    if "model" in runs:
        wanted.add("qemu")
    if "gdbcheck" in runs:
        wanted.add("kernel")
    for kernel in KERNELS:
        if kernel in wanted:
            add(Job(kernel, MAKE + [kernel], ["tree"], "build", 10 + order.index(kernel),
                    phase="test kernel" if kernel == "kernel" else
                    kernel.replace("-", " ")))
    add(Job("selftests", MAKE + ["selftests", "tools"], ["tree"], "build",
            10 + order.index("selftests"), phase="selftests, tools"))
    if "qemu" in wanted:
        # It installs the build's packages: not beside base's apt-get.
        add(Job("qemu-fetch", ["env", "QEMU_PREPARE_ONLY=1", os.path.join(TOP, "mk", "qemu.sh")],
                ["tree"], prio=5, phase="QEMU source, packages"))
        add(Job("qemu", MAKE + ["qemu"], ["qemu-fetch", "deps"], "build",
                10 + order.index("qemu"), phase="QEMU model build"))
    if "gdbcheck" in runs or \
            any(p.startswith(("gdb:", "bench:")) for r in runs if r in progs for p in progs[r]):
        # The package download and the build's packages first, beside
        # the kernel build, as for QEMU.
        add(Job("gdb-fetch", ["env", "GDB_PREPARE_ONLY=1", os.path.join(TOP, "mk", "gdb.sh")],
                ["tree"], prio=5, phase="gdb source, packages"))
        add(Job("gdb", MAKE + ["gdb"], ["gdb-fetch", "deps"], "build",
                10 + len(order), phase="gdb build"))
    if "i386" in runs:
        add(Job("busybox32", [os.path.join(TOP, "mk", "busybox32.sh"),
                              os.path.join(BUILD, "busybox32")], ["deps"], prio=5))

    timed = sorted(runs, key=lambda r: -manifest_time(r))
    for name, kernel, cpu, append, env in RUNS:
        if name not in runs:
            continue
        sample = SAMPLE in append.split()
        needs = ["selftests"] + (["busybox32"] if name == "i386" else []) + \
            (["gdb"] if any(p.startswith(("gdb:", "bench:")) for p in progs[name]) else []) + \
            (["kernel"] if name == "kexec" or sample else [])
        add(Job("initramfs-" + name, MAKE + ["run-initramfs", "RUN=" + name,
                                             "RUN_PROGS=" + ",".join(
                                                 progs[name] + [p for p in emu[name]
                                                                if p not in progs[name]])] +
                (["SAMPLE=1"] if sample else []),
                needs, prio=40, phase="initramfs " + name))
        fuzz = dict(FUZZ)
        if os.environ.get("FUZZ_BLOCKS"):
            blocks = [int(n) for n in os.environ["FUZZ_BLOCKS"].split(",")]
            fuzz = {"fuzz_emu": blocks[0], "fuzz_hw": blocks[-1]}
        append = append % fuzz
        vm_env = dict(env, VM_PTI="on")
        vm_env["ONLY"] = ",".join(progs[name]) if only is not None else ""
        vm_env["PROVOKE"] = provoke_for(name)
        vm_env["VM_APPEND"] = " ".join(filter(None, [
            append, "vm.emu=" + ",".join(emu[name]) if emu[name] else "",
            os.environ.get("VM_APPEND", "")]))
        if cpu:
            vm_env["QEMU"] = QEMU_BTS
            vm_env["VM_CPU"] = cpu
        bz = os.path.join(BUILD, KERNELS[kernel], "arch", "x86", "boot", "bzImage")
        initrd = os.path.join(BUILD, "initramfs", name + ".cpio.gz")
        job = add(Job("run-" + name, [os.path.join(TOP, "mk", "vm.sh"), "test", bz, initrd,
                                      os.path.join(LOGS, name)],
                      [kernel, "initramfs-" + name] + (["qemu"] if cpu else []),
                      "vm", 100 + timed.index(name), vm_env, phase="run " + name))
        job.run = name
    if "model" in runs:
        job = add(Job("run-model", MAKE + ["qemu-test"], ["qemu"], "vm",
                      100 + timed.index("model"), phase="run model"))
        job.run = "model"
    if "gdbcheck" in runs:
        # gdb's own gdb.btrace tests (a subset) in a Debian userspace, on
        # a kernel that ran no KUnit at boot (mk/gdb-check.sh).
        job = add(Job("run-gdbcheck", MAKE + ["gdb-check-test"], ["kernel", "gdb"], "vm",
                      100 + timed.index("gdbcheck"), phase="run gdbcheck"))
        job.run = "gdbcheck"
    return jobs


def ccache_stats():
    try:
        out = subprocess.run(["ccache", "--print-stats"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    stats = {}
    for line in out.splitlines():
        key, _, val = line.partition("\t")
        if val.strip().isdigit():
            stats[key] = int(val)
    return stats


def ccache_delta(before, after):
    if before is None or after is None:
        return None
    hits = sum(after.get(k, 0) - before.get(k, 0)
               for k in ("direct_cache_hit", "preprocessed_cache_hit"))
    misses = after.get("cache_miss", 0) - before.get("cache_miss", 0)
    return hits, hits + misses


class Scheduler:
    def __init__(self, jobs, deadline, lanes):
        self.jobs = jobs
        self.deadline = deadline
        self.lanes = lanes
        self.t0 = time.time()
        self.running = {}           # pid -> job
        self.ccache_before = {}
        self.stopping = None        # why nothing more starts
        self.kill_at = None

    def stamp(self):
        return "%5.1f" % ((time.time() - self.t0) / 60)

    def say(self, msg):
        print("[%s min] %s" % (self.stamp(), msg), flush=True)

    def ready(self, job):
        return all(self.jobs[n].status == "ok" for n in job.needs if n in self.jobs)

    def blocked(self, job):
        for n in job.needs:
            dep = self.jobs.get(n)
            if dep is not None and dep.status not in (None, "ok"):
                return "%s %s" % (dep.name, dep.status.split(":")[0])
        return None

    def fits(self, job):
        kinds = [j.kind for j in self.running.values()]
        builds, vms = kinds.count("build"), kinds.count("vm")
        if job.kind == "build":
            return builds == 0 and vms <= 1
        if job.kind == "vm":
            return vms < self.lanes and (builds == 0 or vms == 0)
        return True

    def start(self, job):
        job.start = time.time()
        env = dict(os.environ)
        env.update(job.env)
        if job.kind == "vm" and job.run != "model":
            left = self.deadline - DEADLINE_RESERVE - job.start
            bound = BOUND_FACTOR * manifest_time(job.run) + BOUND_SLACK
            ksft = KSFT_TIMEOUT
            if os.environ.get("FUZZ_BLOCKS"):
                bound = left        # a soak: only the deadline
                ksft = 7200
            job.timeout = int(max(1, min(bound, left)))
            env["VM_TIMEOUT"] = str(job.timeout)
            # A hung test is named in the verdict only if its own timeout
            # comes before the run's.
            env["KSFT_TIMEOUT"] = str(max(60, min(ksft, job.timeout - BOUND_SLACK // 2)))
        if job.kind == "build":
            self.ccache_before[job.name] = ccache_stats()
        os.makedirs(JOBLOGS, exist_ok=True)
        with open(job.log, "w") as log:
            job.proc = subprocess.Popen(job.cmd, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env,
                                        start_new_session=True)
        self.running[job.proc.pid] = job
        extra = " (timeout %d s)" % job.timeout if job.timeout else ""
        self.say("start %s%s" % (job.phase, extra))

    def finish(self, job, rc, usage):
        job.end = time.time()
        job.cpu = usage.ru_utime + usage.ru_stime
        if job.kind == "build":
            job.ccache = ccache_delta(self.ccache_before.get(job.name), ccache_stats())
        if job.status is None:
            job.status = "ok" if rc == 0 else "failed"
        self.say("%s %s (%.0f s)" % (job.status, job.phase, job.end - job.start))
        if job.status == "failed":
            with open(job.log, errors="replace") as f:
                tail = f.read().splitlines()[-30:]
            print("\n".join("    " + line for line in tail), flush=True)

    def stop_all(self, why):
        """Stop what runs (SIGTERM to each job's process group, SIGKILL
        to what is left after STOP_GRACE seconds) and start nothing more."""
        self.stopping = why
        for job in self.jobs.values():
            if job.proc is None and job.status is None:
                job.status = "not run: " + why
        for job in self.running.values():
            job.status = "stopped: " + why
            self.signal(job, signal.SIGTERM)
        self.kill_at = time.time() + STOP_GRACE

    @staticmethod
    def signal(job, sig):
        try:
            os.killpg(job.proc.pid, sig)
        except ProcessLookupError:
            pass

    def nearly_ready(self, job):
        """All that @job still waits for are light jobs already running
        (an initramfs: seconds)."""
        waits = [self.jobs[n] for n in job.needs
                 if n in self.jobs and self.jobs[n].status != "ok"]
        return waits and all(d.kind == "light" and d.proc is not None for d in waits)

    def start_ready(self):
        held = False                # a longer run is about to be ready
        for job in sorted(self.jobs.values(), key=lambda j: j.prio):
            if job.status is None and job.proc is None:
                why = self.blocked(job)
                if why:
                    job.status = "not run: " + why
                elif job.kind == "vm" and held:
                    continue
                elif self.ready(job) and self.fits(job):
                    self.start(job)
                elif job.kind == "vm" and self.nearly_ready(job):
                    held = True

    def loop(self):
        while True:
            if self.stopping is None:
                if time.time() >= self.deadline - DEADLINE_RESERVE:
                    self.say("deadline: stopping %s" %
                             (", ".join(j.phase for j in self.running.values()) or "nothing"))
                    self.stop_all("the deadline came first")
                else:
                    self.start_ready()
            elif self.kill_at and time.time() >= self.kill_at:
                for job in self.running.values():
                    self.signal(job, signal.SIGKILL)
                self.kill_at = None
            if not self.running:
                break
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                time.sleep(0.5)
                continue
            job = self.running.pop(pid, None)
            if job is not None:
                self.finish(job, os.waitstatus_to_exitcode(status), usage)
                # What the job left in its group goes with it.
                self.signal(job, signal.SIGKILL)


def fmt_min(sec):
    return "%d:%02d" % (sec // 60, sec % 60)


def time_table(sched, jobs):
    rows = []
    for job in sorted(jobs.values(), key=lambda j: (j.start is None, j.start or 0)):
        if job.start is None:
            rows.append((job.phase, "-", "-", "-", job.status or ""))
            continue
        cc = ""
        if job.ccache and job.ccache[1]:
            cc = "ccache %d/%d hits (%.0f%%)" % (job.ccache[0], job.ccache[1],
                                                100.0 * job.ccache[0] / job.ccache[1])
        note = "" if job.status == "ok" else job.status
        rows.append((job.phase, fmt_min(job.start - sched.t0), fmt_min(job.end - job.start),
                     fmt_min(job.cpu), " ".join(filter(None, [cc, note]))))
    wall = time.time() - sched.t0
    self_ru = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = self_ru.ru_utime + self_ru.ru_stime + kids.ru_utime + kids.ru_stime
    width = max(len(r[0]) for r in rows)
    lines = ["time table (min:s; started at, wall, CPU = user + sys)",
             "%-*s  %6s  %6s  %6s" % (width, "phase", "start", "wall", "CPU")]
    for phase, start, wall_s, cpu_s, note in rows:
        lines.append(("%-*s  %6s  %6s  %6s  %s" % (width, phase, start, wall_s, cpu_s,
                                                   note)).rstrip())
    lines.append("%-*s  %6s  %6s  %6s  %.2f cores busy on average" %
                 (width, "total", "", fmt_min(wall), fmt_min(cpu), cpu / wall if wall else 0))
    text = "\n".join(lines)
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, "time-table"), "w") as f:
        f.write(text + "\n")
    print(text, flush=True)


def become_subreaper():
    """What a stopped job's group leaves behind (QEMU under timeout, a
    kernel make under flock) is adopted by this process, not init: its
    CPU time still counts."""
    try:
        import ctypes
        PR_SET_CHILD_SUBREAPER = 36
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main():
    become_subreaper()
    args = sys.argv[1:]
    runs = RUN_NAMES
    sel = os.environ.get("RUNS") or None
    deadline = float(os.environ.get("DEADLINE") or 0) or time.time() + 24 * 3600
    lanes = int(os.environ.get("LANES") or CORES)
    while args:
        opt = args.pop(0)
        if opt == "--runs":
            sel = args.pop(0)
        elif opt == "--deadline":
            deadline = float(args.pop(0))
        elif opt == "--lanes":
            lanes = int(args.pop(0))
        else:
            sys.exit(__doc__)
    if sel:
        bad = [r for r in sel.split(",") if r not in RUN_NAMES]
        if bad:
            sys.exit("test: no such run: %s (runs: %s)" % (", ".join(bad), " ".join(RUN_NAMES)))
        runs = [r for r in RUN_NAMES if r in sel.split(",")]
    only = os.environ.get("ONLY") or None

    # Nothing of an earlier make test may be judged as this one's.
    for run in RUN_NAMES:
        subprocess.run(["rm", "-rf", os.path.join(LOGS, run)], check=True)
    subprocess.run(["rm", "-rf", JOBLOGS], check=True)

    jobs = make_jobs(runs, only)
    sched = Scheduler(jobs, deadline, lanes)
    if os.environ.get("DEADLINE"):
        sched.say("deadline in %.0f min" % ((deadline - time.time()) / 60))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda num, _: sched.stop_all(
            "stopped by %s" % signal.Signals(num).name))
    sched.loop()

    report = ["python3", os.path.join(TOP, "mk", "report.py")]
    if only is not None:
        report += ["--only", only]
    rundirs = []
    for run in runs:
        job = jobs.get("run-" + run)
        rundir = os.path.join(LOGS, run)
        if job is None:
            # None of ONLY is in its manifest: mk/report.py says so.
            rundirs.append(rundir)
            continue
        why = None
        if job.start is None:
            why = (job.status or "not run").replace("not run: ", "")
        elif job.status.startswith("stopped"):
            why = "%s after %.0f s" % (job.status, job.end - job.start)
        elif not any(os.path.exists(os.path.join(rundir, f))
                     for f in ("console.log", "tap.log")):
            why = "its job left no log (%s)" % job.log
        if why:
            os.makedirs(rundir, exist_ok=True)
            with open(os.path.join(rundir, "not-run"), "w") as f:
                f.write(why + "\n")
        rundirs.append(rundir)
    for job in jobs.values():
        if job.kind != "vm" and job.status != "ok" and job.start is not None:
            report += ["--failed", "%s: %s (%s)" % (job.phase, job.status, job.log)]
    base = os.path.join(BUILD, "base-version")
    if os.path.exists(base):
        with open(base) as f:
            print("base: " + f.read().strip())
    # The verdict's details, the time table (with the verdict's own time
    # in it), and last the verdict's summary line.
    t0, ru0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    verdict = subprocess.run(report + [os.path.join(BUILD, "src")] + rundirs,
                             stdout=subprocess.PIPE, text=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = verdict.stdout.splitlines()
    print("\n".join(lines[:-1]), flush=True)
    jobs["verdict"] = Job("verdict", None, phase="verdict (mk/report.py)")
    jobs["verdict"].start, jobs["verdict"].end, jobs["verdict"].status = t0, time.time(), "ok"
    jobs["verdict"].cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    time_table(sched, jobs)
    print(lines[-1] if lines else "0 passed, 1 failed, 0 skipped (no verdict)", flush=True)
    rc = verdict.returncode if lines else 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
