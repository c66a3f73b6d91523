// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, the trap flag the emulated backend forces,
 * and branch tracing beside single-stepping.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* ---- The forced trap flag ---- */

/* Lock-free atomics are async-signal-safe. */
static atomic_int handler_saw_tf = -1;

static void tf_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	handler_saw_tf = !!(uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF);
}

static void tf_sigframe_routine(unsigned long unused)
{
	struct sigaction sa = { .sa_sigaction = tf_handler,
				.sa_flags = SA_SIGINFO };

	sigaction(SIGUSR1, &sa, NULL);
	bts_jmp();
	raise(SIGUSR1);
	_exit(handler_saw_tf == 0 ? 0 : 10 + handler_saw_tf);
}

/* A signal handler never finds the forced TF in its frame. */
TEST_F(bts, tf_hidden_in_sigframe)
{
	int status;

	self->pid = spawn(_metadata, tf_sigframe_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 64 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	/* tracing is on, or the handler has nothing to hide */
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	cont_to_signal(_metadata, self->pid, 0, SIGUSR1);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, SIGUSR1));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	self->pid = 0;
}

static void busy_routine(unsigned long unused)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	int i;

	sigaction(SIGUSR1, &sa, NULL);
	bts_jmp();
	for (i = 0; i < 20; i++)
		syscall(SYS_getppid);
	raise(SIGUSR1);
	sleep_ms(1);
	bts_step();
}

/*
 * Under tracing, syscalls, sleeping and signals give the tracer no stop
 * but the signal's: no SIGTRAP the program would not get anyway.
 */
TEST_F(bts, no_spurious_sigtrap)
{
	self->pid = spawn(_metadata, busy_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 256 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	cont_to_signal(_metadata, self->pid, 0, SIGUSR1);
	cont_to(_metadata, self->pid, SIGUSR1, step_s);
	EXPECT_LT(0, bts_size(self->pid));
}

/*
 * Run bts_usertf, suppressing the tracee's own single-step traps;
 * returns their number and records their IPs.
 */
static int run_usertf(struct __test_metadata *_metadata, pid_t pid,
		      unsigned long *ips, int max)
{
	struct user_regs_struct regs;
	int status, n = 0;

	for (;;) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
		ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, pid, NULL,
					(unsigned long)&regs));
		if (REGS_IP(regs) == (unsigned long)utf_e)
			break;
		/*
		 * The tracee's own TF is visible, except in the trap after the
		 * popf that cleared it (the one before the int3).
		 */
		if (REGS_IP(regs) != (unsigned long)utf_e - 1)
			EXPECT_NE(0, regs.eflags & X86_EFLAGS_TF);
		ASSERT_LT(n, max);
		ips[n++] = REGS_IP(regs);
	}
	EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	return n;
}

/* A tracee that sets TF itself gets exactly its own traps. */
TEST_F(bts, tracee_sets_tf)
{
	static const struct branch exp[] = { { utf_f0, utf_t0 } };
	unsigned long plain[16], traced[16];
	int n_plain, n_traced, i;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_usertf, 0);
	cont_to(_metadata, self->pid, 0, utf_s);
	n_plain = run_usertf(_metadata, self->pid, plain, 16);
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);

	self->pid = start_traced(_metadata, bts_usertf, utf_s, 64);
	n_traced = run_usertf(_metadata, self->pid, traced, 16);
	/* nop, jmp, nop, pushf, andl (and popf, on CPUs that trap after it) */
	EXPECT_LE(5, n_plain);
	EXPECT_GE(6, n_plain);
	ASSERT_EQ(n_plain, n_traced);
	for (i = 0; i < n_plain; i++)
		EXPECT_EQ(plain[i], traced[i]);
	EXPECT_EQ((unsigned long)utf_f0, traced[0]);
	EXPECT_EQ((unsigned long)utf_t0, traced[1]);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/* Install bts_icebp_handler for SIGTRAP, then run bts_icebp. */
static void icebp_routine(unsigned long unused)
{
	install_asm_handler(SIGTRAP, (void *)bts_icebp_handler);
	bts_icebp();
}

/*
 * Run bts_icebp in @pid from icebp_s, passing its SIGTRAPs on, each of
 * whose si_code goes to @codes; returns how many the handler counted, or
 * -1 if the CPU takes ICEBP for an undefined opcode (some emulators do,
 * QEMU's TCG up to at least 7.2).
 */
static int run_icebp(struct __test_metadata *_metadata, pid_t pid,
		     int codes[2])
{
	siginfo_t si;
	long count;
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));
	if (WSTOPSIG(status) == SIGILL &&
	    get_ip(_metadata, pid) == (unsigned long)icebp_s)
		return -1;
	ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
	/* a trap: the stop is after the ICEBP */
	ASSERT_EQ((unsigned long)icebp_f0, get_ip(_metadata, pid));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETSIGINFO, pid, NULL,
				(unsigned long)&si));
	codes[0] = si.si_code;
	cont_to(_metadata, pid, SIGTRAP, icebp_a);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETSIGINFO, pid, NULL,
				(unsigned long)&si));
	codes[1] = si.si_code;
	cont_to(_metadata, pid, SIGTRAP, icebp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKDATA, pid, &bts_icebp_count,
				(unsigned long)&count));
	return (int)count;
}

/*
 * ICEBP under the forced trap flag is the program's own SIGTRAP, exactly
 * as untraced: each one reaches the handler once, with the same si_code,
 * and no step becomes a SIGTRAP. Records: the handlers' returns and the
 * jmp between, on either backend (the debug exception's own branch has a
 * kernel end point).
 */
TEST_F(bts, icebp_sigtrap)
{
	static const struct branch exp[] = {
		{ icebph_f0, bts_sig_restorer }, { icebp_f0, icebp_t0 },
		{ icebph_f0, bts_sig_restorer },
	};
	int plain[2], traced[2], n_plain, n_traced;

	self->pid = spawn(_metadata, icebp_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, icebp_s);
	n_plain = run_icebp(_metadata, self->pid, plain);
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);
	if (n_plain < 0)
		SKIP(return, "ICEBP is an undefined opcode on this CPU");

	self->pid = spawn(_metadata, icebp_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, icebp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 64 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	n_traced = run_icebp(_metadata, self->pid, traced);
	EXPECT_EQ(2, n_plain);
	EXPECT_EQ(n_plain, n_traced);
	EXPECT_EQ(plain[0], traced[0]);
	EXPECT_EQ(plain[1], traced[1]);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/* ---- A call through a NULL pointer ---- */

/*
 * Stay on this CPU, so that what the tracer loads into its debug registers
 * at the first stop is still there after the second; then call NULL.
 */
static void null_call_routine(unsigned long unused)
{
	void (*null_fn)(void) = NULL;
	cpu_set_t cpus;
	int cpu = sched_getcpu();

	CPU_ZERO(&cpus);
	if (cpu >= 0) {
		CPU_SET(cpu, &cpus);
		sched_setaffinity(0, sizeof(cpus), &cpus);
	}
	raise(SIGSTOP);
	raise(SIGSTOP);
	/* a call the compiler cannot see is through NULL */
	asm ("" : "+r" (null_fn));
	null_fn();
}

#define DR_OFF(n)	((void *)offsetof(struct user, u_debugreg[n]))

/*
 * Run null_call_routine in @pid, stopped in spawn(), to its fault and
 * return the signal of that stop. DR0-DR3 are left holding address 0 but
 * disabled, as the CPU has them from reset (a CPU may then set their DR6
 * bits at IP 0: QEMU's TCG does); the breakpoints that load them are never
 * hit.
 */
static int run_null_call(struct __test_metadata *_metadata, pid_t pid,
			 bool traced)
{
	int status, i;

	cont_to_signal(_metadata, pid, 0, SIGSTOP);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, pid, DR_OFF(i), 0));
	/* L0-L3, instruction breakpoints */
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, pid, DR_OFF(7), 0x55));
	cont_to_signal(_metadata, pid, 0, SIGSTOP);
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, pid, DR_OFF(7), 0));
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, pid, 64 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, get_ip(_metadata, pid));
	return WSTOPSIG(status);
}

/*
 * A call through a NULL pointer gets SIGSEGV at IP 0, traced as untraced:
 * the forced step after the call is no SIGTRAP, whatever DR6 shows with it.
 * The call is the newest record.
 */
TEST_F(bts, null_call_sigsegv)
{
	struct bts_struct rec;
	int plain, traced;

	self->pid = spawn(_metadata, null_call_routine, 0, 0);
	plain = run_null_call(_metadata, self->pid, false);
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);
	EXPECT_EQ(SIGSEGV, plain);

	self->pid = spawn(_metadata, null_call_routine, 0, 0);
	traced = run_null_call(_metadata, self->pid, true);
	EXPECT_EQ(SIGSEGV, traced) {
		TH_LOG("traced: signal %d, untraced: %d", traced, plain);
	}
	ASSERT_LT(0, bts_size(self->pid));
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 0));
	EXPECT_EQ(0, rec.variant.lbr.to);
}

static const struct branch step_trace[] = {
	{ step_f0, step_t0 }, { step_f1, step_t1 },
};

/* PTRACE_SINGLESTEP still stops after every instruction. */
TEST_F(bts, with_singlestep)
{
	static const char *const ips[] = { step_f0, step_t0, step_f1, step_t1 };
	struct user_regs_struct regs;
	int i, status;

	self->pid = start_traced(_metadata, bts_step, step_s, 64);
	for (i = 0; i < ARRAY_SIZE(ips); i++) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_SINGLESTEP, self->pid, NULL, 0));
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
					(unsigned long)&regs));
		EXPECT_EQ((unsigned long)ips[i], REGS_IP(regs));
		EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	}
	cont_to(_metadata, self->pid, 0, step_e);
	check_trace(_metadata, self->pid, step_trace, ARRAY_SIZE(step_trace));
}

/*
 * Resume @pid with @req (PTRACE_SINGLESTEP or PTRACE_SINGLEBLOCK) until it
 * stops at @last; every stop must be a SIGTRAP. Returns the number of stops
 * and their IPs in @ips.
 */
static int step_stops(struct __test_metadata *_metadata, pid_t pid, long req,
		      const char *last, unsigned long *ips, int max)
{
	unsigned long ip = 0;
	int n = 0, status;

	while (ip != (unsigned long)last) {
		ASSERT_LT(n, max) {
			TH_LOG("no stop at %p after %d stops, the last at %#lx",
			       last, n, ip);
		}
		ASSERT_EQ(0, sys_ptrace(req, pid, NULL, 0));
		ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status)) {
			TH_LOG("signal %d at %#lx", WSTOPSIG(status),
			       get_ip(_metadata, pid));
		}
		ip = get_ip(_metadata, pid);
		ips[n++] = ip;
	}
	return n;
}

/* Are the @n stops at @ips the @n_exp labels of @exp? Logs where not. */
static bool stops_at(struct __test_metadata *_metadata, const char *what,
		     const unsigned long *ips, int n,
		     const char *const *exp, int n_exp)
{
	int i;

	for (i = 0; i < n && i < n_exp; i++)
		if (ips[i] != (unsigned long)exp[i])
			break;
	if (i == n && n == n_exp)
		return true;
	TH_LOG("%s: %d stops, %d expected; stop %d at %#lx, expected %p",
	       what, n, n_exp, i, i < n ? ips[i] : 0UL,
	       i < n_exp ? exp[i] : NULL);
	return false;
}

static bool same_stops(const unsigned long *a, int n_a,
		       const unsigned long *b, int n_b)
{
	return n_a == n_b && !memcmp(a, b, n_a * sizeof(*a));
}

/*
 * PTRACE_SINGLEBLOCK: where DEBUGCTL.BTF is honoured a stop only at branch
 * targets, else after every instruction, as under TCG. The emulated backend
 * gives the debugger the stops of BTF, whatever the CPU does with it; the
 * hardware backend leaves block stepping to the CPU.
 */
TEST_F(bts, with_singleblock)
{
	static const char *const targets[] = { step_t0, step_t1 };
	static const char *const every[] = { step_f0, step_t0, step_f1,
					     step_t1 };
	unsigned long ips[ARRAY_SIZE(every)];
	int n;

	self->pid = start_traced(_metadata, bts_step, step_s, 64);
	n = step_stops(_metadata, self->pid, PTRACE_SINGLEBLOCK, step_t1, ips,
		       ARRAY_SIZE(ips));
	if (bts_backend(self->pid) == PTRACE_BTS_BACKEND_EMULATED) {
		EXPECT_TRUE(stops_at(_metadata, "emulated", ips, n, targets,
				     ARRAY_SIZE(targets)));
	} else if (n != ARRAY_SIZE(targets)) {
		EXPECT_TRUE(stops_at(_metadata, "BTF ignored", ips, n, every,
				     ARRAY_SIZE(every)));
	} else {
		EXPECT_TRUE(stops_at(_metadata, "BTF", ips, n, targets,
				     ARRAY_SIZE(targets)));
	}
	cont_to(_metadata, self->pid, 0, step_e);
	check_trace(_metadata, self->pid, step_trace, ARRAY_SIZE(step_trace));
}

/* Where BTF stops in bts_block, from its labels. */
static const char *const block_stops[] = {
	block_t0, block_sc, block_fn, block_r2, block_t3, block_e,
};

static const struct branch block_trace[] = {
	{ block_f0, block_t0 }, { block_f1, block_fn }, { block_f2, block_r2 },
	{ block_f3, block_t3 },
};

/* Stops of an untraced bts_block from block_s to block_e under @req. */
static int untraced_block_stops(struct __test_metadata *_metadata, long req,
				unsigned long *ips, int max)
{
	pid_t pid = spawn(_metadata, run_routine, (unsigned long)bts_block, 0);
	int n;

	cont_to(_metadata, pid, 0, block_s);
	n = step_stops(_metadata, pid, req, block_e, ips, max);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, __WALL);
	return n;
}

#define BLOCK_MAX_STOPS		64

/*
 * The same block, block-stepped untraced and traced, gives the same stops
 * on a CPU that honours DEBUGCTL.BTF, with either backend. On one that
 * does not (TCG), block stepping untraced stops after every instruction, as
 * single stepping does; traced by the emulated backend it still stops at
 * exactly the branch targets the labels name, by the hardware backend as
 * untraced.
 */
TEST_F(bts, singleblock_as_untraced)
{
	unsigned long plain[BLOCK_MAX_STOPS], step[BLOCK_MAX_STOPS];
	unsigned long traced[BLOCK_MAX_STOPS];
	int n_plain, n_step, n_traced;
	bool btf;

	n_plain = untraced_block_stops(_metadata, PTRACE_SINGLEBLOCK, plain,
				       BLOCK_MAX_STOPS);
	n_step = untraced_block_stops(_metadata, PTRACE_SINGLESTEP, step,
				      BLOCK_MAX_STOPS);
	btf = n_plain == ARRAY_SIZE(block_stops);
	if (btf) {
		ASSERT_TRUE(stops_at(_metadata, "untraced, BTF", plain,
				     n_plain, block_stops,
				     ARRAY_SIZE(block_stops)));
	} else {
		/* BTF ignored: a block step is a single step. */
		ASSERT_TRUE(same_stops(plain, n_plain, step, n_step)) {
			TH_LOG("untraced: %d block stops, %d single stops",
			       n_plain, n_step);
		}
	}
	ksft_print_msg("DEBUGCTL.BTF %s: %d stops untraced\n",
		       btf ? "honoured" : "ignored", n_plain);

	self->pid = start_traced(_metadata, bts_block, block_s, 64);
	n_traced = step_stops(_metadata, self->pid, PTRACE_SINGLEBLOCK,
			      block_e, traced, BLOCK_MAX_STOPS);
	if (btf || bts_backend(self->pid) == PTRACE_BTS_BACKEND_HARDWARE) {
		EXPECT_TRUE(same_stops(traced, n_traced, plain, n_plain)) {
			TH_LOG("traced: %d stops, untraced %d", n_traced,
			       n_plain);
		}
	}
	if (bts_backend(self->pid) == PTRACE_BTS_BACKEND_EMULATED) {
		EXPECT_TRUE(stops_at(_metadata, "emulated", traced, n_traced,
				     block_stops, ARRAY_SIZE(block_stops)));
	}
	check_trace(_metadata, self->pid, block_trace,
		    ARRAY_SIZE(block_trace));
}

/*
 * A block step the emulation holds does not outlive the debugger's request:
 * stopped at a system call's exit in the middle of a block (a stop that
 * was no #DB), PTRACE_SINGLESTEP stops after the next instruction, and
 * PTRACE_CONT runs to the breakpoint. Either backend, either CPU.
 */
TEST_F(bts, singleblock_then_singlestep)
{
	unsigned long ips[BLOCK_MAX_STOPS];

	self->pid = start_traced(_metadata, bts_block, block_s, 64);
	step_stops(_metadata, self->pid, PTRACE_SINGLEBLOCK, block_sc, ips,
		   BLOCK_MAX_STOPS);
	EXPECT_EQ(1, step_stops(_metadata, self->pid, PTRACE_SINGLESTEP,
				block_n1, ips, 1));
	EXPECT_EQ(1, step_stops(_metadata, self->pid, PTRACE_SINGLEBLOCK,
				block_fn, ips, 1));
	cont_to(_metadata, self->pid, 0, block_e);
	check_trace(_metadata, self->pid, block_trace,
		    ARRAY_SIZE(block_trace));
}

TEST_HARNESS_MAIN
