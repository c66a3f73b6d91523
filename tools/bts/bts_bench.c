// SPDX-License-Identifier: GPL-2.0
/*
 * bts_bench: cost per traced instruction of branch tracing through
 * PTRACE_BTS_* (the emulated backend where the CPU has no BTS), against
 * the two ways of tracing every instruction without it:
 *
 *   (a) PTRACE_BTS_* on a workload child: time to run it traced, minus
 *       the time to run it untraced, per instruction;
 *   (b) a userspace tracer that PTRACE_SINGLESTEPs the child and reads its
 *       IP after every instruction ("record full"-style debuggers);
 *   (c) an in-process tracer: TF set, a SIGTRAP handler per instruction.
 *
 * Usage: bts_bench [Na [Nb [Nc]]]: loop iterations for each (5
 * instructions, one taken branch per iteration). Each is measured three
 * times in the same boot and the fastest is kept.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "bts_bench.h"

#define INSNS_PER_ITER	5
#define ROUNDS		3
#define BTS_BUFFER	(64 << 10)
#ifndef X86_EFLAGS_TF
#define X86_EFLAGS_TF	0x100
#endif

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
# define UC_IP(uc)	((uc)->uc_mcontext.gregs[REG_RIP])
#else
# define REGS_IP(r)	((r).eip)
# define UC_IP(uc)	((uc)->uc_mcontext.gregs[REG_EIP])
#endif

/* Read by the workload in bts_bench_asm.S. */
unsigned int bench_iters;

static long sys_ptrace(long request, pid_t pid, void *addr, unsigned long data)
{
	return syscall(SYS_ptrace, request, pid, addr, (void *)data);
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void wait_trap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
	    WSTOPSIG(status) != SIGTRAP) {
		fprintf(stderr, "bts_bench: unexpected child status %#x\n", status);
		exit(1);
	}
}

/* A child stopped at bench_traced's first breakpoint. */
static pid_t start_child(unsigned int iters)
{
	int status;
	pid_t pid;

	bench_iters = iters;
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(1);
		raise(SIGSTOP);
		bench_traced();
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
		die("waitpid");
	sys_ptrace(PTRACE_SETOPTIONS, pid, NULL, PTRACE_O_EXITKILL);
	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
		die("PTRACE_CONT");
	wait_trap(pid);
	return pid;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* (a) Run the loop with or without branch tracing; µs from start to end. */
static double run_bts(unsigned int iters, int trace, long *records)
{
	struct ptrace_bts_config cfg = {
		.size = BTS_BUFFER,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
	};
	pid_t pid = start_child(iters);
	double t0, t1;

	if (trace && sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))
		die("PTRACE_BTS_CONFIG");
	t0 = now_us();
	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
		die("PTRACE_CONT");
	wait_trap(pid);
	t1 = now_us();
	if (trace)
		*records = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	end_child(pid);
	return t1 - t0;
}

/* (b) Single-step the loop, reading the IP at every stop; µs/insn. */
static double run_singlestep(unsigned int iters, unsigned long *steps)
{
	struct user_regs_struct regs;
	pid_t pid = start_child(iters);
	unsigned long n = 0, branches = 0, prev = 0;
	double t0, t1;

	t0 = now_us();
	do {
		if (sys_ptrace(PTRACE_SINGLESTEP, pid, NULL, 0))
			die("PTRACE_SINGLESTEP");
		wait_trap(pid);
		if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
			die("PTRACE_GETREGS");
		/* what a recording tracer does with it: spot the branches */
		if (REGS_IP(regs) < prev)
			branches++;
		prev = REGS_IP(regs);
		n++;
	} while (REGS_IP(regs) != (unsigned long)bench_end);
	t1 = now_us();
	end_child(pid);
	*steps = n;
	return (t1 - t0) / n;
}

/* Set by the SIGTRAP handler: lock-free atomics are async-signal-safe. */
static atomic_ulong tf_traps;
static atomic_ulong tf_last_ip;

static void on_sigtrap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	/* only the handler writes them: relaxed, no locked add per trap */
	atomic_store_explicit(&tf_traps,
			      atomic_load_explicit(&tf_traps, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&tf_last_ip, UC_IP(uc), memory_order_relaxed);
	if (UC_IP(uc) == (unsigned long)bench_plain_end)
		uc->uc_mcontext.gregs[REG_EFL] &= ~X86_EFLAGS_TF;
}

/* (c) Trap every instruction in-process; µs/insn. */
static double run_inprocess(unsigned int iters, unsigned long *traps)
{
	struct sigaction sa = { .sa_sigaction = on_sigtrap,
				.sa_flags = SA_SIGINFO };
	double t0, t1;

	sigaction(SIGTRAP, &sa, NULL);
	bench_iters = iters;
	tf_traps = 0;
	t0 = now_us();
#ifdef __x86_64__
	asm volatile ("pushf; orl $0x100, (%%rsp); popf; call bench_plain"
		      ::: "rax", "rcx", "rdx", "memory", "cc");
#else
	asm volatile ("pushf; orl $0x100, (%%esp); popf; call bench_plain"
		      ::: "eax", "ecx", "edx", "memory", "cc");
#endif
	t1 = now_us();
	signal(SIGTRAP, SIG_DFL);
	*traps = tf_traps;
	return (t1 - t0) / tf_traps;
}

/* Every kernel entry costs a CR3 switch with PTI: say which one we measure. */
static bool pti_enabled(void)
{
	char line[4096];
	bool pti = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return false;
	while (!pti && fgets(line, sizeof(line), f))
		pti = !strncmp(line, "flags", 5) && strstr(line, " pti");
	fclose(f);
	return pti;
}

static double min(double a, double b)
{
	return a < b ? a : b;
}

int main(int argc, char **argv)
{
	unsigned int na = argc > 1 ? atoi(argv[1]) : 20000;
	unsigned int nb = argc > 2 ? atoi(argv[2]) : 300;
	unsigned int nc = argc > 3 ? atoi(argv[3]) : 1000;
	double a = 1e99, b = 1e99, c = 1e99, plain = 1e99, traced = 1e99;
	unsigned long steps = 0, traps = 0;
	unsigned long insns_a = (unsigned long)na * INSNS_PER_ITER + 1;
	long records = 0;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ROUNDS; i++) {
		plain = min(plain, run_bts(na, 0, NULL));
		traced = min(traced, run_bts(na, 1, &records));
		b = min(b, run_singlestep(nb, &steps));
		c = min(c, run_inprocess(nc, &traps));
	}
	a = (traced - plain) / insns_a;

	printf("bts_bench: page table isolation %s\n",
	       pti_enabled() ? "on" : "off");
	fprintf(stdout,
		"bts_bench: %lu instructions under BTS (%ld records kept), %lu single-stepped, %lu trapped in-process\n",
		insns_a, records, steps, traps);
	printf("  untraced run                     %10.1f us (%.4f us/insn)\n",
	       plain, plain / insns_a);
	printf("  (a) PTRACE_BTS_* tracing         %10.3f us/insn\n", a);
	printf("  (b) PTRACE_SINGLESTEP tracer     %10.3f us/insn\n", b);
	printf("  (c) in-process TF + SIGTRAP      %10.3f us/insn\n", c);
	if (a > 0)
		printf("  (b)/(a) = %.1fx (target >= 60x), (c)/(a) = %.1fx (target >= 20x)\n",
		       b / a, c / a);
	else
		printf("  (a) is below the measurement noise\n");
	return 0;
}
