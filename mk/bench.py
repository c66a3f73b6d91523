#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make bench: boot the benchmark's machines, turn their figures into ratios.

    bench.py [--boots a,b] [--reps N] [--smoke] [--out DIR]

Every figure is a ratio of two measurements taken in the same boot, or in
paired boots of the same machine alternated (the kernel with X86_DS=y and
the same kernel without it). Each measurement is repeated (--reps, 3) and
reported as the minimum and the median of its ratio.

The boots (BOOTS): which kernel, which machine, how many CPUs, PTI, and the
phases of vm/bench/bench.sh each runs. One VM at a time: a second one
beside would be the noise.

Writes DIR (build/bench): raw.txt (every "bench:" line of every boot),
results.md (the tables), *.dat and the plots slowdown.svg/.png and
scaling.svg/.png (gnuplot). --smoke runs bench.sh -s in one boot of each
machine, for make test: the programs must work, the figures mean nothing.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test import BUILD, TOP, QEMU_BTS, PMU_CPU  # noqa: E402

RUN_BZ = os.path.join(BUILD, "obj-run", "arch/x86/boot/bzImage")
NODS_BZ = os.path.join(BUILD, "obj-bench-nods", "arch/x86/boot/bzImage")
INITRD = os.path.join(BUILD, "bench", "initramfs.cpio.gz")

TCG_TOOLS = "none,bts-emu,step,gdb-plain,gdb-full,gdb-ptrace"
# The tools that trap every instruction do the same on the model: they run
# in the TCG boot only.
HW_TOOLS = "none,bts-hw,bts-emu,gdb-plain,gdb-perf,gdb-ptrace"

# name, kernel, machine (None: stock QEMU -cpu max; else the model), CPUs,
# PTI, phases. y1 n1 y2 n2 alternate the kernels for the untraced cost.
BOOTS = [
    ("y1", RUN_BZ, None, 2, "on", ["micro", "beside:emu", "programs:" + TCG_TOOLS,
                                  "reads:emu", "floor"]),
    ("n1", NODS_BZ, None, 2, "on", ["micro"]),
    ("n2", NODS_BZ, None, 2, "on", ["micro"]),
    ("y2", RUN_BZ, None, 2, "on", ["micro"]),
    ("y3", RUN_BZ, None, 2, "on", ["micro"]),
    ("n3", NODS_BZ, None, 2, "on", ["micro"]),
    # the same on the model, whose CPU has the Debug Store
    ("my1", RUN_BZ, PMU_CPU, 2, "on", ["micro"]),
    ("mn1", NODS_BZ, PMU_CPU, 2, "on", ["micro"]),
    ("mn2", NODS_BZ, PMU_CPU, 2, "on", ["micro"]),
    ("my2", RUN_BZ, PMU_CPU, 2, "on", ["micro"]),
    ("hw", RUN_BZ, PMU_CPU, 2, "on", ["beside:hw", "programs:" + HW_TOOLS,
                                     "reads:hw"]),
    ("scale-emu", RUN_BZ, None, 4, "on", ["scale:emu"]),
    ("scale-hw", RUN_BZ, PMU_CPU, 4, "on", ["scale:hw"]),
    ("pti-off", RUN_BZ, None, 2, "off", ["floor"]),
]
SMOKE_BOOTS = [
    ("smoke-tcg", RUN_BZ, None, 2, "on", ["micro", "beside:emu",
                                          "programs:" + TCG_TOOLS,
                                          "reads:emu", "scale:emu", "floor"]),
    ("smoke-hw", RUN_BZ, PMU_CPU, 2, "on", ["beside:hw", "programs:" + HW_TOOLS,
                                           "reads:hw", "scale:hw"]),
]
PROGRAMS = ["gunzip", "sort", "md5sum", "tac"]
TOOL_NAMES = {
    "bts-emu": "PTRACE_BTS, emulated",
    "bts-hw": "PTRACE_BTS, hardware",
    "step": "PTRACE_SINGLESTEP tracer",
    "gdb-full": "gdb record full",
    "gdb-perf": "gdb record btrace (perf)",
    "gdb-ptrace": "gdb record btrace (PTRACE_BTS)",
}


def boot(name, kernel, cpu, smp, pti, phases, reps, smoke, out):
    logdir = os.path.join(out, "boot-" + name)
    env = dict(os.environ)
    args = (["-s"] if smoke else ["-r", str(reps)]) + phases
    env["VM_APPEND"] = "kunit.enable=0 vm.bench=" + "+".join(args)
    env["VM_PTI"] = pti
    env["VM_SMP"] = str(smp)
    env["VM_TIMEOUT"] = "900"
    if cpu:
        env["QEMU"] = QEMU_BTS
        env["VM_CPU"] = cpu
    t0 = time.time()
    print(f"bench: boot {name}: {' '.join(phases)}", flush=True)
    rc = subprocess.run([os.path.join(TOP, "mk", "vm.sh"), "bench", kernel, INITRD,
                         logdir], env=env, stdout=subprocess.DEVNULL).returncode
    lines = [] if rc == 0 else [f"FAIL the VM ended with status {rc}"]
    with open(os.path.join(logdir, "results.log"), errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("bench: "):
                lines.append(line[len("bench: "):])
    print(f"bench: boot {name} took {time.time() - t0:.0f} s", flush=True)
    return lines


def parse(boots):
    """{boot: {key: value}}; FAIL lines and a missing result are errors.

    A failed program under a tool ("FAIL PROG under TOOL: ...") leaves its
    figures out: the table says it failed instead."""
    data, errors = {}, []
    for name, lines in boots.items():
        d = data.setdefault(name, {})
        for line in lines:
            # FAILED: a tool that failed as it would a user (gdb's record
            # full at an instruction it does not record), not an error
            m = re.match(r"FAIL(?:ED)? (\S+) under (\S+): (.*)", line)
            if m:
                d.setdefault("failed", {})[(m.group(1), m.group(2))] = m.group(3)
            if line.startswith("FAIL "):
                errors.append(f"{name}: {line}")
                continue
            if line.startswith("FAILED "):
                continue
            parts = line.split(" ", 1)
            if len(parts) == 2:
                d[parts[0]] = parts[1]
        if d.get("result") != "ok":
            errors.append(f"{name}: bench.sh did not end with 'result ok'")
    return data, errors


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def series(d, pattern):
    """Values of the keys that match pattern, whose group 1 is the rep."""
    rx = re.compile("^" + pattern + "$")
    return [num(v) for k, v in sorted(d.items())
            if isinstance(v, str) and rx.match(k) and num(v) is not None]


def stats(values):
    return (min(values), statistics.median(values)) if values else (None, None)


def ratio(a, b):
    """min and median of a over b, each from its own min and median."""
    (amin, amed), (bmin, bmed) = stats(a), stats(b)
    if not amin or not bmin:
        return None, None
    return amin / bmin, amed / bmed


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def pct(r):
    return "—" if r is None else f"{(r - 1) * 100:+.1f}%"


def untraced_cost(data, md):
    md.append("## 1. What an untraced machine pays\n")
    md.append("Alternated boots (y n n y y n on stock QEMU, y n n y on the "
              "BTS model, whose CPU has the Debug Store): the run kernel with "
              "`CONFIG_X86_DS=y` and the same kernel with `=n`, 9 runs of "
              "each operation per boot, pinned to CPU 0. ns per "
              "operation; the ratio y/n. The noise floor is the same kernel "
              "against itself: the largest over the smallest of the y "
              "boots' medians (and of the n boots'). Goal: within 1%.\n")
    md.append("| machine | operation | y min | n min | y/n (min) | y/n (median) | "
              "noise, y boots | noise, n boots |")
    md.append("|---|---|---|---|---|---|---|---|")
    for mach, ys, ns in (("stock QEMU", ("y1", "y2", "y3"), ("n1", "n2", "n3")),
                         ("BTS model", ("my1", "my2"), ("mn1", "mn2"))):
        for b in ("pipe", "getppid", "fork"):
            pat = r"micro\.%s\.\d+\.ns_per_op" % b
            y = [v for k in ys for v in series(data.get(k, {}), pat)]
            n = [v for k in ns for v in series(data.get(k, {}), pat)]
            if not y or not n:
                continue
            rmin, rmed = ratio(y, n)

            def spread(boots):
                meds = [stats(series(data.get(k, {}), pat))[1] for k in boots]
                meds = [m for m in meds if m]
                return max(meds) / min(meds) if len(meds) > 1 else None
            md.append(f"| {mach} | {b} | {fmt(stats(y)[0], 0)} | {fmt(stats(n)[0], 0)} | "
                      f"{pct(rmin)} | {pct(rmed)} | {pct(spread(ys))} | {pct(spread(ns))} |")
    md.append("")
    md.append("The same operations on CPU 0, alone, beside an untraced loop "
              "on CPU 1, and beside the same loop traced (its tracer on CPU 1 "
              "too, draining at every full buffer), in the same boot. Under "
              "TCG a busy vCPU slows the others: what tracing costs the "
              "untraced is traced against busy. Goal: within 1%.\n")
    md.append("| operation | backend | alone min (ns) | busy min (ns) | traced min (ns) | "
              "traced/busy (min) | traced/busy (median) | busy/alone (median) |")
    md.append("|---|---|---|---|---|---|---|---|")
    for boot, backend in (("y1", "emu"), ("hw", "hw")):
        d = data.get(boot, {})
        for b in ("pipe", "getppid", "fork"):
            arm = {a: series(d, r"beside-%s\.%s\.%s\.\d+\.ns_per_op" % (backend, a, b))
                   for a in ("alone", "busy", "traced")}
            if not all(arm.values()):
                continue
            rmin, rmed = ratio(arm["traced"], arm["busy"])
            md.append(f"| {b} | {backend} | {fmt(stats(arm['alone'])[0], 0)} | "
                      f"{fmt(stats(arm['busy'])[0], 0)} | {fmt(stats(arm['traced'])[0], 0)} | "
                      f"{pct(rmin)} | {pct(rmed)} | {pct(ratio(arm['busy'], arm['alone'])[1])} |")
    md.append("")


def programs(data, md):
    md.append("## 2. Real programs, traced by each tool\n")
    md.append("busybox `gunzip` (1 KiB), `sort -n` (20 lines) and `md5sum` "
              "(1 KiB), statically linked, and coreutils' `tac` (1 KiB; "
              "libc.so through ld.so) on fixed input. Slowdown: the time "
              "under the tool over the untraced time, in the same boot "
              "(min over reps; median in brackets). For gdb: 1 + (the gdb "
              "session's time − the same session without recording) / the "
              "untraced time, so gdb's own start is not counted. Every "
              "tool records the same window: from the program's opening "
              "of its input (after libc's start, which gdb 13's `record "
              "full` cannot record) to its end; the whole untraced run is "
              "the reference. The PTRACE_BTS rows are a lossless recorder "
              "(64 KiB buffer, drained at every full one, like btrace); "
              "gdb keeps its 64 KiB ring and reads it at the end. The "
              "single-stepping tracer and `record full` take about 1 ms "
              "per instruction under TCG: they run once, on `md5sum` and "
              "`tac`; the others 3 times on all four. Rate: branches "
              "recorded per second, or instructions stepped per second.\n")
    rows, dat = [], []
    for boot, machine in (("y1", "stock QEMU"), ("hw", "BTS model")):
        d = data.get(boot, {})
        if not d:
            continue
        tools = sorted({k.split(".")[2] for k in d if k.startswith("programs.")})
        for prog in PROGRAMS:
            def walls(tool):
                return series(d, r"programs\.%s\.%s\.\d+\.wall_us" % (prog, tool))
            base = stats(walls("none"))
            plain = stats(walls("gdb-plain"))
            if base[0] is None:
                continue
            for tool in tools:
                if tool in ("none", "gdb-plain"):
                    continue
                why = d.get("failed", {}).get((prog, tool))
                if why:
                    rows.append(f"| {machine} | {prog} | {TOOL_NAMES.get(tool, tool)} | "
                                f"{fmt(base[0] / 1e3, 1)} | failed: {why} | — |")
                    continue
                t = stats(walls(tool))
                if t[0] is None:
                    continue
                if tool.startswith("gdb-"):
                    if plain[0] is None:
                        continue
                    smin = 1 + (t[0] - plain[0]) / base[0]
                    smed = 1 + (t[1] - plain[1]) / base[1]
                else:
                    smin, smed = t[0] / base[0], t[1] / base[1]
                recs = series(d, r"programs\.%s\.%s\.\d+\.records" % (prog, tool))
                steps = series(d, r"programs\.%s\.%s\.\d+\.steps" % (prog, tool))
                rate = "—"
                if recs and recs[0]:
                    rate = f"{recs[0] / (t[0] / 1e6):,.0f} branches/s"
                elif steps and steps[0]:
                    rate = f"{steps[0] / (t[0] / 1e6):,.0f} instructions/s"
                rows.append(f"| {machine} | {prog} | {TOOL_NAMES.get(tool, tool)} | "
                            f"{fmt(base[0] / 1e3, 1)} | {smin:,.1f}× ({smed:,.1f}×) | {rate} |")
                dat.append((machine, prog, tool, smin))
    md.append("| machine | program | tool | untraced (ms) | slowdown | rate |")
    md.append("|---|---|---|---|---|---|")
    md.extend(rows)
    md.append("")
    return dat


def reads(data, md):
    md.append("## 3. Reads\n")
    md.append("A full 4 MiB buffer (174,762 records), the tracee stopped "
              "unless said otherwise. Goal: DRAIN at most 2× a user-space "
              "`memcpy` of the same bytes.\n")
    md.append("| backend | records | memcpy (µs) | DRAIN (µs) | DRAIN/memcpy | "
              "READ, one call (µs) | READ via 4 KiB (ns/record) | "
              "GET (ns/record) | READ, tracee running (µs) |")
    md.append("|---|---|---|---|---|---|---|---|---|")
    for boot, backend in (("y1", "emu"), ("hw", "hw")):
        d = data.get(boot, {})
        p = f"reads-{backend}."
        if p + "records" not in d:
            continue
        mc, dr = num(d.get(p + "memcpy_us")), num(d.get(p + "drain_us"))
        md.append(f"| {backend} | {d.get(p + 'records')} | {fmt(mc, 0)} | {fmt(dr, 0)} | "
                  f"{fmt(dr / mc if mc and dr else None)}× | {fmt(num(d.get(p + 'read_us')), 0)} | "
                  f"{fmt(num(d.get(p + 'read4k_ns_rec')), 1)} | "
                  f"{fmt(num(d.get(p + 'get_ns_rec')), 0)} | "
                  f"{fmt(num(d.get(p + 'running_read_us')), 0)} |")
    md.append("")
    md.append("## 4. Requests and interrupts\n")
    md.append("Latency per request (µs, minimum over reps of the mean of "
              "1,000; DRAIN's of an empty buffer, the full one is above) and "
              "the IPIs (CAL, TLB, RES in `/proc/interrupts`) it sends to "
              "the other CPUs, per request, less the rate a second of "
              "`getppid()` calls sees. Goal: none for a stopped tracee.\n")
    md.append("| backend | tracee | request | latency (µs) | IPIs per request |")
    md.append("|---|---|---|---|---|")
    for boot, backend in (("y1", "emu"), ("hw", "hw")):
        d = data.get(boot, {})
        for prefix, state in (("req", "stopped"), ("run", "running")):
            for r in ("CONFIG", "STATUS", "SIZE", "READ", "DRAIN"):
                k = f"reads-{backend}.{prefix}_{r}"
                if k + "_us" in d:
                    md.append(f"| {backend} | {state} | {r} | {fmt(num(d[k + '_us']))} | "
                              f"{fmt(num(d.get(k + '_ipi')), 3)} |")
    md.append("")


def scaling(data, md):
    md.append("## 5. Scaling\n")
    md.append("1, 2, 4 and 8 threads of a loop on a 4-CPU machine, traced "
              "(PTRACE_BTS, 64 KiB buffers drained at every full one) with "
              "the loop N and 2N times, and untraced 400N times. ns of CPU "
              "time (tracer and program) per instruction; a traced figure is "
              "the difference of the two traced runs, so no start or exit is "
              "in it. The untraced column is the machine's own reference: "
              "under TCG the 4 vCPUs share the host's 2 cores, and a vCPU "
              "the host does not run still counts guest time. One run each "
              "(about 100 µs per traced instruction). Goal: the cost within "
              "10% of one thread's.\n")
    md.append("| backend | threads | untraced ns/insn | traced ns/insn | "
              "cost against 1 thread | traced/untraced against 1 thread |")
    md.append("|---|---|---|---|---|---|")
    dat = []
    for boot, backend in (("scale-emu", "emu"), ("scale-hw", "hw")):
        d = data.get(boot, {})
        n, ref = num(d.get(f"scale-{backend}.iters")), num(d.get(f"scale-{backend}.ref"))
        if not n or not ref:
            continue
        n, ref = int(n), int(ref)
        one = one_rel = None
        for t in (1, 2, 4, 8):
            def cpu(m, i):
                v = series(d, r"scale-%s\.%d\.%s%d\.\d+\.cpu_us" % (backend, t, m, i))
                return min(v) if v else None
            plain, short, long_ = cpu("none", n * ref), cpu("bts", n), cpu("bts", 2 * n)
            if None in (plain, short, long_):
                continue
            untraced = plain * 1e3 / (t * n * ref * 5)
            traced = (long_ - short) * 1e3 / (t * n * 5)
            rel = traced / untraced
            if one is None:
                one, one_rel = traced, rel
            md.append(f"| {backend} | {t} | {untraced:.3f} | {traced:,.0f} | "
                      f"{pct(traced / one)} | {pct(rel / one_rel)} |")
            dat.append((backend, t, traced))
    md.append("")
    return dat


def floor(data, md):
    md.append("## 6. The floor: the bare #DB round trip\n")
    md.append("`bts_bench` in the same boot: the emulated backend's cost per "
              "traced instruction against two ways of trapping every "
              "instruction: a trap-flag #DB handled in the program (the "
              "exception, a SIGTRAP delivery and a sigreturn per "
              "instruction) and a PTRACE_SINGLESTEP tracer (the #DB and two "
              "context switches); stock QEMU, page table isolation on and "
              "off. The emulation takes its #DB in the kernel and returns "
              "without a signal, which is why it costs less than the "
              "in-program trap; the bare #DB entry and exit is its floor.\n")
    md.append("| PTI | untraced (µs/insn) | PTRACE_BTS emulated (µs/insn) | "
              "TF + SIGTRAP handler (µs/insn) | PTRACE_SINGLESTEP (µs/insn) | "
              "emulated / TF handler |")
    md.append("|---|---|---|---|---|---|")
    for boot in ("y1", "pti-off"):
        d = data.get(boot, {})
        if "floor.pti" not in d:
            continue
        a, c = num(d.get("floor.bts_us_insn")), num(d.get("floor.db_us_insn"))
        md.append(f"| {d['floor.pti']} | {d.get('floor.untraced_us_insn')} | {fmt(a, 3)} | "
                  f"{fmt(c, 3)} | {fmt(num(d.get('floor.step_us_insn')), 3)} | "
                  f"{fmt(a / c if a and c else None)} |")
    md.append("")


def plots(out, prog_dat, scale_dat):
    if not shutil.which("gnuplot"):
        print("bench: no gnuplot: no plots")
        return
    tools = []
    for _, _, tool, _ in prog_dat:
        if tool not in tools:
            tools.append(tool)
    with open(os.path.join(out, "slowdown.dat"), "w") as f:
        f.write("# program " + " ".join(tools) + "\n")
        for machine in ("stock QEMU", "BTS model"):
            for prog in PROGRAMS:
                vals = {t: s for m, p, t, s in prog_dat if m == machine and p == prog}
                if vals:
                    label = f'"{prog}\\n({"TCG" if machine == "stock QEMU" else "model"})"'
                    f.write(label + " " + " ".join(
                        f"{vals[t]:.3f}" if t in vals else "NaN" for t in tools) + "\n")
    backends = [b for b in ("emu", "hw") if any(x[0] == b for x in scale_dat)]
    with open(os.path.join(out, "scaling.dat"), "w") as f:
        for backend in backends:
            f.write(f"# {backend}\n")
            for b, t, c in scale_dat:
                if b == backend:
                    f.write(f"{t} {c:.4f}\n")
            f.write("\n\n")
    names = {"emu": "emulated backend", "hw": "hardware backend (model)"}
    scale_plot = ", ".join(
        ("'%s/scaling.dat'" % out if i == 0 else "''")
        + f" index {i} title '{names[b]}'" for i, b in enumerate(backends))
    dat = os.path.join(out, "slowdown.dat")
    titles = ", ".join(
        ("'%s' using 2:xtic(1)" % dat if i == 0 else "'' using %d" % (i + 2))
        + " title '%s'" % TOOL_NAMES.get(t, t) for i, t in enumerate(tools))
    for term, ext in (("svg size 900,500 font 'sans,11'", "svg"),
                      ("pngcairo size 900,500 font 'sans,10'", "png")):
        script = f"""
set terminal {term}
set output '{out}/slowdown.{ext}'
set title 'Slowdown against the untraced program (same boot; log scale)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set yrange [1:*]
set ylabel 'times slower'
set key top left
set xtics font ',9'
plot {titles}
set output '{out}/scaling.{ext}'
set title 'Cost per traced instruction against traced threads (4 CPUs)'
unset logscale y
set style data linespoints
set xlabel 'traced threads'
set ylabel 'ns per traced instruction (log scale)'
set logscale y
set yrange [*:*]
set logscale x 2
set xtics (1, 2, 4, 8)
{"plot " + scale_plot if scale_plot else ""}
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--boots", help="only these boots (comma-separated); "
                    "the others' figures are taken from their last logs")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", 3)))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=os.path.join(BUILD, "bench"))
    opts = ap.parse_args()
    boots = SMOKE_BOOTS if opts.smoke else BOOTS
    if opts.boots:
        want = opts.boots.split(",")
        boots = [b for b in boots if b[0] in want]
    os.makedirs(opts.out, exist_ok=True)
    t0 = time.time()
    lines = {}
    for b in boots:
        lines[b[0]] = boot(*b, opts.reps, opts.smoke, opts.out)
    # --boots re-runs some: the others' figures are their last boot's
    if opts.boots and not opts.smoke:
        for b in BOOTS:
            log = os.path.join(opts.out, "boot-" + b[0], "results.log")
            if b[0] not in lines and os.path.exists(log):
                with open(log, errors="replace") as f:
                    lines[b[0]] = [ln.strip()[len("bench: "):] for ln in f
                                   if ln.startswith("bench: ")]
    with open(os.path.join(opts.out, "raw.txt"), "w") as f:
        for name, ls in lines.items():
            for line in ls:
                f.write(f"{name} {line}\n")
    data, errors = parse(lines)
    for e in errors:
        print("bench: FAIL " + e)
    if opts.smoke:
        print(f"bench: smoke: {len(boots)} boots, {sum(map(len, lines.values()))} "
              f"figures, {len(errors)} failures")
        return 1 if errors else 0
    md = [f"# make bench, {time.strftime('%Y-%m-%d')}\n",
          f"{len(boots)} boots, {opts.reps} repetitions each, "
          f"{time.time() - t0:.0f} s.\n"]
    untraced_cost(data, md)
    prog_dat = programs(data, md)
    reads(data, md)
    scale_dat = scaling(data, md)
    floor(data, md)
    with open(os.path.join(opts.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    plots(opts.out, prog_dat, scale_dat)
    print("\n".join(md))
    print(f"bench: {opts.out}/results.md, slowdown.svg/png, scaling.svg/png "
          f"({time.time() - t0:.0f} s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
