// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace: the PTRACE_BTS_* requests.
 *
 * The tracee runs the assembly routines of ptrace_bts_asm.S, so each test
 * knows every branch it must find, at its exact source and target, and
 * checks the trace record by record. The tests run unchanged on the
 * hardware backend and on the emulated one; on CPUs without BTS (any VM
 * under TCG) the emulated one is what they exercise. Every allocation is
 * checked to have landed on the backend the kernel says the machine has:
 * the CPU's BTS where the kernel drives it (an Intel CPU listing "bts" and
 * "dtes64" in /proc/cpuinfo) and ds.force_emulation is off, else the
 * emulation. A kernel that quietly falls back to the other
 * backend fails.
 *
 * Every test that configures tracing also shows that records arrive, so
 * that a kernel that records nothing fails them too.
 *
 * Every test that traces checks on its way out that the memory charge of
 * the buffers (VmPin of the tracer) is back to zero.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/ucontext.h>
#include <sys/user.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/elf.h>
#include <linux/userfaultfd.h>
#ifndef __x86_64__
#include <asm/ldt.h>
#endif
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "helpers.h"
#include "ptrace_bts.h"
#include "ptrace_bts_util.h"

#define BTS_REC			sizeof(struct bts_struct)
/* The first struct ptrace_bts_config, without backend; and today's. */
#define BTS_CONFIG_SIZE_VER0	16
#define BTS_CONFIG_SIZE_VER1	20
/* The kernel's per-buffer cap, DS_MAX_BUFFER_SIZE. */
#define BTS_MAX_BUFFER		(4u << 20)
#define BTS_MAX_RECORDS		(BTS_MAX_BUFFER / BTS_REC)
/* Records the kernel's DRAIN converts at a time: a page. */
#define BTS_DRAIN_BATCH		(4096 / BTS_REC)
#define BTS_OVERFLOW_SIG	SIGUSR2
#define BTS_TRACE_ALLOC		(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC)

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
# define REGS_IP_OFF	offsetof(struct user_regs_struct, rip)
# define REG_AX		rax
# define REG_CX		rcx
# define REG_SP		rsp
#else
# define REGS_IP(r)	((r).eip)
# define REGS_IP_OFF	offsetof(struct user_regs_struct, eip)
# define REG_AX		eax
# define REG_CX		ecx
# define REG_SP		esp
#endif

void *bts_fault_addr;
void *bts_low_stack;

/* One expected branch. */
struct branch {
	const char *from;
	const char *to;
};

static const struct branch jmp_trace[] = {
	{ jmp_f0, jmp_t0 }, { jmp_f1, jmp_t1 },
	{ jmp_f3, jmp_f2 }, { jmp_f2, jmp_t2 },
};

/*
 * The refund may be deferred past the tracee's reaping (release from a
 * work item, like the 2.6.31 code did); give it a second.
 */
static long vmpin_settled_kb(void)
{
	long kb;
	int i;

	for (i = 0; i < 100; i++) {
		kb = vmpin_kb(0);
		if (kb == 0)
			break;
		usleep(10000);
	}
	return kb;
}

static long bts_config_backend(pid_t pid, unsigned int size,
			       unsigned int flags, unsigned int sig,
			       unsigned int backend)
{
	struct ptrace_bts_config cfg = {
		.size = size, .flags = flags, .signal = sig, .backend = backend,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
}

/* The backend STATUS reports for @pid, or -1. */
static long bts_backend(pid_t pid)
{
	struct ptrace_bts_config cfg;

	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		return -1;
	return cfg.backend;
}

/* After a CONFIG with O_ALLOC: is @pid traced by the backend expected? */
static bool backend_as_expected(pid_t pid)
{
	return bts_backend(pid) == expected_backend();
}

/* STATUS of @pid; it returns the size of today's struct. */
static void get_status(struct __test_metadata *_metadata, pid_t pid,
		       struct ptrace_bts_config *cfg)
{
	memset(cfg, 0xa5, sizeof(*cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER1,
		  sys_ptrace(PTRACE_BTS_STATUS, pid, cfg, sizeof(*cfg))) {
		TH_LOG("PTRACE_BTS_STATUS: %m");
	}
}

static void check_backend(struct __test_metadata *_metadata, pid_t pid)
{
	EXPECT_TRUE(backend_as_expected(pid)) {
		TH_LOG("backend %ld, want %s", bts_backend(pid),
		       backend_name(expected_backend()));
	}
}

/*
 * CONFIG with PTRACE_BTS_BACKEND_ANY; a successful allocation must have
 * landed on the backend the run expects. errno is kept for the caller.
 */
static long bts_config(struct __test_metadata *_metadata, pid_t pid,
		       unsigned int size, unsigned int flags, unsigned int sig)
{
	long ret = bts_config_backend(pid, size, flags, sig,
				      PTRACE_BTS_BACKEND_ANY);

	if (!ret && (flags & BTS_TRACE_ALLOC) == BTS_TRACE_ALLOC)
		check_backend(_metadata, pid);
	return ret;
}

static long bts_size(pid_t pid)
{
	return sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
}

/* Start a child that stops itself for its parent, then runs @fn(@arg). */
static pid_t spawn(struct __test_metadata *_metadata,
		   void (*fn)(unsigned long), unsigned long arg,
		   unsigned long options)
{
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(90);
		kill(getpid(), SIGSTOP);
		fn(arg);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(SIGSTOP, WSTOPSIG(status));
	/* A failed assert must not leave a tracee spinning on a CPU. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
				PTRACE_O_EXITKILL | options));
	return pid;
}

static unsigned long get_ip(struct __test_metadata *_metadata, pid_t pid)
{
	struct user_regs_struct regs;

	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, pid, NULL,
				(unsigned long)&regs)) {
		TH_LOG("PTRACE_GETREGS: %m");
	}
	return REGS_IP(regs);
}

/* Wait for @pid's stop at the breakpoint before @ip; anything else fails. */
static void wait_trap_at(struct __test_metadata *_metadata, pid_t pid,
			 const char *ip)
{
	int status;

	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("status %#x, expected a stop at %p", status, ip);
	}
	ASSERT_EQ(SIGTRAP, WSTOPSIG(status)) {
		TH_LOG("stop with signal %d at %#lx, expected SIGTRAP at %p",
		       WSTOPSIG(status), get_ip(_metadata, pid), ip);
	}
	ASSERT_EQ((unsigned long)ip, get_ip(_metadata, pid));
}

/*
 * Resume @pid (delivering @sig) and wait for its next stop, which must be
 * the breakpoint before @ip. Any other stop (a stray SIGTRAP, a signal,
 * an exit) fails the test.
 */
static void cont_to(struct __test_metadata *_metadata, pid_t pid, int sig,
		    const char *ip)
{
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, sig));
	wait_trap_at(_metadata, pid, ip);
}

/* Resume @pid and wait for a stop with @sig; returns the stop's IP. */
static unsigned long cont_to_signal(struct __test_metadata *_metadata,
				    pid_t pid, int deliver, int sig)
{
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, deliver));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("status %#x, expected signal %d", status, sig);
	}
	ASSERT_EQ(sig, WSTOPSIG(status)) {
		TH_LOG("stop at %#lx", get_ip(_metadata, pid));
	}
	return get_ip(_metadata, pid);
}

/* Wait for any stop of the tracee's threads; returns the tid. */
static pid_t wait_any(struct __test_metadata *_metadata, int *status)
{
	pid_t tid = waitpid(-1, status, __WALL);

	ASSERT_LT(0, tid);
	return tid;
}

static void run_routine(unsigned long fn)
{
	((void (*)(void))fn)();
}

/*
 * Start a tracee that runs @fn, stopped at its first breakpoint (@start),
 * with branch tracing into a @records record buffer.
 */
static pid_t start_traced(struct __test_metadata *_metadata, void (*fn)(void),
			  const char *start, unsigned int records)
{
	pid_t pid = spawn(_metadata, run_routine, (unsigned long)fn, 0);

	cont_to(_metadata, pid, 0, start);
	ASSERT_EQ(0, bts_config(_metadata, pid, records * BTS_REC, BTS_TRACE_ALLOC, 0)) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	return pid;
}

/*
 * The top of user space: 47 bits for 64-bit tasks; for 32-bit ones the
 * 3 GiB split of an i386 kernel, or nearly 4 GiB (TASK_SIZE of a compat
 * task, below the last page) on a 64-bit kernel.
 */
static bool user_address(__u64 addr)
{
#ifdef __x86_64__
	return addr < (1ULL << 47);
#else
	static __u64 limit;
	struct utsname u;

	if (!limit)
		limit = !uname(&u) && !strcmp(u.machine, "x86_64") ?
			0xffffe000ULL : 0xc0000000ULL;
	return addr < limit;
#endif
}

/* Compare @n records against @exp, both oldest first. */
static void check_records(struct __test_metadata *_metadata,
			  const struct bts_struct *rec, long n,
			  const struct branch *exp, long n_exp)
{
	long i;

	ASSERT_EQ(n_exp, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(BTS_BRANCH, rec[i].qualifier);
		EXPECT_EQ((unsigned long)exp[i].from, rec[i].variant.lbr.from);
		EXPECT_EQ((unsigned long)exp[i].to, rec[i].variant.lbr.to);
		EXPECT_TRUE(user_address(rec[i].variant.lbr.from));
		EXPECT_TRUE(user_address(rec[i].variant.lbr.to));
		if (rec[i].variant.lbr.from != (unsigned long)exp[i].from ||
		    rec[i].variant.lbr.to != (unsigned long)exp[i].to)
			TH_LOG("record %ld: %#llx -> %#llx, expected %p -> %p", i,
			       (unsigned long long)rec[i].variant.lbr.from,
			       (unsigned long long)rec[i].variant.lbr.to,
			       exp[i].from, exp[i].to);
	}
}

/* DRAIN the tracee's buffer and compare it against @exp. */
static void check_trace(struct __test_metadata *_metadata, pid_t pid,
			const struct branch *exp, long n_exp)
{
	struct bts_struct rec[64];
	long n;

	ASSERT_LE(n_exp, 64);
	ASSERT_EQ(n_exp, bts_size(pid));
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, rec, sizeof(rec));
	ASSERT_EQ(n_exp, n) {
		TH_LOG("PTRACE_BTS_DRAIN: %m");
	}
	check_records(_metadata, rec, n, exp, n_exp);
	EXPECT_EQ(0, bts_size(pid));
}

/*
 * Trace @fn from @start to @end and check the trace against the @n_exp
 * branches of @exp; the tracee goes to *@pid for the teardown to kill.
 */
static void trace_routine(struct __test_metadata *_metadata, pid_t *pid,
			  void (*fn)(void), const char *start, const char *end,
			  const struct branch *exp, long n_exp)
{
	*pid = start_traced(_metadata, fn, start, 64);
	cont_to(_metadata, *pid, 0, end);
	check_trace(_metadata, *pid, exp, n_exp);
}

#define TRACE_ROUTINE(fn, start, end, exp, n_exp)			\
	trace_routine(_metadata, &self->pid, fn, start, end, exp, n_exp)

/* A tracee of bts_jmp, stopped at jmp_s, not configured yet. */
static pid_t spawn_jmp(struct __test_metadata *_metadata)
{
	pid_t pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);

	cont_to(_metadata, pid, 0, jmp_s);
	return pid;
}

/*
 * Run the body of bts_jmp (again) from jmp_s to jmp_e, and check that the
 * buffer, of @capacity records, holds the newest of its branches: proof
 * that the configuration in place traces.
 */
static void rerun_jmp(struct __test_metadata *_metadata, pid_t pid,
		      long capacity)
{
	long n = capacity < ARRAY_SIZE(jmp_trace) ? capacity :
						    ARRAY_SIZE(jmp_trace);

	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, pid, (void *)REGS_IP_OFF,
				(unsigned long)jmp_s));
	cont_to(_metadata, pid, 0, jmp_e);
	check_trace(_metadata, pid, jmp_trace + ARRAY_SIZE(jmp_trace) - n, n);
}

/* Read record @index (0 the newest) with GET; false if that fails. */
static bool get_record(pid_t pid, long index, struct bts_struct *rec)
{
	memset(rec, 0, sizeof(*rec));
	return !sys_ptrace(PTRACE_BTS_GET, pid, rec, index);
}

/* The @n_exp oldest records, read with GET (nothing drained), are @exp. */
static void check_oldest(struct __test_metadata *_metadata, pid_t pid,
			 const struct branch *exp, long n_exp)
{
	struct bts_struct rec[16];
	long size = bts_size(pid), i;

	ASSERT_LE(n_exp, ARRAY_SIZE(rec));
	ASSERT_LE(n_exp, size);
	for (i = 0; i < n_exp; i++)
		ASSERT_TRUE(get_record(pid, size - 1 - i, &rec[i]));
	check_records(_metadata, rec, n_exp, exp, n_exp);
}

/* The @n_exp newest records, read with GET, are @exp (oldest first). */
static void check_newest(struct __test_metadata *_metadata, pid_t pid,
			 const struct branch *exp, long n_exp)
{
	struct bts_struct rec[16];
	long i;

	ASSERT_LE(n_exp, ARRAY_SIZE(rec));
	for (i = 0; i < n_exp; i++)
		ASSERT_TRUE(get_record(pid, n_exp - 1 - i, &rec[i]));
	check_records(_metadata, rec, n_exp, exp, n_exp);
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* How long a running tracee gets to record what a test waits for. */
#define BTS_WAIT_MS		20000
#define BTS_POLL_MS		10

/*
 * Let the running tracee @pid record until its buffer holds @want records
 * (under TCG that can take long), polling it with SIGSTOP; returns the
 * count, or -1, with @pid in the SIGSTOP stop. No harness asserts, so
 * that a forked tracer can use it too.
 */
static long stop_when_recorded(pid_t pid, long want)
{
	long n = -1;
	int status, waited;

	for (waited = 0; waited < BTS_WAIT_MS; waited += BTS_POLL_MS) {
		sleep_ms(BTS_POLL_MS);
		if (kill(pid, SIGSTOP) || waitpid(pid, &status, __WALL) != pid ||
		    !WIFSTOPPED(status) || WSTOPSIG(status) != SIGSTOP)
			return -1;
		n = bts_size(pid);
		if (n < 0 || n >= want ||
		    sys_ptrace(PTRACE_CONT, pid, NULL, 0))
			break;
	}
	return n;
}

FIXTURE(bts) {
	pid_t pid;	/* the tracee, killed at teardown */
};

FIXTURE_SETUP(bts)
{
	self->pid = 0;
	ASSERT_EQ(0, vmpin_kb(0));
}

FIXTURE_TEARDOWN(bts)
{
	/*
	 * Reap every thread: a traced thread's exit waits for its tracer,
	 * and the leader's waits for all of them.
	 */
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		while (waitpid(-1, NULL, __WALL) > 0)
			;
	}
	/* Whatever path the test took, the charge must be refunded. */
	EXPECT_EQ(0, vmpin_settled_kb());
}

/* ---- The requests ---- */

/*
 * An unconfigured tracee answers every request: STATUS and SIZE report
 * nothing, GET has no record, CLEAR and DRAIN have nothing to do.
 */
TEST_F(bts, unconfigured_requests)
{
	struct ptrace_bts_config cfg;
	struct bts_struct rec;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, cfg.signal);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, &rec,
				sizeof(rec)));
	EXPECT_EQ(0, vmpin_kb(0));
}

/* CONFIG allocates, STATUS reports back what was configured. */
TEST_F(bts, config_status)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 10 * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(10 * BTS_REC, cfg.size);
	/* O_ALLOC is an action, not a state: STATUS need not report it. */
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL,
		  cfg.flags & ~PTRACE_BTS_O_ALLOC);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_NE(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_LT(0, vmpin_kb(0));
	rerun_jmp(_metadata, self->pid, 10);
}

/* Without O_SIGNAL the signal is ignored: STATUS shows none, none comes. */
TEST_F(bts, config_signal_needs_o_signal)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 2 * BTS_REC,
				BTS_TRACE_ALLOC, BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_EQ(0, cfg.signal);
	/* four branches into two records: wraps, no signal stop */
	rerun_jmp(_metadata, self->pid, 2);
}

/*
 * Sizes are rounded down to whole records, with at least one; each buffer
 * then keeps exactly that many of bts_jmp's branches.
 */
TEST_F(bts, config_rounds_to_records)
{
	static const unsigned int asked[] = { 4096, 30, 1, 3 * BTS_REC + 23 };
	static const unsigned int got[] = { 170, 1, 1, 3 };
	struct ptrace_bts_config cfg;
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(asked); i++) {
		ASSERT_EQ(0, bts_config(_metadata, self->pid, asked[i],
					BTS_TRACE_ALLOC, 0));
		get_status(_metadata, self->pid, &cfg);
		EXPECT_EQ(got[i] * BTS_REC, cfg.size) {
			TH_LOG("asked for %u bytes", asked[i]);
		}
		rerun_jmp(_metadata, self->pid, got[i]);
	}
}

/* O_ALLOC again resizes the buffer and drops the records. */
TEST_F(bts, config_resize)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(4, bts_size(self->pid));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 2 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(0, bts_size(self->pid));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(2 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags & ~PTRACE_BTS_O_ALLOC);
	rerun_jmp(_metadata, self->pid, 2);
}

/* Without O_ALLOC only the flags change: buffer and records stay. */
TEST_F(bts, config_flags_only)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0,
				PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(16 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL, cfg.flags);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	/* and the buffer goes on recording with the new flags */
	rerun_jmp(_metadata, self->pid, 16);
}

/* Changing the flags needs a buffer to keep; allocating one works. */
TEST_F(bts, config_flags_need_buffer)
{
	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE,
				 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	rerun_jmp(_metadata, self->pid, 16);
}

/* Flags without O_TRACE stop tracing and free the buffer. */
TEST_F(bts, config_disable)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	rerun_jmp(_metadata, self->pid, 16);
	ASSERT_LT(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, vmpin_settled_kb());
	/* and nothing is recorded any more */
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, self->pid, (void *)REGS_IP_OFF,
				(unsigned long)jmp_s));
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(0, bts_size(self->pid));
}

/* SIZE counts, GET reads one record, index 0 being the newest. */
TEST_F(bts, size_and_get)
{
	struct bts_struct rec;
	int i, n = ARRAY_SIZE(jmp_trace);

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(n, bts_size(self->pid));
	for (i = 0; i < n; i++) {
		memset(&rec, 0, sizeof(rec));
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, i)) {
			TH_LOG("PTRACE_BTS_GET %d: %m", i);
		}
		EXPECT_EQ(BTS_BRANCH, rec.qualifier);
		EXPECT_EQ((unsigned long)jmp_trace[n - 1 - i].from,
			  rec.variant.lbr.from);
		EXPECT_EQ((unsigned long)jmp_trace[n - 1 - i].to,
			  rec.variant.lbr.to);
	}
	/* GET does not consume */
	EXPECT_EQ(n, bts_size(self->pid));
}

/* GET beyond SIZE is EINVAL, also on an empty buffer. */
TEST_F(bts, get_bad_index)
{
	struct bts_struct rec;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 0));
	EXPECT_EQ(EINVAL, errno);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 4));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, -1UL));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 3));
	EXPECT_EQ((unsigned long)jmp_f0, rec.variant.lbr.from);
}

/* CLEAR empties the buffer and tracing goes on. */
TEST_F(bts, clear)
{
	static const struct branch tail[] = { { many_f1, many_t1 } };

	self->pid = spawn(_metadata, (void (*)(unsigned long))bts_many, 1, 0);
	cont_to(_metadata, self->pid, 0, many_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0));
	/* nothing yet: CLEAR of an empty buffer */
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	cont_to(_metadata, self->pid, 0, many_e);
	ASSERT_EQ(1, bts_size(self->pid));
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(0, bts_size(self->pid));
	/* the tracer moves the tracee back: only the new branch is recorded */
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, self->pid, (void *)REGS_IP_OFF,
				(unsigned long)many_f1));
	cont_to(_metadata, self->pid, 0, many_e);
	check_trace(_metadata, self->pid, tail, ARRAY_SIZE(tail));
}

/* DRAIN copies oldest first, returns the count and empties. */
TEST_F(bts, drain)
{
	TRACE_ROUTINE(bts_jmp, jmp_s, jmp_e, jmp_trace, ARRAY_SIZE(jmp_trace));
	/* draining an empty buffer copies nothing */
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, NULL, 0));
}

/* DRAIN into a buffer too small is EINVAL, and drops nothing. */
TEST_F(bts, drain_too_small)
{
	struct bts_struct rec[4];

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				 sizeof(rec) - 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, 0));
	EXPECT_EQ(EINVAL, errno);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* STATUS fills min(len, its size) bytes and always returns its size. */
TEST_F(bts, status_len)
{
	static const unsigned long lens[] = {
		0, sizeof(__u32), BTS_CONFIG_SIZE_VER0, BTS_CONFIG_SIZE_VER1,
		2 * BTS_CONFIG_SIZE_VER1,
	};
	unsigned char buf[2 * BTS_CONFIG_SIZE_VER1];
	struct ptrace_bts_config *cfg = (void *)buf;
	int i, j;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(BTS_CONFIG_SIZE_VER1,
		  sys_ptrace(PTRACE_BTS_STATUS, self->pid, NULL, 0));
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		memset(buf, 0xa5, sizeof(buf));
		ASSERT_EQ(BTS_CONFIG_SIZE_VER1,
			  sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
				     lens[i]));
		if (lens[i] >= sizeof(__u32))
			EXPECT_EQ(8 * BTS_REC, cfg->size);
		if (lens[i] >= BTS_CONFIG_SIZE_VER0)
			EXPECT_EQ(BTS_REC, cfg->bts_size);
		if (lens[i] >= BTS_CONFIG_SIZE_VER1)
			EXPECT_NE(PTRACE_BTS_BACKEND_ANY, cfg->backend);
		for (j = lens[i] < BTS_CONFIG_SIZE_VER1 ? lens[i] :
			 BTS_CONFIG_SIZE_VER1; j < sizeof(buf); j++) {
			EXPECT_EQ(0xa5, buf[j]) {
				TH_LOG("len %lu: byte %d written", lens[i], j);
			}
		}
	}
}

/* A tracer built against the 16-byte struct works as it always did. */
TEST_F(bts, config_status_ver0)
{
	unsigned char buf[BTS_CONFIG_SIZE_VER1];
	struct ptrace_bts_config *cfg = (void *)buf;
	int i;

	self->pid = spawn_jmp(_metadata);
	/* bytes past the old struct are not read: no E2BIG, no backend */
	memset(buf, 0xff, sizeof(buf));
	cfg->size = 8 * BTS_REC;
	cfg->flags = BTS_TRACE_ALLOC;
	cfg->signal = 0;
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, buf,
				BTS_CONFIG_SIZE_VER0)) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	check_backend(_metadata, self->pid);
	memset(buf, 0xa5, sizeof(buf));
	EXPECT_EQ(BTS_CONFIG_SIZE_VER1,
		  sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
			     BTS_CONFIG_SIZE_VER0));
	EXPECT_EQ(8 * BTS_REC, cfg->size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg->flags);
	EXPECT_EQ(BTS_REC, cfg->bts_size);
	for (i = BTS_CONFIG_SIZE_VER0; i < sizeof(buf); i++)
		EXPECT_EQ(0xa5, buf[i]);
	rerun_jmp(_metadata, self->pid, 8);
}

/* ---- Errors ---- */

/* The request numbers are ABI; the numbers next to them are no requests. */
TEST_F(bts, bad_request)
{
	EXPECT_EQ(40, PTRACE_BTS_CONFIG);
	EXPECT_EQ(41, PTRACE_BTS_STATUS);
	EXPECT_EQ(42, PTRACE_BTS_SIZE);
	EXPECT_EQ(43, PTRACE_BTS_GET);
	EXPECT_EQ(44, PTRACE_BTS_CLEAR);
	EXPECT_EQ(45, PTRACE_BTS_DRAIN);
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, sys_ptrace(39, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(-1, sys_ptrace(46, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
}

/* CONFIG with less than the original struct is EINVAL. */
TEST_F(bts, config_bad_len)
{
	struct ptrace_bts_config cfg = {
		.size = 8 * BTS_REC, .flags = BTS_TRACE_ALLOC,
	};

	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				 BTS_CONFIG_SIZE_VER0 - 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_EQ(0, vmpin_kb(0));
	/* the same struct with its length is fine */
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				sizeof(cfg)));
	check_backend(_metadata, self->pid);
	rerun_jmp(_metadata, self->pid, 8);
}

/*
 * A larger struct is fine with a zero tail, up to a page; E2BIG with a
 * non-zero tail or beyond a page.
 */
TEST_F(bts, config_extensible)
{
	const size_t page = sysconf(_SC_PAGESIZE);
	struct ptrace_bts_config cfg, *big;

	big = calloc(1, page + sizeof(__u32));
	ASSERT_FALSE(!big);
	big->size = 8 * BTS_REC;
	big->flags = BTS_TRACE_ALLOC;
	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big,
				 page + sizeof(__u32)));
	EXPECT_EQ(E2BIG, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big, page));
	check_backend(_metadata, self->pid);
	((unsigned char *)big)[page - 1] = 1;
	big->size = 2 * BTS_REC;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big, page));
	EXPECT_EQ(E2BIG, errno);
	free(big);
	/* the failed calls changed nothing */
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(8 * BTS_REC, cfg.size);
	rerun_jmp(_metadata, self->pid, 8);
}

/* Unknown flags and bad signal numbers are EINVAL. */
TEST_F(bts, config_bad_flags)
{
	static const unsigned int bad_flags[] = {
		0x10, 0x80000000, BTS_TRACE_ALLOC | 0x100,
	};
	static const unsigned int bad_sigs[] = { 0, 1000 };
	const unsigned int with_sig = BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL;
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(bad_flags); i++) {
		EXPECT_EQ(-1, bts_config(_metadata, self->pid, 8 * BTS_REC,
					 bad_flags[i], 0));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("flags %#x", bad_flags[i]);
		}
	}
	for (i = 0; i < ARRAY_SIZE(bad_sigs); i++) {
		EXPECT_EQ(-1, bts_config(_metadata, self->pid, 8 * BTS_REC,
					 with_sig, bad_sigs[i]));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("signal %u", bad_sigs[i]);
		}
	}
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC, with_sig,
				BTS_OVERFLOW_SIG));
	rerun_jmp(_metadata, self->pid, 8);
}

/* Bad user pointers are EFAULT; a failed DRAIN drops nothing. */
TEST_F(bts, bad_pointer)
{
	void *bad = (void *)8;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, bad,
				 sizeof(struct ptrace_bts_config)));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_STATUS, self->pid, bad,
				 sizeof(struct ptrace_bts_config)));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, bad, 0));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, bad,
				 16 * BTS_REC));
	EXPECT_EQ(EFAULT, errno);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/*
 * Exit status of a child that issues every request on @pid: 0 if each
 * failed with ESRCH, else 10 + the index of the first one that did not.
 */
static int all_requests_errno(pid_t pid)
{
	struct ptrace_bts_config cfg = { .size = 8 * BTS_REC,
					 .flags = BTS_TRACE_ALLOC };
	struct bts_struct rec[8];
	const struct {
		long request;
		void *addr;
		unsigned long data;
	} req[] = {
		{ PTRACE_BTS_CONFIG, &cfg, sizeof(cfg) },
		{ PTRACE_BTS_STATUS, &cfg, sizeof(cfg) },
		{ PTRACE_BTS_SIZE, NULL, 0 },
		{ PTRACE_BTS_GET, rec, 0 },
		{ PTRACE_BTS_CLEAR, NULL, 0 },
		{ PTRACE_BTS_DRAIN, rec, sizeof(rec) },
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(req); i++) {
		errno = 0;
		if (sys_ptrace(req[i].request, pid, req[i].addr,
			       req[i].data) != -1 || errno != ESRCH)
			return 10 + i;
	}
	return 0;
}

static void spin(unsigned long unused)
{
	for (;;)
		asm volatile ("" ::: "memory");
}

/* Only the tracer may ask: ESRCH for a non-tracer, traced or not. */
TEST_F(bts, not_tracer)
{
	pid_t other, untraced;
	int status;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	other = fork();
	ASSERT_GE(other, 0);
	if (other == 0)
		_exit(all_requests_errno(self->pid));
	ASSERT_EQ(other, waitpid(other, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));

	untraced = fork();
	ASSERT_GE(untraced, 0);
	if (untraced == 0) {
		pause();
		_exit(0);
	}
	EXPECT_EQ(0, all_requests_errno(untraced));
	kill(untraced, SIGKILL);
	waitpid(untraced, NULL, 0);
	/* the failed attempts left the tracee's buffer alone */
	cont_to(_metadata, self->pid, 0, jmp_e);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* A running tracee is ESRCH, like PTRACE_PEEKUSR. */
TEST_F(bts, running_tracee)
{
	self->pid = spawn(_metadata, spin, 0, 0);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	EXPECT_EQ(0, all_requests_errno(self->pid));
	/* stopped again, it answers; the spin loop fills the buffer */
	EXPECT_EQ(8, stop_when_recorded(self->pid, 8));
}

/* Buffers above DS_MAX_BUFFER_SIZE are EINVAL; the cap itself is fine. */
TEST_F(bts, too_large)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, BTS_MAX_BUFFER + BTS_REC,
				 BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0xffffffff, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_MAX_BUFFER, BTS_TRACE_ALLOC, 0));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(BTS_MAX_BUFFER / BTS_REC * BTS_REC, cfg.size);
}

/* Drop CAP_IPC_LOCK from the effective set of this (test) process. */
static void drop_cap(struct __test_metadata *_metadata, int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	ASSERT_EQ(0, syscall(SYS_capget, &hdr, data));
	data[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
	ASSERT_EQ(0, syscall(SYS_capset, &hdr, data));
}

static void drop_ipc_lock(struct __test_metadata *_metadata)
{
	drop_cap(_metadata, CAP_IPC_LOCK);
}

/* Without CAP_IPC_LOCK, RLIMIT_MEMLOCK bounds the buffer: ENOMEM. */
TEST_F(bts, memlock_limit)
{
	struct rlimit lim = { 64 << 10, 64 << 10 };

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	drop_ipc_lock(_metadata);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &lim));
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 1 << 20, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	/* within the limit it works, and is charged */
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 32 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(28, vmpin_kb(0));
	EXPECT_GE(64, vmpin_kb(0));
	EXPECT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmpin_settled_kb());
}

/* The charge follows the buffer size through allocation and resizing. */
TEST_F(bts, memory_charge)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 256 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(252, vmpin_kb(0));
	EXPECT_GE(256 + 16, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(12, vmpin_kb(0));
	EXPECT_GE(16 + 16, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmpin_settled_kb());
}

/*
 * The memory cgroup the tracer runs in is charged for what its requests
 * allocate: the buffer (vmalloc) and the small objects beside it (slab).
 * Enough tracees that the slab charge stands out of the per-CPU batching
 * of the cgroup's statistics (under a page per CPU). The statistics are
 * flushed every two seconds at the latest: each reading waits for that.
 */
#define MEMCG_TRACEES			64
#define MEMCG_MIN_SLAB_PER_TRACEE	256
#define MEMCG_FLUSH_WAIT_US		(2500 * 1000)

struct memcg {
	char	mnt[32];	/* a private cgroup2 mount */
	char	dir[64];	/* the test's cgroup, under it */
	char	home[256];	/* where the process was, under it */
	bool	mounted;
	bool	enabled;	/* the test enabled +memory on the root */
};

static void memcg_leave(struct memcg *mc)
{
	char dir[sizeof(mc->mnt) + sizeof(mc->home)];

	snprintf(dir, sizeof(dir), "%s%s", mc->mnt, mc->home);
	cgroup_write(dir, "cgroup.procs", "0");
	rmdir(mc->dir);
	if (mc->enabled)
		cgroup_write(mc->mnt, "cgroup.subtree_control", "-memory");
	if (mc->mounted) {
		umount(mc->mnt);
		rmdir(mc->mnt);
	}
}

/*
 * Into a child cgroup of the root with the memory controller, through a
 * private cgroup2 mount. Returns NULL, or why not (nothing left behind):
 * no cgroup2, or cgroup v1 holding the memory controller.
 */
static const char *memcg_enter(struct memcg *mc)
{
	const char *why = NULL;
	char line[300];
	int err;
	FILE *f;

	memset(mc, 0, sizeof(*mc));
	strcpy(mc->mnt, "/tmp/ptrace_bts_cg.XXXXXX");
	if (!mkdtemp(mc->mnt))
		return "mkdtemp";
	if (mount("none", mc->mnt, "cgroup2", 0, NULL)) {
		rmdir(mc->mnt);
		return "no cgroup2 (CONFIG_CGROUPS)";
	}
	mc->mounted = true;
	/* Listed only once cgroup2 has been mounted somewhere. */
	f = fopen("/proc/self/cgroup", "r");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "0::", 3))
				sscanf(line + 3, "%255s", mc->home);
		fclose(f);
	}
	if (!mc->home[0]) {
		why = "not in the cgroup2 hierarchy";
		goto leave;
	}
	snprintf(mc->dir, sizeof(mc->dir), "%s/ptrace_bts", mc->mnt);
	if (!cgroup_lists(mc->mnt, "cgroup.subtree_control", "memory")) {
		if (cgroup_write(mc->mnt, "cgroup.subtree_control", "+memory")) {
			why = "no memory controller for cgroup2 (CONFIG_MEMCG)";
			goto leave;
		}
		mc->enabled = true;
	}
	if (mkdir(mc->dir, 0755) && errno != EEXIST) {
		why = "mkdir";
		goto leave;
	}
	if (cgroup_write(mc->dir, "cgroup.procs", "0")) {
		why = "cgroup.procs";
		goto leave;
	}
	return NULL;

leave:
	err = errno;
	memcg_leave(mc);
	errno = err;
	return why;
}

TEST_F(bts, memcg_charge)
{
	long long slab0, vmalloc0, slab1, vmalloc1;
	pid_t pids[MEMCG_TRACEES];
	struct memcg mc;
	const char *why;
	int i, err = 0;

	why = memcg_enter(&mc);
	if (why)
		SKIP(return, "%s: %s", why, strerror(errno));
	for (i = 0; i < MEMCG_TRACEES; i++)
		pids[i] = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	usleep(MEMCG_FLUSH_WAIT_US);
	slab0 = cgroup_read(mc.dir, "memory.stat", "slab_unreclaimable");
	vmalloc0 = cgroup_read(mc.dir, "memory.stat", "vmalloc");
	for (i = 0; i < MEMCG_TRACEES && !err; i++)
		err = bts_config(_metadata, pids[i], 4096, BTS_TRACE_ALLOC, 0);
	usleep(MEMCG_FLUSH_WAIT_US);
	slab1 = cgroup_read(mc.dir, "memory.stat", "slab_unreclaimable");
	vmalloc1 = cgroup_read(mc.dir, "memory.stat", "vmalloc");
	for (i = 0; i < MEMCG_TRACEES; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, __WALL);
	}
	memcg_leave(&mc);
	ASSERT_EQ(0, err);
	ASSERT_LE(0, slab0);
	ASSERT_LE(0, vmalloc0);
	EXPECT_LE(MEMCG_TRACEES * 4096LL, vmalloc1 - vmalloc0);
	EXPECT_LE(MEMCG_TRACEES * MEMCG_MIN_SLAB_PER_TRACEE,
		  slab1 - slab0) {
		TH_LOG("slab charge %lld bytes for %d tracers", slab1 - slab0,
		       MEMCG_TRACEES);
	}
}

/* ---- Backends ---- */

/* The emulated backend is built in, and on (ds.emulation). */
static bool have_emulation(void)
{
	return bts_emulation_present();
}

/*
 * PTRACE_BTS_BACKEND_ANY gives the CPU's BTS, unless ds.force_emulation
 * (or perf's policy, for a user other than root), else the emulation.
 */
TEST_F(bts, backend_reported)
{
	/* For whoever boots the kernel, to hold against the machine. */
	ksft_print_msg("expected backend: %s\n",
		       backend_name(expected_backend()));
	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(expected_backend(), bts_backend(self->pid));
	rerun_jmp(_metadata, self->pid, 8);
}

/*
 * Allocate with @backend explicitly: it must trace with exactly that one
 * when @present, else fail with EOPNOTSUPP and allocate nothing.
 */
static void config_explicit(struct __test_metadata *_metadata, pid_t pid,
			    unsigned int backend, bool present)
{
	long ret = bts_config_backend(pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0,
				      backend);

	if (!present) {
		EXPECT_EQ(-1, ret);
		EXPECT_EQ(EOPNOTSUPP, errno);
		EXPECT_EQ(0, vmpin_kb(0));
		return;
	}
	ASSERT_EQ(0, ret) {
		TH_LOG("backend %u: %m", backend);
	}
	EXPECT_EQ(backend, bts_backend(pid));
	rerun_jmp(_metadata, pid, 8);
}

/*
 * PTRACE_BTS_BACKEND_HARDWARE: the CPU's BTS; where the administrator
 * forces emulation, refused with EACCES (no BTS at all is EOPNOTSUPP).
 */
TEST_F(bts, backend_hardware)
{
	self->pid = spawn_jmp(_metadata);
	if (cpu_has_bts() && bts_emulation_forced()) {
		EXPECT_EQ(-1, bts_config_backend(self->pid, 8 * BTS_REC,
						 BTS_TRACE_ALLOC, 0,
						 PTRACE_BTS_BACKEND_HARDWARE));
		EXPECT_EQ(EACCES, errno);
		EXPECT_EQ(0, vmpin_kb(0));
		return;
	}
	config_explicit(_metadata, self->pid, PTRACE_BTS_BACKEND_HARDWARE,
			cpu_has_bts());
}

/* PTRACE_BTS_BACKEND_EMULATED: the emulation, with or without BTS. */
TEST_F(bts, backend_emulated)
{
	self->pid = spawn_jmp(_metadata);
	config_explicit(_metadata, self->pid, PTRACE_BTS_BACKEND_EMULATED,
			have_emulation());
}

/* Backend numbers beyond the known ones are EINVAL, with or without O_ALLOC. */
TEST_F(bts, backend_invalid)
{
	static const unsigned int bad[] = { 3, 0x80000000, 0xffffffff };
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-1, bts_config_backend(self->pid, 8 * BTS_REC,
						 BTS_TRACE_ALLOC, 0, bad[i]));
		EXPECT_EQ(EINVAL, errno);
		EXPECT_EQ(-1, bts_config_backend(self->pid, 0,
						 PTRACE_BTS_O_TRACE, 0, bad[i]));
		EXPECT_EQ(EINVAL, errno);
	}
	EXPECT_EQ(0, vmpin_kb(0));
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, bts_backend(self->pid));
}

/*
 * Without O_ALLOC the backend stays: naming the other one is EINVAL,
 * naming the one in use or none is fine, so STATUS can be written back.
 */
TEST_F(bts, backend_flags_only)
{
	struct ptrace_bts_config cfg;
	unsigned int other;

	self->pid = spawn_jmp(_metadata);
	/* nothing in use yet: only ANY goes */
	EXPECT_EQ(-1, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					 PTRACE_BTS_BACKEND_HARDWARE));
	EXPECT_EQ(EINVAL, errno);
	/* but stopping works whatever it names */
	EXPECT_EQ(0, bts_config_backend(self->pid, 0, 0, 0,
					PTRACE_BTS_BACKEND_HARDWARE));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	get_status(_metadata, self->pid, &cfg);
	other = cfg.backend == PTRACE_BTS_BACKEND_HARDWARE ?
		PTRACE_BTS_BACKEND_EMULATED : PTRACE_BTS_BACKEND_HARDWARE;
	EXPECT_EQ(-1, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					 other));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					PTRACE_BTS_BACKEND_ANY));
	/* read, modify, write: STATUS's struct goes back as it is */
	cfg.flags |= PTRACE_BTS_O_SIGNAL;
	cfg.signal = BTS_OVERFLOW_SIG;
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				sizeof(cfg))) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL, cfg.flags);
	EXPECT_NE(other, cfg.backend);
	rerun_jmp(_metadata, self->pid, 8);
}

/* ---- Exact branches of the emulated backend ---- */

/* Short, near and backward jmp. */
TEST_F(bts, branch_jmp)
{
	TRACE_ROUTINE(bts_jmp, jmp_s, jmp_e, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* AVX and FMA, and the kernel saving their state: VEX code can run. */
static bool cpu_runs_vex(void)
{
	unsigned int eax, ebx, ecx, edx;

	unsigned int xcr0_lo, xcr0_hi;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return false;
	if (!(ecx & bit_AVX) || !(ecx & bit_FMA) || !(ecx & bit_OSXSAVE))
		return false;
	/* XCR0: the kernel saves the SSE and AVX state */
	asm volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	return (xcr0_lo & 6) == 6;
}

/*
 * VEX instructions are neither branches nor PUSHF/POPF to the trace, and
 * tracing them leaves the stack alone (bts_vex).
 */
TEST_F(bts, vex_not_branches)
{
	static const struct branch exp[] = { { vex_f0, vex_t0 } };

	if (!cpu_runs_vex())
		SKIP(return, "no AVX and FMA");
	TRACE_ROUTINE(bts_vex, vex_s, vex_e, exp, ARRAY_SIZE(exp));
}

#ifdef __x86_64__
/*
 * Only SYSCALL copies the flags into R11: after any other entry, such as
 * the emulated backend's single steps, R11 is the program's, even when it
 * holds the flags with TF (bts_r11).
 */
TEST_F(bts, r11_kept)
{
	struct user_regs_struct regs;

	self->pid = start_traced(_metadata, bts_r11, r11_s, 16);
	cont_to(_metadata, self->pid, 0, r11_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0x246 | X86_EFLAGS_TF, regs.r11);
}

/* SYSCALL's copy of the flags in R11 does not show a forced TF. */
TEST_F(bts, r11_syscall)
{
	struct user_regs_struct regs;

	self->pid = start_traced(_metadata, bts_syscall_r11, r11sys_s, 16);
	cont_to(_metadata, self->pid, 0, r11sys_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0, regs.r11 & X86_EFLAGS_TF);
	/* and otherwise the flags SYSCALL saved: IF, at least */
	EXPECT_NE(0, regs.r11 & X86_EFLAGS_IF);
}
#endif

/*
 * After MOV SS the single-step trap comes one instruction late: the branch
 * and the PUSHF it covers are traced as without it (bts_movss).
 */
TEST_F(bts, mov_ss_shadow)
{
	static const struct branch exp[] = {
		{ movss_f0, movss_t0 }, { movss_f1, movss_t1 },
	};

	TRACE_ROUTINE(bts_movss, movss_s, movss_e, exp, ARRAY_SIZE(exp));
}

#ifndef __x86_64__
/*
 * The stack segment of bts_ldt_ss: an LDT data segment based at
 * ldt_stack, whose ESP is in the middle of it. Its linear address as a
 * flat one is in the first page, which nothing maps.
 */
static unsigned char ldt_stack[4096];
#define LDT_SS_ENTRY		0
#define LDT_SS_SEL		((LDT_SS_ENTRY << 3) | 4 | 3)	/* LDT, RPL 3 */
#define LDT_SS_ESP		0x800

static void ldt_ss_routine(unsigned long unused)
{
	struct user_desc desc = {
		.entry_number	= LDT_SS_ENTRY,
		.base_addr	= (unsigned long)ldt_stack,
		.limit		= sizeof(ldt_stack) - 1,
		.seg_32bit	= 1,
	};

	if (syscall(SYS_modify_ldt, 1, &desc, sizeof(desc)))
		_exit(92);
	bts_ldt_ss(LDT_SS_SEL, LDT_SS_ESP);
	_exit(0);
}

/*
 * Run bts_ldt_ss in a new tracee, traced or not; returns the flags its
 * PUSHF left on the LDT stack. The records go to @rec.
 */
static unsigned long run_ldt_ss(struct __test_metadata *_metadata, pid_t *pid,
				bool traced, struct bts_struct *rec, long *n)
{
	unsigned long word;

	*pid = spawn(_metadata, ldt_ss_routine, 0, 0);
	cont_to(_metadata, *pid, 0, ldtss_s);
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, ldtss_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKDATA, *pid,
				ldt_stack + LDT_SS_ESP - sizeof(word),
				(unsigned long)&word));
	if (traced) {
		*n = sys_ptrace(PTRACE_BTS_DRAIN, *pid, rec, 16 * BTS_REC);
		ASSERT_LE(0, *n);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
	return word;
}

/*
 * 32-bit code with a stack segment of the LDT, based elsewhere than 0: the
 * program computes the same traced and untraced, and its PUSHF stores no
 * forced TF. The hardware records every branch; the emulated backend does
 * not step while SS is not the flat one, and goes on at the next return to
 * user mode with flat segments (here: the system call's).
 */
TEST_F(bts, ldt_stack_segment)
{
	static const struct branch all[] = {
		{ ldtss_f0, ldtss_t0 }, { ldtss_f1, ldtss_t1 },
	};
	unsigned long plain, traced;
	struct bts_struct rec[16];
	bool emulated;
	long n = 0;

	plain = run_ldt_ss(_metadata, &self->pid, false, rec, &n);
	EXPECT_EQ(0, plain & X86_EFLAGS_TF);
	EXPECT_NE(0, plain & X86_EFLAGS_IF);
	/* the backend: that of a tracee configured like the one below */
	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	emulated = bts_backend(self->pid) == PTRACE_BTS_BACKEND_EMULATED;
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);

	traced = run_ldt_ss(_metadata, &self->pid, true, rec, &n);
	EXPECT_EQ(plain, traced);
	if (emulated)
		check_records(_metadata, rec, n, all + 1, 1);
	else
		check_records(_metadata, rec, n, all, ARRAY_SIZE(all));
}
#endif

/* Taken jcc are branches, not-taken ones are not. */
TEST_F(bts, branch_jcc)
{
	static const struct branch exp[] = {
		{ jcc_f0, jcc_t0 }, { jcc_f1, jcc_t1 }, { jcc_f2, jcc_t2 },
	};

	TRACE_ROUTINE(bts_jcc, jcc_s, jcc_e, exp, ARRAY_SIZE(exp));
}

/* Nested call and ret. */
TEST_F(bts, branch_call_ret)
{
	static const struct branch exp[] = {
		{ call_f0, call_fn1 }, { call_f1, call_fn2 },
		{ call_f3, call_r1 }, { call_f2, call_r0 },
	};

	TRACE_ROUTINE(bts_call, call_s, call_e, exp, ARRAY_SIZE(exp));
}

/* Indirect jmp and call through a register and memory; ret imm16. */
TEST_F(bts, branch_indirect)
{
	static const struct branch exp[] = {
		{ ind_f0, ind_t0 }, { ind_f1, ind_fn }, { ind_f1r, ind_r1 },
		{ ind_f2, ind_t2 }, { ind_f3, ind_fn2 }, { ind_f3r, ind_r3 },
	};

	TRACE_ROUTINE(bts_ind, ind_s, ind_e, exp, ARRAY_SIZE(exp));
}

/* loop/loope/loopne and jcxz, taken and not; a loop to itself. */
TEST_F(bts, branch_loop)
{
	static const struct branch exp[] = {
		{ loop_f0, loop_t0 }, { loop_f0, loop_t0 },
		{ loop_f1, loop_t1 }, { loop_f2, loop_f2 },
		{ loop_f3, loop_t3 },
	};

	TRACE_ROUTINE(bts_loop, loop_s, loop_e, exp, ARRAY_SIZE(exp));
}

/* Far return, far indirect jmp and call, far return from the call. */
TEST_F(bts, branch_far)
{
	static const struct branch exp[] = {
		{ far_f0, far_t0 }, { far_f1, far_t1 },
		{ far_f2, far_fn }, { far_f3, far_r2 },
	};

#ifdef __x86_64__
	bts_low_stack = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	ASSERT_TRUE(bts_low_stack != MAP_FAILED);
	bts_low_stack += 4096;
#endif
	TRACE_ROUTINE(bts_far, far_s, far_e, exp, ARRAY_SIZE(exp));
}

/* rep stos/movs/cmps iterations are not branches. */
TEST_F(bts, branch_rep)
{
	static const struct branch exp[] = { { rep_f0, rep_t0 } };

	TRACE_ROUTINE(bts_rep, rep_s, rep_e, exp, ARRAY_SIZE(exp));
}

/* A branch to the next instruction is recorded if and only if taken. */
TEST_F(bts, branch_to_next)
{
	static const struct branch exp[] = {
		{ next_f0, next_t0 }, { next_f2, next_t2 },
		{ next_f3, next_t3 },
	};

	TRACE_ROUTINE(bts_next, next_s, next_e, exp, ARRAY_SIZE(exp));
}

/* System calls, int $0x80 and a page fault leave no record. */
TEST_F(bts, kernel_entries)
{
	static const struct branch exp[] = {
		{ kentry_f0, kentry_t0 }, { kentry_f1, kentry_t1 },
		{ kentry_f2, kentry_t2 }, { kentry_f3, kentry_t3 },
	};

	/* bts_kentry writes first to this page: a fault at that point */
	bts_fault_addr = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(bts_fault_addr != MAP_FAILED);
	TRACE_ROUTINE(bts_kentry, kentry_s, kentry_e, exp, ARRAY_SIZE(exp));
}

/*
 * Install the assembly @handler for @sig with bts_sig_restorer, bypassing
 * libc, whose own code would add branches to the trace.
 */
static void install_asm_handler(int sig, void *handler)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned int mask[2];
	} ksa = {
		.handler = handler,
		.flags = SA_SIGINFO | 0x04000000,	/* SA_RESTORER */
		.restorer = (void *)bts_sig_restorer,
	};

	if (syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask)))
		_exit(91);
}

/* Install bts_sig_handler for SIGUSR1, then run bts_sig. */
static void sig_routine(unsigned long unused)
{
	install_asm_handler(SIGUSR1, (void *)bts_sig_handler);
	bts_sig();
}

/*
 * Signal delivery and sigreturn leave no record; the handler's branches
 * are recorded between the routine's.
 */
TEST_F(bts, signal_delivery)
{
	static const struct branch exp[] = {
		{ sig_f0, sig_t0 }, { sigh_f0, sigh_t0 },
		{ sigh_f1, bts_sig_restorer }, { sig_f1, sig_t1 },
	};

	self->pid = spawn(_metadata, sig_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, sig_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to_signal(_metadata, self->pid, 0, SIGUSR1);
	cont_to(_metadata, self->pid, SIGUSR1, sig_e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/*
 * A jcc to itself, taken until the tracer clears CF at a stop, then not
 * taken. Also checks that the forced trap flag is hidden from every view
 * of the registers and survives the tracer writing them.
 */
TEST_F(bts, branch_to_itself)
{
	static const struct branch exp[] = { { self_f1, self_t1 } };
	struct bts_struct rec[32];
	struct user_regs_struct regs;
	struct iovec iov = { &regs, sizeof(regs) };
	unsigned long flags;
	long n, i;

	self->pid = start_traced(_metadata, bts_self, self_s, 32);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(32, stop_when_recorded(self->pid, 32));

	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ((unsigned long)self_f0, REGS_IP(regs));
	EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	EXPECT_NE(0, regs.eflags & X86_EFLAGS_CF);
	memset(&regs, 0, sizeof(regs));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGSET, self->pid,
				(void *)NT_PRSTATUS, (unsigned long)&iov));
	EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	/* The raw PEEKUSR stores the word at data. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKUSR, self->pid,
				(void *)offsetof(struct user_regs_struct, eflags),
				(unsigned long)&flags));
	EXPECT_EQ(0, flags & X86_EFLAGS_TF);
	EXPECT_NE(0, flags & X86_EFLAGS_CF);

	/* the buffer wrapped, full of the jump to itself */
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(32, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ((unsigned long)self_f0, rec[i].variant.lbr.from);
		EXPECT_EQ((unsigned long)self_f0, rec[i].variant.lbr.to);
	}

	/* the tracer's flags, without TF, must not end the tracing */
	regs.eflags &= ~X86_EFLAGS_CF;
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETREGSET, self->pid,
				(void *)NT_PRSTATUS, (unsigned long)&iov));
	/* SIGSTOP is suppressed; the jcc is not taken any more */
	cont_to(_metadata, self->pid, 0, self_e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/*
 * A routine in a writable page that the tracee rewrites between runs:
 * "int3; jmp <rel8>; nop; int3; ret". The rewritten bytes are the jmp's.
 */
static const unsigned char smc_code[] = { 0xcc, 0xeb, 0x01, 0x90, 0xcc, 0xc3 };
#define SMC_JMP		1
#define SMC_END		5
#define SMC_NOP		3
#define SMC_INT3	4

static const unsigned char smc_jmps[][2] = {
	{ 0xeb, 0x01 },		/* over the nop, to the int3 */
	{ 0xeb, 0x00 },		/* to the next instruction, the nop */
	{ 0x90, 0x90 },		/* no branch at all */
};

static void smc_routine(unsigned long code)
{
	unsigned char *page = (unsigned char *)code;
	int i;

	for (i = 0; i < ARRAY_SIZE(smc_jmps); i++) {
		memcpy(page + SMC_JMP, smc_jmps[i], sizeof(smc_jmps[i]));
		((void (*)(void))page)();
	}
	_exit(0);
}

/*
 * Code rewritten at the same address gives the records of the new code:
 * the emulated backend must not answer from its decode cache.
 */
TEST_F(bts, self_modifying_code)
{
	struct branch exp[ARRAY_SIZE(smc_jmps)] = {};
	char *code;
	int i;

	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(code != MAP_FAILED);
	memcpy(code, smc_code, sizeof(smc_code));
	exp[0] = (struct branch){ code + SMC_JMP, code + SMC_INT3 };
	exp[1] = (struct branch){ code + SMC_JMP, code + SMC_NOP };
	self->pid = spawn(_metadata, smc_routine, (unsigned long)code, 0);
	for (i = 0; i < ARRAY_SIZE(smc_jmps); i++) {
		cont_to(_metadata, self->pid, 0, code + SMC_JMP);
		if (!i)
			ASSERT_EQ(0, bts_config(_metadata, self->pid,
						16 * BTS_REC, BTS_TRACE_ALLOC,
						0));
		/* forget the branches of the rewriting */
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
		cont_to(_metadata, self->pid, 0, code + SMC_END);
		/* the nops of the last version are no branch */
		check_trace(_metadata, self->pid, &exp[i], i < 2);
	}
	munmap(code, 4096);
}

/*
 * A PUSHF that overwrites itself, built in a writable code page: with the
 * stack pointer just past it, the 16-bit "pushw" (66 9c) stores the flags
 * on its own two bytes, their high byte, which holds TF, on the opcode.
 *
 *	int3				<- start
 *	xor %eax, %eax			known flags
 *	mov %rsp, %rcx
 *	mov $pushf + 2, %rsp
 * pushf:
 *	pushw				its bytes become the flags
 *	mov %rcx, %rsp
 * jmp:
 *	jmp .+2				a branch to show the trace
 *	int3				<- end
 *	ret
 */
struct pushf_code {
	unsigned char *code;
	unsigned long start;	/* offsets in @code, after the int3s */
	unsigned long pushf;
	unsigned long jmp;
	unsigned long end;
};

#ifdef __x86_64__
# define REX_W		0x48,
#else
# define REX_W
#endif

static void pushf_emit(struct pushf_code *c, unsigned long *at,
		       const unsigned char *bytes, size_t len)
{
	memcpy(c->code + *at, bytes, len);
	*at += len;
}

static void pushf_build(struct pushf_code *c)
{
	static const unsigned char int3[] = { 0xcc };
	static const unsigned char head[] = {
		0x31, 0xc0,		/* xor %eax, %eax */
		REX_W 0x89, 0xe1,	/* mov %rsp, %rcx */
		REX_W 0xbc,		/* mov $imm, %rsp */
	};
	static const unsigned char pushw[] = { 0x66, 0x9c };
	static const unsigned char restore[] = { REX_W 0x89, 0xcc };
	static const unsigned char jmp[] = { 0xeb, 0x00 };
	static const unsigned char tail[] = { 0xcc, 0xc3 };
	unsigned long at = 0, sp;

	pushf_emit(c, &at, int3, sizeof(int3));
	c->start = at;
	pushf_emit(c, &at, head, sizeof(head));
	c->pushf = at + sizeof(sp);
	sp = (unsigned long)c->code + c->pushf + sizeof(pushw);
	pushf_emit(c, &at, (unsigned char *)&sp, sizeof(sp));
	pushf_emit(c, &at, pushw, sizeof(pushw));
	pushf_emit(c, &at, restore, sizeof(restore));
	c->jmp = at;
	pushf_emit(c, &at, jmp, sizeof(jmp));
	pushf_emit(c, &at, tail, sizeof(tail));
	c->end = at - 1;
}

/*
 * Run the code of @c in a new tracee, traced or not; the word the pushw
 * left on its own bytes goes to @pushed, the flags at the end to @flags.
 */
static void pushf_run(struct __test_metadata *_metadata, pid_t *pid,
		      const struct pushf_code *c, bool traced,
		      unsigned long *pushed, unsigned long *flags)
{
	const struct branch exp = {
		(char *)c->code + c->jmp, (char *)c->code + c->jmp + 2,
	};
	struct user_regs_struct regs;
	unsigned long word;

	*pid = spawn(_metadata, run_routine, (unsigned long)c->code, 0);
	cont_to(_metadata, *pid, 0, (char *)c->code + c->start);
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, (char *)c->code + c->end);
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKDATA, *pid, c->code + c->pushf,
				(unsigned long)&word));
	*pushed = word & 0xffff;
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)&regs));
	*flags = regs.eflags;
	if (traced)
		check_trace(_metadata, *pid, &exp, 1);
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
}

/*
 * An instruction that overwrites its own bytes is traced as it ran: the
 * forced TF in the flags a PUSHF stored is corrected even though the PUSHF
 * is gone by the time its single-step trap comes. Traced, the program
 * finds in memory and in its flags what it finds untraced.
 */
TEST_F(bts, pushf_over_itself)
{
	unsigned long plain, traced, plain_flags, traced_flags;
	struct pushf_code c;

	c.code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(c.code != MAP_FAILED);
	pushf_build(&c);
	pushf_run(_metadata, &self->pid, &c, false, &plain, &plain_flags);
	pushf_run(_metadata, &self->pid, &c, true, &traced, &traced_flags);
	/* the high byte of the pushed flags: IF, not TF */
	EXPECT_EQ(0, plain & X86_EFLAGS_TF);
	EXPECT_NE(0, plain & X86_EFLAGS_IF);
	EXPECT_EQ(plain, traced) {
		TH_LOG("pushed %#lx traced, %#lx untraced", traced, plain);
	}
	EXPECT_EQ(plain_flags, traced_flags);
	munmap(c.code, 4096);
}

#ifdef __x86_64__
/*
 * Execute-only code: a protection key that denies data access keeps the
 * tracee, and the kernel acting for it (copy_from_user()), from reading
 * the page it runs. The emulated backend must still decode each step
 * there, to record the branches and to take the forced TF out of what
 * PUSHF stores.
 *
 *	int3				<- start
 *	xor %eax, %eax
 *	mov $5, %ecx
 * loop:
 *	add %ecx, %eax
 *	dec %ecx
 * jnz:
 *	jnz loop			taken 4 times
 * call:
 *	call sub
 * back:
 *	pushf				the flags the program sees
 *	pop %rdx
 * jmp:
 *	jmp end
 *	nop
 * end:
 *	int3				<- end
 *	ret
 * sub:
 *	add $100, %eax
 * ret:
 *	ret
 */
static const unsigned char xonly_code[] = {
	0xcc,				/* 0: int3 */
	0x31, 0xc0,			/* 1: xor %eax, %eax */
	0xb9, 0x05, 0x00, 0x00, 0x00,	/* 3: mov $5, %ecx */
	0x01, 0xc8,			/* 8: add %ecx, %eax */
	0xff, 0xc9,			/* 10: dec %ecx */
	0x75, 0xfa,			/* 12: jnz 8 */
	0xe8, 0x0b, 0x00, 0x00, 0x00,	/* 14: call 30 */
	0x9c,				/* 19: pushf */
	0x5a,				/* 20: pop %rdx */
	0xeb, 0x01,			/* 21: jmp 24 */
	0x90,				/* 23: nop */
	0xcc,				/* 24: int3 */
	0xc3,				/* 25: ret */
	0x90, 0x90, 0x90, 0x90,		/* 26: padding */
	0x83, 0xc0, 0x64,		/* 30: add $100, %eax */
	0xc3,				/* 33: ret */
};

#define XONLY_START	1
#define XONLY_LOOP	8
#define XONLY_JNZ	12
#define XONLY_CALL	14
#define XONLY_BACK	19
#define XONLY_JMP	21
#define XONLY_END	25
#define XONLY_SUB	30
#define XONLY_RET	33
/* The branches, as offsets: the loop's jnz is taken for ecx = 4, 3, 2, 1. */
static const unsigned int xonly_branches[][2] = {
	{ XONLY_JNZ, XONLY_LOOP }, { XONLY_JNZ, XONLY_LOOP },
	{ XONLY_JNZ, XONLY_LOOP }, { XONLY_JNZ, XONLY_LOOP },
	{ XONLY_CALL, XONLY_SUB }, { XONLY_RET, XONLY_BACK },
	{ XONLY_JMP, XONLY_END - 1 },
};

/* 5 + 4 + 3 + 2 + 1 in the loop, 100 in sub. */
#define XONLY_SUM	115

/* Exit statuses of xonly_routine when the page cannot be made exec-only. */
#define XONLY_NO_PKEY		92
#define XONLY_NO_MPROTECT	93
#define XONLY_STILL_READABLE	94

/* Is there PKU in CPUID (whether or not the kernel turned it on)? */
static bool cpu_has_pku(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		return false;
	return ecx & bit_PKU;
}

/*
 * Make the page at @code execute-only for this thread, prove that the
 * kernel cannot read it for us either, then run it.
 */
static void xonly_routine(unsigned long code)
{
	int pkey, fds[2];

	pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS);
	if (pkey < 0)
		_exit(XONLY_NO_PKEY);
	if (pkey_mprotect((void *)code, getpagesize(), PROT_EXEC, pkey))
		_exit(XONLY_NO_MPROTECT);
	/* write() copies from the page with copy_from_user(), as the trap would */
	if (pipe(fds) || write(fds[1], (void *)code, 1) != -1 ||
	    errno != EFAULT)
		_exit(XONLY_STILL_READABLE);
	((void (*)(void))code)();
	_exit(0);
}

/*
 * Run the code at @code in a new tracee, traced or not, from its first
 * int3 to its last; the registers there go to @regs, and when traced the
 * records (at most 16) to @rec, their count to *@n.
 */
static void xonly_run(struct __test_metadata *_metadata, pid_t *pid,
		      unsigned char *code, bool traced,
		      struct user_regs_struct *regs, struct bts_struct *rec,
		      long *n)
{
	int status;

	*pid = spawn(_metadata, xonly_routine, (unsigned long)code, 0);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, 0));
	ASSERT_EQ(*pid, waitpid(*pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("tracee exited with %d: no execute-only page",
		       WEXITSTATUS(status));
	}
	ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
	ASSERT_EQ((unsigned long)code + XONLY_START, get_ip(_metadata, *pid));
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, (char *)code + XONLY_END);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)regs));
	if (traced) {
		*n = sys_ptrace(PTRACE_BTS_DRAIN, *pid, rec, 16 * BTS_REC);
		ASSERT_LE(0, *n);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
}

/*
 * Code the program cannot read (a protection key denies access, the page
 * is PROT_EXEC only) is traced as any other: every branch recorded, and
 * the program computes what it computes untraced, the flags PUSHF stored
 * included. The kernel reads the instructions through the page tables,
 * as ptrace does.
 */
TEST_F(bts, exec_only_code)
{
	struct branch exp[ARRAY_SIZE(xonly_branches)];
	struct user_regs_struct plain, traced;
	struct bts_struct rec[16];
	unsigned char *code;
	long n = 0, i;

	if (!cpu_has_pku())
		SKIP(return, "no protection keys (PKU) on this CPU");
	code = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(code != MAP_FAILED);
	memcpy(code, xonly_code, sizeof(xonly_code));
	for (i = 0; i < ARRAY_SIZE(exp); i++) {
		exp[i].from = (char *)code + xonly_branches[i][0];
		exp[i].to = (char *)code + xonly_branches[i][1];
	}
	xonly_run(_metadata, &self->pid, code, false, &plain, NULL, NULL);
	xonly_run(_metadata, &self->pid, code, true, &traced, rec, &n);
	munmap(code, getpagesize());
	EXPECT_EQ(XONLY_SUM, plain.rax);
	EXPECT_EQ(plain.rax, traced.rax);
	EXPECT_EQ(plain.rcx, traced.rcx);
	/* the pushed flags: the forced TF must not show */
	EXPECT_EQ(0, traced.rdx & X86_EFLAGS_TF);
	EXPECT_EQ(plain.rdx, traced.rdx) {
		TH_LOG("pushed flags %#llx traced, %#llx untraced",
		       traced.rdx, plain.rdx);
	}
	EXPECT_EQ(plain.eflags, traced.eflags);
	EXPECT_EQ(plain.rsp, traced.rsp);
	check_records(_metadata, rec, n, exp, ARRAY_SIZE(exp));
}
#endif

/* ---- pages the program never runs ---- */

/* Exit statuses of nofetch_routine. */
#define NOFETCH_RESIDENT	95	/* the page is mapped now */
#define NOFETCH_EVENT		96	/* userfaultfd reported a fault */
#define NOFETCH_NO_UFFD		97
#define NOFETCH_NO_MINCORE	98

static int nofetch_events;

/* The userfaultfd monitor: counts faults, and serves each with zeros. */
static void *nofetch_monitor(void *arg)
{
	int uffd = (long)arg;
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffdio_zeropage zp = { .range.len = getpagesize() };
	struct uffd_msg msg;

	while (poll(&pfd, 1, 500) > 0) {
		if (!(pfd.revents & POLLIN))
			break;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
		    msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		__atomic_add_fetch(&nofetch_events, 1, __ATOMIC_SEQ_CST);
		zp.range.start = msg.arg.pagefault.address &
				 ~(unsigned long long)(getpagesize() - 1);
		ioctl(uffd, UFFDIO_ZEROPAGE, &zp);
	}
	return NULL;
}

/*
 * Stop at an int3 right before a jump into an untouched code page, for the
 * tracer to single-step the jump and move the IP elsewhere: the program
 * never fetches from the page. With @with_uffd, the page is registered with
 * userfaultfd and a monitor thread counts the faults it is shown. Exits 0
 * if the page is still unmapped and nobody saw a fault.
 */
static void nofetch_routine(unsigned long with_uffd)
{
	long page_size = getpagesize();
	pthread_t monitor;
	unsigned char vec;
	void *page;
	int uffd;

	page = mmap(NULL, page_size, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		_exit(NOFETCH_NO_MINCORE);
	if (with_uffd) {
		struct uffdio_api api = { .api = UFFD_API };
		struct uffdio_register reg = {
			.range = { .start = (unsigned long)page,
				   .len = page_size },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		/* poll() on a blocking userfaultfd is EPOLLERR at once */
		uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) ||
		    ioctl(uffd, UFFDIO_REGISTER, &reg) ||
		    pthread_create(&monitor, NULL, nofetch_monitor,
				   (void *)(long)uffd))
			_exit(NOFETCH_NO_UFFD);
	}
	nofetch_jump(page);
	if (with_uffd)
		pthread_join(monitor, NULL);
	if (mincore(page, page_size, &vec))
		_exit(NOFETCH_NO_MINCORE);
	if (vec & 1)
		_exit(NOFETCH_RESIDENT);
	_exit(nofetch_events ? NOFETCH_EVENT : 0);
}

/*
 * Single-step the jump, as a debugger does, and take the IP from the
 * page's first byte to nofetch_jump's end; the exit status of
 * nofetch_routine, traced or not.
 */
static int nofetch_run(struct __test_metadata *_metadata, pid_t *pid,
		       bool traced, bool with_uffd)
{
	struct user_regs_struct regs;
	int status = 0;

	*pid = spawn(_metadata, nofetch_routine, with_uffd, 0);
	if (traced)
		EXPECT_EQ(0, bts_config(_metadata, *pid, 64 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, nofetch_jmp);
	EXPECT_EQ(0, sys_ptrace(PTRACE_SINGLESTEP, *pid, NULL, 0));
	EXPECT_EQ(*pid, waitpid(*pid, &status, __WALL));
	EXPECT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	EXPECT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)&regs));
	EXPECT_NE((unsigned long)nofetch_e, get_ip(_metadata, *pid));
#ifdef __x86_64__
	regs.rip = (unsigned long)nofetch_e;
#else
	regs.eip = (unsigned long)nofetch_e;
#endif
	EXPECT_EQ(0, sys_ptrace(PTRACE_SETREGS, *pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, 0));
	EXPECT_EQ(*pid, waitpid(*pid, &status, __WALL));
	*pid = 0;
	EXPECT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	return WEXITSTATUS(status);
}

/*
 * The emulated backend decodes ahead, at each trap, the instruction the
 * task returns to. Where the task never gets there (a debugger moves it
 * on, a signal takes it elsewhere), that read must not have mapped the
 * page (mincore() shows it) nor shown a userfaultfd monitor a fault, nor
 * left the thread waiting for one inside the trap.
 */
TEST_F(bts, nofetch_page_untouched)
{
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, false, false));
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, true, false));
}

TEST_F(bts, nofetch_page_userfaultfd)
{
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, false, true));
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, true, true));
}

/* ---- uprobes ---- */

#define TRACEFS		"/sys/kernel/tracing"
#define UPROBE_EVENTS	TRACEFS "/uprobe_events"
#define UPROBE_GROUP	"ptrace_bts"
#define UPROBE_ENABLE	TRACEFS "/events/" UPROBE_GROUP "/enable"

/* The uprobes on bts_uprobe, and how the kernel runs each instruction. */
static const struct {
	const char *name;
	const char *addr;
} bts_uprobes[] = {
	{ "jmp_rel", uprobe_f0 },	/* emulated */
	{ "mov", uprobe_n0 },		/* out of line */
	{ "jmp_ind", uprobe_f1 },	/* out of line */
	{ "call_rel", uprobe_f2 },	/* emulated */
	{ "ret", uprobe_f4 },		/* out of line */
};

/* Write @text to the tracefs file @path; 0 or -errno. */
static int tracefs_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0)
		n = -errno;
	close(fd);
	return n < 0 ? n : 0;
}

/*
 * The file and file offset of our own code at @addr, from
 * /proc/self/maps, as uprobe_events wants them; false if not found.
 */
static bool file_offset(const void *addr, char *path, size_t size,
			unsigned long *offset)
{
	unsigned long start, end, pgoff, a = (unsigned long)addr;
	char line[512], file[256];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %255s", &start, &end,
			   &pgoff, file) != 4 || a < start || a >= end)
			continue;
		*offset = a - start + pgoff;
		snprintf(path, size, "%s", file);
		found = true;
	}
	fclose(f);
	return found;
}

/* Disable and delete the probes, also those a failed run left behind. */
static void uprobes_del(void)
{
	char cmd[128];
	int i;

	tracefs_write(UPROBE_ENABLE, "0");
	for (i = 0; i < ARRAY_SIZE(bts_uprobes); i++) {
		snprintf(cmd, sizeof(cmd), "-:%s/%s\n", UPROBE_GROUP,
			 bts_uprobes[i].name);
		tracefs_write(UPROBE_EVENTS, cmd);
	}
}

/*
 * Put the uprobes of bts_uprobes on our own binary, mounting tracefs
 * first if need be; 0, or -ENOENT where the kernel has no uprobe_events.
 */
static int uprobes_add(struct __test_metadata *_metadata)
{
	char path[256], cmd[512];
	unsigned long off;
	int i;

	if (access(UPROBE_EVENTS, F_OK))
		mount("tracefs", TRACEFS, "tracefs", 0, NULL);
	if (access(UPROBE_EVENTS, W_OK))
		return -ENOENT;
	uprobes_del();
	for (i = 0; i < ARRAY_SIZE(bts_uprobes); i++) {
		ASSERT_TRUE(file_offset(bts_uprobes[i].addr, path, sizeof(path),
					&off));
		snprintf(cmd, sizeof(cmd), "p:%s/%s %s:%#lx\n", UPROBE_GROUP,
			 bts_uprobes[i].name, path, off);
		ASSERT_EQ(0, tracefs_write(UPROBE_EVENTS, cmd)) {
			TH_LOG("%s: %s", UPROBE_EVENTS, cmd);
		}
	}
	ASSERT_EQ(0, tracefs_write(UPROBE_ENABLE, "1"));
	return 0;
}

/* The [uprobes] mapping of @pid, where instructions run out of line. */
static bool xol_area(pid_t pid, unsigned long *start, unsigned long *end)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "[uprobes]") &&
			sscanf(line, "%lx-%lx", start, end) == 2;
	fclose(f);
	return found;
}

/* Run bts_uprobe traced from its start to its end; the registers there. */
static void uprobe_run(struct __test_metadata *_metadata, pid_t *pid,
		       struct user_regs_struct *regs)
{
	*pid = start_traced(_metadata, bts_uprobe, uprobe_s, 64);
	/* any SIGTRAP of the probes' steps would stop the tracee early */
	cont_to(_metadata, *pid, 0, uprobe_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)regs));
}

/*
 * Branches at uprobes. The kernel emulates a probed direct jmp, call or
 * jcc: the program never runs it, and neither backend records it. It
 * runs other probed instructions out of line, in the [uprobes] page, as
 * a single step of its own: the hardware records a branch there from
 * the out-of-line copy, the emulated backend records nothing (uprobes
 * takes the step's #DB first). A probed instruction that is no branch
 * leaves no record on either. Probed or not, the program runs alike.
 * Documentation/arch/x86/ptrace-bts.rst, "uprobes".
 */
TEST_F(bts, uprobe_steps)
{
	static const struct branch plain[] = {
		{ uprobe_f0, uprobe_t0 }, { uprobe_f1, uprobe_t1 },
		{ uprobe_f2, uprobe_fn }, { uprobe_f4, uprobe_r2 },
		{ uprobe_f3, uprobe_t3 },
	};
	struct branch exp[3] = {
		{ NULL, uprobe_t1 }, { NULL, uprobe_r2 },
		{ uprobe_f3, uprobe_t3 },
	};
	struct user_regs_struct unprobed, probed;
	unsigned long xol_start, xol_end;
	struct bts_struct rec[16];
	long n, n_exp = 1, i;
	int err;

	/* unprobed: every branch */
	uprobe_run(_metadata, &self->pid, &unprobed);
	check_trace(_metadata, self->pid, plain, ARRAY_SIZE(plain));
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);
	self->pid = 0;

	err = uprobes_add(_metadata);
	if (err == -ENOENT)
		SKIP(return, "no uprobe_events in tracefs");
	uprobe_run(_metadata, &self->pid, &probed);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	uprobes_del();
	ASSERT_LE(0, n);
	if (bts_backend(self->pid) == PTRACE_BTS_BACKEND_HARDWARE) {
		/* the out-of-line jmp and ret, from the [uprobes] page */
		n_exp = ARRAY_SIZE(exp);
		ASSERT_TRUE(xol_area(self->pid, &xol_start, &xol_end));
		for (i = 0; i < 2 && i < n; i++) {
			EXPECT_LE(xol_start, rec[i].variant.lbr.from);
			EXPECT_GT(xol_end, rec[i].variant.lbr.from);
			exp[i].from = (const char *)(unsigned long)
				      rec[i].variant.lbr.from;
		}
	}
	check_records(_metadata, rec, n, exp + ARRAY_SIZE(exp) - n_exp,
		      n_exp);
	EXPECT_EQ(unprobed.REG_AX, probed.REG_AX);
	EXPECT_EQ(unprobed.REG_CX, probed.REG_CX);
	EXPECT_EQ(unprobed.REG_SP, probed.REG_SP);
}

/* ---- Buffer full: wrap-around and signal on overflow ---- */

/* A small buffer keeps exactly the newest records. */
TEST_F(bts, wrap_keeps_newest)
{
	struct bts_struct rec[3];
	long n;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 3);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(3, bts_size(self->pid));
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, rec, 0));
	EXPECT_EQ((unsigned long)jmp_f2, rec[0].variant.lbr.from);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	check_records(_metadata, rec, n, jmp_trace + 1, 3);
}

static const struct branch many_loop = { many_f0, many_t0 };
static const struct branch many_exit = { many_f1, many_t1 };

/*
 * The @n records at @rec must be the @n_exp records [@first, @first +
 * @n_exp) of bts_many(@total).
 */
static void check_many(struct __test_metadata *_metadata,
		       const struct bts_struct *rec, long n, long first,
		       long n_exp, long total)
{
	struct branch exp[64];
	long i;

	ASSERT_LE(n_exp, 64);
	for (i = 0; i < n_exp; i++)
		exp[i] = first + i == total - 1 ? many_exit : many_loop;
	check_records(_metadata, rec, n, exp, n_exp);
}

static pid_t start_many(struct __test_metadata *_metadata, unsigned long n,
			unsigned int records, unsigned int flags)
{
	pid_t pid = spawn(_metadata, (void (*)(unsigned long))bts_many, n, 0);

	cont_to(_metadata, pid, 0, many_s);
	ASSERT_EQ(0, bts_config(_metadata, pid, records * BTS_REC, BTS_TRACE_ALLOC | flags,
				flags & PTRACE_BTS_O_SIGNAL ? BTS_OVERFLOW_SIG : 0));
	return pid;
}

/* A buffer for @n records, poisoned so that a record not written shows. */
static struct bts_struct *poisoned_records(long n)
{
	struct bts_struct *rec = malloc(n * sizeof(*rec));

	if (rec)
		memset(rec, 0xa5, n * sizeof(*rec));
	return rec;
}

/* All @n records of bts_many(@n), one by one; one message for them all. */
static void check_many_all(struct __test_metadata *_metadata,
			   const struct bts_struct *rec, long n)
{
	long i, bad = 0, first_bad = -1;
	const struct branch *exp;

	for (i = 0; i < n; i++) {
		exp = i == n - 1 ? &many_exit : &many_loop;
		if (rec[i].qualifier == BTS_BRANCH &&
		    rec[i].variant.lbr.from == (unsigned long)exp->from &&
		    rec[i].variant.lbr.to == (unsigned long)exp->to)
			continue;
		if (!bad++)
			first_bad = i;
	}
	EXPECT_EQ(0, bad) {
		TH_LOG("%ld of %ld records wrong, the first at %ld", bad, n,
		       first_bad);
	}
}

/* A DRAIN of several of the kernel's batches copies every record, in order. */
TEST_F(bts, drain_many_batches)
{
	const long n = 5 * BTS_DRAIN_BATCH + 17;
	struct bts_struct *rec;

	self->pid = start_many(_metadata, n, n, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	ASSERT_EQ(n, bts_size(self->pid));
	rec = poisoned_records(n + 1);
	ASSERT_FALSE(!rec);
	EXPECT_EQ(n, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				(n + 1) * BTS_REC));
	check_many_all(_metadata, rec, n);
	/* nothing written past the last record */
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, rec[n].qualifier);
	EXPECT_EQ(0, bts_size(self->pid));
	free(rec);
}

/*
 * The overflow signal follows the CPU's threshold interrupt, which hardware
 * may deliver some branches late (up to 160, by some readings); ds.c and perf
 * keep 170 records of margin for it. So the overflow tests give the tracee
 * far more branches than that after each threshold, and check what holds
 * whatever the skid: a stop with the signal finds the buffer full with
 * records of the right branches, tracing pauses until a DRAIN or CLEAR, and
 * each of those lets the buffer fill and signal again.
 */
#define OVERFLOW_BRANCHES	400
#define OVERFLOW_RECORDS	4

/* The tracee's next stop: true at many_e, false at an overflow signal. */
static bool overflow_stop(struct __test_metadata *_metadata, pid_t pid)
{
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));
	if (WSTOPSIG(status) == SIGTRAP &&
	    get_ip(_metadata, pid) == (unsigned long)many_e)
		return true;
	ASSERT_EQ(BTS_OVERFLOW_SIG, WSTOPSIG(status)) {
		TH_LOG("stop at %#lx", get_ip(_metadata, pid));
	}
	/* Paused at the threshold, which is the whole buffer here. */
	ASSERT_EQ(OVERFLOW_RECORDS, bts_size(pid));
	return false;
}

/*
 * Records of bts_many(OVERFLOW_BRANCHES) drained at some point: loop
 * branches, and with @final the last one may be the exit branch (in the
 * drain at many_e, or in the one at the overflow stop the exit branch
 * caused by filling the buffer).
 */
static void check_overflow_records(struct __test_metadata *_metadata,
				   const struct bts_struct *rec, long n,
				   bool final)
{
	long i;

	for (i = 0; i < n; i++) {
		bool exit = final && i == n - 1 &&
			    rec[i].variant.lbr.from == (unsigned long)many_f1;

		check_many(_metadata, rec + i, 1,
			   exit ? OVERFLOW_BRANCHES - 1 : 0, 1,
			   OVERFLOW_BRANCHES);
	}
}

/*
 * Each DRAIN at an overflow stop resumes tracing until the buffer is full
 * again. The emulated backend records in the trap after each branch, with
 * no skid, so there a DRAIN at each stop loses nothing; the hardware loses
 * at most the branches of the skid.
 */
TEST_F(bts, overflow_signal_drain)
{
	struct bts_struct rec[OVERFLOW_RECORDS];
	long n, got = 0, backend;
	int signals = 0;

	self->pid = start_many(_metadata, OVERFLOW_BRANCHES, OVERFLOW_RECORDS,
			       PTRACE_BTS_O_SIGNAL);
	backend = bts_backend(self->pid);
	/* the signal is the tracer's to suppress */
	while (!overflow_stop(_metadata, self->pid)) {
		n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
		ASSERT_EQ(OVERFLOW_RECORDS, n);
		/* the exit branch may fill the buffer: the signal comes first */
		check_overflow_records(_metadata, rec, n, true);
		ASSERT_EQ(0, bts_size(self->pid));
		got += n;
		signals++;
	}
	/* what came after the last DRAIN or CLEAR: maybe nothing */
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_LE(0, n);
	check_overflow_records(_metadata, rec, n, true);
	got += n;
	if (backend == PTRACE_BTS_BACKEND_EMULATED) {
		EXPECT_EQ(OVERFLOW_BRANCHES, got);
	} else {
		/* 400 branches hold two thresholds even with 170 of skid */
		EXPECT_LE(2, signals);
		EXPECT_LE(signals * OVERFLOW_RECORDS, got);
		EXPECT_GE(OVERFLOW_BRANCHES, got);
	}
}

/* Until drained, a full O_SIGNAL buffer keeps the oldest records. */
TEST_F(bts, overflow_signal_pauses)
{
	struct bts_struct rec[OVERFLOW_RECORDS];
	long n;

	self->pid = start_many(_metadata, OVERFLOW_BRANCHES, OVERFLOW_RECORDS,
			       PTRACE_BTS_O_SIGNAL);
	ASSERT_FALSE(overflow_stop(_metadata, self->pid));
	/* no second signal while paused */
	ASSERT_TRUE(overflow_stop(_metadata, self->pid));
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	check_many(_metadata, rec, n, 0, OVERFLOW_RECORDS, OVERFLOW_BRANCHES);
}

/* CLEAR at the overflow stop resumes tracing too. */
TEST_F(bts, overflow_signal_clear)
{
	struct bts_struct rec[OVERFLOW_RECORDS];
	int signals = 0;
	long n;

	self->pid = start_many(_metadata, OVERFLOW_BRANCHES, OVERFLOW_RECORDS,
			       PTRACE_BTS_O_SIGNAL);
	while (!overflow_stop(_metadata, self->pid)) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
		ASSERT_EQ(0, bts_size(self->pid));
		signals++;
	}
	ASSERT_LE(2, signals);
	/* what came after the last DRAIN or CLEAR: maybe nothing */
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_LE(0, n);
	check_overflow_records(_metadata, rec, n, true);
}

/* Without O_SIGNAL a full buffer wraps silently, no signal. */
TEST_F(bts, overflow_wraps_without_signal)
{
	struct bts_struct rec[4];
	long n;

	self->pid = start_many(_metadata, 10, 4, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	check_many(_metadata, rec, n, 6, 4, 10);
}

static void *many_thread_fn(void *arg)
{
	bts_many(OVERFLOW_BRANCHES);
	return NULL;
}

/* The leader waits in pthread_join() while a thread runs bts_many(). */
static void thread_many_routine(unsigned long unused)
{
	pthread_t t;

	if (pthread_create(&t, NULL, many_thread_fn, NULL))
		_exit(7);
	pthread_join(t, NULL);
	_exit(0);
}

/*
 * In a thread group, the overflow signal goes to the traced thread, not
 * to the process (where the leader, which does not block it, could take
 * it).
 */
TEST_F(bts, overflow_signal_thread)
{
	struct bts_struct rec[OVERFLOW_RECORDS];
	pid_t t, tid;
	bool clone_seen = false;
	int status;
	long n;

	self->pid = spawn(_metadata, thread_many_routine, 0,
			  PTRACE_O_TRACECLONE);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	/*
	 * The leader's clone event, the new thread's SIGSTOP and its
	 * breakpoint at many_s, in whatever order the two threads get there;
	 * the thread stays stopped at its breakpoint.
	 */
	for (tid = 0; !clone_seen || !tid;) {
		t = wait_any(_metadata, &status);
		ASSERT_TRUE(WIFSTOPPED(status));
		if (t == self->pid) {
			ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_CLONE << 8),
				  status >> 8);
			clone_seen = true;
		} else if (WSTOPSIG(status) == SIGTRAP) {
			tid = t;
			continue;
		}
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
	}
	ASSERT_EQ((unsigned long)many_s, get_ip(_metadata, tid));
	ASSERT_EQ(0, bts_config(_metadata, tid, OVERFLOW_RECORDS * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, tid, NULL, 0));
	t = wait_any(_metadata, &status);
	ASSERT_EQ(tid, t) {
		TH_LOG("stop of %d (leader %d), status %#x", t, self->pid,
		       status);
	}
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(BTS_OVERFLOW_SIG, WSTOPSIG(status));
	n = sys_ptrace(PTRACE_BTS_DRAIN, tid, rec, sizeof(rec));
	check_many(_metadata, rec, n, 0, OVERFLOW_RECORDS, OVERFLOW_BRANCHES);
}

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * bts_sleep's nanosleep, sleep_ts in ptrace_bts_asm.S. Long enough that
 * its timer cannot expire before the task gets to schedule() (then it
 * would not sleep at all), as a 2 ms one did in a starved TCG guest.
 */
#define BTS_SLEEP_NS		50000000ULL

/*
 * Check a trace of bts_sleep taken with O_SCHED between @t0 and @t1: its
 * two branches exact, and between them departures and arrivals in turn,
 * in CLOCK_MONOTONIC nanoseconds, of thread @tid.
 */
static void check_sched_trace(struct __test_metadata *_metadata,
			      const struct bts_struct *rec, long n, pid_t tid,
			      __u64 t0, __u64 t1)
{
	static const struct branch exp[] = {
		{ sleep_f0, sleep_t0 }, { sleep_f1, sleep_t1 },
	};
	__u64 last = 0, departed = 0, slept = 0, prev_q = BTS_INVALID;
	long i, nbr = 0, arrives = 0, departs = 0;
	struct bts_struct br[64];
	bool woke = false;

	ASSERT_LT(0, n);
	ASSERT_GE(ARRAY_SIZE(br), n);
	for (i = 0; i < n; i++) {
		if (rec[i].qualifier == BTS_BRANCH) {
			br[nbr++] = rec[i];
			continue;
		}
		ASSERT_TRUE(rec[i].qualifier == BTS_TASK_ARRIVES ||
			    rec[i].qualifier == BTS_TASK_DEPARTS) {
			TH_LOG("record %ld: qualifier %llu", i,
			       (unsigned long long)rec[i].qualifier);
		}
		EXPECT_EQ(tid, rec[i].variant.event.pid);
		EXPECT_EQ(0, rec[i].variant.event.__reserved);
		EXPECT_LE(t0, rec[i].variant.event.clock);
		EXPECT_GE(t1, rec[i].variant.event.clock);
		EXPECT_LE(last, rec[i].variant.event.clock);
		last = rec[i].variant.event.clock;
		/* a task departs and arrives in turn */
		EXPECT_NE(prev_q, rec[i].qualifier);
		prev_q = rec[i].qualifier;
		if (rec[i].qualifier == BTS_TASK_DEPARTS) {
			departs++;
			departed = last;
			continue;
		}
		arrives++;
		if (departed && last - departed > slept)
			slept = last - departed;
		/*
		 * The sleep's timer started after t0 and expires 2 ms later:
		 * some arrival is the wake-up, at or after that. Nanoseconds
		 * and a missing sleep both show here; a fixed bound on the
		 * time off the CPU would not hold under TCG, where the way
		 * from the timer's start to the switch can take milliseconds.
		 */
		if (departed && last >= t0 + BTS_SLEEP_NS)
			woke = true;
	}
	EXPECT_LE(1, departs);
	EXPECT_LE(1, arrives);
	EXPECT_TRUE(woke);
	EXPECT_LT(0, slept);
	EXPECT_GE(t1 - t0, slept);
	check_records(_metadata, br, nbr, exp, ARRAY_SIZE(exp));
}

/*
 * Trace bts_sleep in @pid (stopped at sleep_s) with O_SCHED and @flags
 * added, and check the trace, whose events carry @tid.
 */
static void trace_sleep(struct __test_metadata *_metadata, pid_t pid,
			pid_t tid, unsigned int flags)
{
	struct bts_struct rec[64];
	__u64 t0, t1;
	long n;

	/* before CONFIG: the tracee may still be on its way off the CPU */
	t0 = now_ns();
	ASSERT_EQ(0, bts_config(_metadata, pid, 64 * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_SCHED | flags,
				flags & PTRACE_BTS_O_SIGNAL ?
				BTS_OVERFLOW_SIG : 0));
	cont_to(_metadata, pid, 0, sleep_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, rec, sizeof(rec));
	/*
	 * After DRAIN: waitpid() returns as soon as the tracee is stopped,
	 * which may be before its CPU has switched away from it and recorded
	 * that departure; a request waits for the tracee to be off its CPU.
	 */
	t1 = now_ns();
	check_sched_trace(_metadata, rec, n, tid, t0, t1);
}

/*
 * O_SCHED: departures and arrivals are recorded with the tracee's tid and
 * CLOCK_MONOTONIC nanoseconds; the branches between them stay exact.
 */
TEST_F(bts, sched_timestamps)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_sleep, 0);
	cont_to(_metadata, self->pid, 0, sleep_s);
	trace_sleep(_metadata, self->pid, self->pid, 0);
}

/* O_SCHED and O_SIGNAL together: both hold; no signal before it is full. */
TEST_F(bts, sched_with_signal)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_sleep, 0);
	cont_to(_metadata, self->pid, 0, sleep_s);
	trace_sleep(_metadata, self->pid, self->pid, PTRACE_BTS_O_SIGNAL);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SCHED | PTRACE_BTS_O_SIGNAL,
		  cfg.flags);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
}

/*
 * In a child of the test: make a new pid namespace, fork its first task,
 * and send its pid, as the test sees it, through @sock (-errno if there is
 * no namespace). That task waits for the test to attach, then runs
 * bts_sleep.
 */
static void sleeper_in_new_pidns(int sock)
{
	pid_t inner;
	char go;

	if (unshare(CLONE_NEWPID)) {
		inner = -errno;
		_exit(write(sock, &inner, sizeof(inner)) == sizeof(inner) ?
		      0 : 4);
	}
	inner = fork();
	if (inner < 0)
		_exit(1);
	if (inner == 0) {
		if (read(sock, &go, 1) != 1)
			_exit(2);
		bts_sleep();
		_exit(0);
	}
	if (write(sock, &inner, sizeof(inner)) != sizeof(inner))
		_exit(3);
	waitpid(inner, NULL, 0);
	_exit(0);
}

/*
 * The pid of the events is the tid in the tracer's pid namespace, not in
 * the tracee's own, where it is 1.
 */
TEST_F(bts, sched_pid_namespace)
{
	pid_t outer, inner;
	int sv[2];
	char go = 1;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	outer = fork();
	ASSERT_LE(0, outer);
	if (outer == 0)
		sleeper_in_new_pidns(sv[1]);
	close(sv[1]);
	ASSERT_EQ(sizeof(inner), read(sv[0], &inner, sizeof(inner)));
	/* EINVAL: a kernel without CONFIG_PID_NS; EPERM: not root */
	if (inner < 0) {
		waitpid(outer, NULL, 0);
		SKIP(return, "no new pid namespace: %s", strerror(-inner));
	}
	self->pid = inner;
	ASSERT_NE(1, inner);
	ASSERT_EQ(0, sys_ptrace(PTRACE_SEIZE, inner, NULL, PTRACE_O_EXITKILL));
	ASSERT_EQ(1, write(sv[0], &go, 1));
	wait_trap_at(_metadata, inner, sleep_s);
	trace_sleep(_metadata, inner, inner, 0);
	close(sv[0]);
}

#ifndef CLONE_NEWTIME
# define CLONE_NEWTIME		0x00000080
#endif

/* The monotonic clock of the tracer's time namespace: 1000 days ahead. */
#define BTS_TIMENS_OFFSET_S	(1000L * 24 * 3600)

/*
 * Move this process (a test is a process of its own) into a new time
 * namespace whose CLOCK_MONOTONIC is @offset_s seconds ahead of the
 * host's: its offsets are set before any task is in it, then this
 * single-threaded process joins it. Returns 0 or -errno.
 */
static int enter_new_timens(long offset_s)
{
	char buf[64];
	int fd, len, ret = 0;

	if (unshare(CLONE_NEWTIME))
		return -errno;
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0)
		return -errno;
	len = snprintf(buf, sizeof(buf), "monotonic %ld 0", offset_s);
	if (write(fd, buf, len) != len)
		ret = -errno;
	close(fd);
	if (ret)
		return ret;
	fd = open("/proc/self/ns/time_for_children", O_RDONLY);
	if (fd < 0)
		return -errno;
	if (setns(fd, CLONE_NEWTIME))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * The clock of the events is CLOCK_MONOTONIC as the tracer reads it, in
 * its own time namespace: between its clock_gettime() before and after.
 */
TEST_F(bts, sched_time_namespace)
{
	int err = enter_new_timens(BTS_TIMENS_OFFSET_S);

	/* EINVAL: a kernel without CONFIG_TIME_NS; EPERM: not root */
	if (err == -EINVAL || err == -EPERM)
		SKIP(return, "no new time namespace: %s", strerror(-err));
	ASSERT_EQ(0, err) {
		TH_LOG("entering a new time namespace: %s", strerror(-err));
	}
	/* the offset is in force for this process */
	ASSERT_LE(BTS_TIMENS_OFFSET_S * 1000000000ULL, now_ns());
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_sleep, 0);
	cont_to(_metadata, self->pid, 0, sleep_s);
	trace_sleep(_metadata, self->pid, self->pid, 0);
}

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
 * -1 if the CPU takes ICEBP for an undefined opcode (stock QEMU 7.2's TCG
 * does).
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

/* ---- Lifecycle ---- */

static void detach_routine(unsigned long unused)
{
	int i, sum = 0;

	bts_jmp();
	/* untraced now: TF must be gone, or this loop dies of SIGTRAP */
	for (i = 0; i < 1000; i++)
		sum += i & 1 ? i : -i;
	_exit(get_eflags() & X86_EFLAGS_TF ? 3 : sum == 500 ? 0 : 4);
}

/* PTRACE_DETACH ends tracing, refunds the charge, the tracee runs on. */
TEST_F(bts, detach)
{
	int status;

	self->pid = spawn(_metadata, detach_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 64 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	/* traced until now; the records go with the detach */
	EXPECT_EQ(ARRAY_SIZE(jmp_trace), bts_size(self->pid));
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	ASSERT_LT(0, vmpin_kb(0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_DETACH, self->pid, NULL, 0));
	EXPECT_EQ(0, vmpin_settled_kb());
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	self->pid = 0;
}

static atomic_int stop_spinning;

static void on_usr1(int sig)
{
	stop_spinning = 1;
}

/* Spins until SIGUSR1, then exits 0 if TF is clear. */
static void spin_until_usr1(void)
{
	signal(SIGUSR1, on_usr1);
	while (!stop_spinning)
		asm volatile ("" ::: "memory");
	_exit(get_eflags() & X86_EFLAGS_TF ? 3 : 0);
}

/*
 * A tracer process attaches to the spinning @target, traces it until it
 * has records, tells us through @fd and then exits or waits to be killed.
 */
static void other_tracer(pid_t target, int fd, bool wait_for_kill)
{
	int status;

	if (sys_ptrace(PTRACE_ATTACH, target, NULL, 0) ||
	    waitpid(target, &status, __WALL) != target ||
	    bts_config_backend(target, 64 << 10, BTS_TRACE_ALLOC, 0,
			       PTRACE_BTS_BACKEND_ANY) ||
	    !backend_as_expected(target) || vmpin_kb(0) <= 0 ||
	    sys_ptrace(PTRACE_CONT, target, NULL, 0))
		_exit(1);
	if (stop_when_recorded(target, 1) < 1 ||
	    sys_ptrace(PTRACE_CONT, target, NULL, 0))
		_exit(3);
	if (write(fd, "x", 1) != 1)
		_exit(2);
	if (wait_for_kill)
		for (;;)
			pause();
	sleep_ms(50);
	_exit(0);
}

/* After the tracer is gone, the tracee is untraced and runs on. */
static void tracer_gone(struct __test_metadata *_metadata, pid_t *tracee,
			bool kill_it)
{
	struct ptrace_bts_config cfg;
	pid_t tracer;
	int fds[2], status;
	char c;

	*tracee = fork();
	ASSERT_GE(*tracee, 0);
	if (*tracee == 0)
		spin_until_usr1();
	ASSERT_EQ(0, pipe(fds));
	tracer = fork();
	ASSERT_GE(tracer, 0);
	if (tracer == 0)
		other_tracer(*tracee, fds[1], kill_it);
	close(fds[1]);
	ASSERT_EQ(1, read(fds[0], &c, 1));
	sleep_ms(20);
	if (kill_it)
		kill(tracer, SIGKILL);
	ASSERT_EQ(tracer, waitpid(tracer, &status, 0));
	ASSERT_TRUE(kill_it ? WIFSIGNALED(status) : status == 0) {
		TH_LOG("tracer status %#x", status);
	}

	/* what the dead tracer configured is gone */
	ASSERT_EQ(0, sys_ptrace(PTRACE_ATTACH, *tracee, NULL, 0));
	ASSERT_EQ(*tracee, waitpid(*tracee, &status, __WALL));
	get_status(_metadata, *tracee, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, bts_size(*tracee));
	ASSERT_EQ(0, sys_ptrace(PTRACE_DETACH, *tracee, NULL, 0));
	sleep_ms(20);
	kill(*tracee, SIGUSR1);
	ASSERT_EQ(*tracee, waitpid(*tracee, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	*tracee = 0;
}

TEST_F(bts, tracer_exits)
{
	tracer_gone(_metadata, &self->pid, false);
}

TEST_F(bts, tracer_killed)
{
	tracer_gone(_metadata, &self->pid, true);
}

/*
 * A traced tracee exits: records are readable at the exit stop, the
 * charge goes when it is reaped.
 */
TEST_F(bts, tracee_exits)
{
	int status;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp,
			  PTRACE_O_TRACEEXIT);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 1024 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXIT << 8), status >> 8);
	/* still readable at the exit stop: bts_jmp's, then the way out */
	EXPECT_LT(ARRAY_SIZE(jmp_trace), bts_size(self->pid));
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status));
	self->pid = 0;
	EXPECT_EQ(0, vmpin_settled_kb());
}

/* argv[1] that makes this program the tracee of another test binary. */
#define BTS_HELPER_ARG		"--bts-helper"
/* This program as a former tracee: many branches, no breakpoint. */
#define BTS_SPIN_ARG		"--bts-spin"
#define BTS_SPIN_LOOPS		20000

/* bts_jmp's labels as the helper reports them. */
struct jmp_labels {
	__u64	s, e;
	__u64	from[ARRAY_SIZE(jmp_trace)];
	__u64	to[ARRAY_SIZE(jmp_trace)];
};

/*
 * This program as a tracee: report bts_jmp's labels through the fd named
 * in @fd_arg, if any (a tracer of another build cannot know them), then
 * run bts_jmp.
 */
static int bts_helper(const char *fd_arg)
{
	struct jmp_labels l = {
		.s = (uintptr_t)jmp_s, .e = (uintptr_t)jmp_e,
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(jmp_trace); i++) {
		l.from[i] = (uintptr_t)jmp_trace[i].from;
		l.to[i] = (uintptr_t)jmp_trace[i].to;
	}
	if (fd_arg && write(atoi(fd_arg), &l, sizeof(l)) != sizeof(l))
		return 1;
	bts_jmp();
	return 0;
}

static void exec_routine(unsigned long unused)
{
	bts_jmp();
	execl("/proc/self/exe", "ptrace_bts", BTS_HELPER_ARG, NULL);
	_exit(5);
}

/* Resume @pid and wait for its exit, which must be a clean one. */
static void cont_to_exit(struct __test_metadata *_metadata, pid_t pid)
{
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/*
 * exec with tracing on: the configuration, the buffer and its records
 * stay, and the new image's branches follow the old image's: bts_jmp's
 * before the exec first, the new image's run of it last.
 */
TEST_F(bts, tracee_execs)
{
	struct ptrace_bts_config cfg;
	long at_exec, n;
	int status;

	self->pid = spawn(_metadata, exec_routine, 0, PTRACE_O_TRACEEXEC);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_MAX_RECORDS * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXEC << 8), status >> 8);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(BTS_MAX_RECORDS * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_LT(0, vmpin_kb(0));
	at_exec = bts_size(self->pid);
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));

	/* the new image (the same program) runs bts_jmp once more */
	cont_to(_metadata, self->pid, 0, jmp_s);
	cont_to(_metadata, self->pid, 0, jmp_e);
	n = bts_size(self->pid);
	EXPECT_LT(at_exec + ARRAY_SIZE(jmp_trace), n);
	/* nothing was overwritten */
	EXPECT_GT(BTS_MAX_RECORDS, n);
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	check_newest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	cont_to_exit(_metadata, self->pid);
	self->pid = 0;
}

/* A copy of this program its user may execute but not read. */
static int unreadable_copy(struct __test_metadata *_metadata)
{
	char buf[65536];
	int in, out;
	ssize_t n;

	in = open("/proc/self/exe", O_RDONLY);
	ASSERT_LE(0, in);
	out = memfd_create("ptrace_bts_private", 0);
	ASSERT_LE(0, out);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ASSERT_EQ(n, write(out, buf, n));
	ASSERT_EQ(0, n);
	close(in);
	ASSERT_EQ(0, fchmod(out, 0111));
	return out;
}

static void exec_private_routine(unsigned long fd)
{
	char *const argv[] = { "ptrace_bts", BTS_HELPER_ARG, NULL };

	/* An ordinary user, whose image its tracer may read until the exec. */
	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
	    prctl(PR_SET_DUMPABLE, 1))
		_exit(6);
	bts_jmp();
	fexecve(fd, argv, environ);
	_exit(5);
}

/*
 * exec of an image the tracee's user may not read: as PTRACE_PEEKTEXT
 * stops working, the trace stops (perf detaches its events there too).
 * The records of the old image stay; none of the new image's arrive, and
 * an unprivileged tracer cannot start another trace.
 */
TEST_F(bts, tracee_execs_private)
{
	struct ptrace_bts_config cfg;
	long at_exec;
	int status, fd;

	fd = unreadable_copy(_metadata);
	/* A tracer that may not read private images. */
	drop_cap(_metadata, CAP_SYS_PTRACE);

	self->pid = spawn(_metadata, exec_private_routine, fd,
			  PTRACE_O_TRACEEXEC);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_MAX_RECORDS * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXEC << 8), status >> 8);

	errno = 0;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_PEEKTEXT, self->pid,
				 (void *)jmp_s, 0));
	EXPECT_EQ(EIO, errno);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(BTS_MAX_RECORDS * BTS_REC, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	at_exec = bts_size(self->pid);
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, BTS_REC,
				 BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EPERM, errno);

	/* The new image runs bts_jmp, unrecorded. */
	cont_to(_metadata, self->pid, 0, jmp_s);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(at_exec, bts_size(self->pid));
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	cont_to_exit(_metadata, self->pid);
	self->pid = 0;
}

/*
 * The tracer of @pid configures a small buffer with the overflow signal at
 * the exec stop, then exits without resuming it: the former tracee runs on.
 */
static void tracer_leaving_a_trace(void)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		_exit(10);
	if (pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(11);
		kill(getpid(), SIGSTOP);
		execl("/proc/self/exe", "ptrace_bts", BTS_SPIN_ARG, NULL);
		_exit(12);
	}
	if (waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status) ||
	    sys_ptrace(PTRACE_SETOPTIONS, pid, NULL, PTRACE_O_TRACEEXEC) ||
	    sys_ptrace(PTRACE_CONT, pid, NULL, 0) ||
	    waitpid(pid, &status, __WALL) != pid ||
	    status >> 8 != (SIGTRAP | (PTRACE_EVENT_EXEC << 8)))
		_exit(13);
	if (bts_config_backend(pid, BTS_REC,
			       BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL, SIGUSR1,
			       PTRACE_BTS_BACKEND_ANY))
		_exit(14);
	_exit(0);
}

/*
 * The tracer exits while the tracee sits in an event stop, with a buffer
 * that its first branch fills. The unlink resumes the tracee, untraced: it
 * must be neither stepped for a trace nobody reads nor sent the overflow
 * signal, which would kill it, before the release work runs. (Without the
 * stop in ptrace_bts_untrace() this is a race the release work usually
 * wins under TCG; KUnit's suspend_atomic checks the stop itself.)
 */
TEST_F(bts, tracer_exit_stops_at_once)
{
	int status;
	pid_t tracer, tracee;

	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	tracer = fork();
	ASSERT_LE(0, tracer);
	if (tracer == 0)
		tracer_leaving_a_trace();
	ASSERT_EQ(tracer, waitpid(tracer, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	/* The former tracee, now our child. */
	tracee = waitpid(-1, &status, __WALL);
	ASSERT_LT(0, tracee);
	EXPECT_TRUE(WIFEXITED(status)) {
		TH_LOG("the former tracee: status %#x (signal %d)", status,
		       WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
}

#ifdef __x86_64__
/* The 32-bit build of this test, next to this one. */
static bool find_32bit_build(char *path, size_t size)
{
	static const char name[] = "ptrace_bts_32";
	ssize_t len = readlink("/proc/self/exe", path, size - 1);
	char *slash;

	if (len < 0)
		return false;
	path[len] = 0;
	slash = strrchr(path, '/');
	if (!slash || snprintf(slash + 1, path + size - slash - 1, "%s",
			       name) >= path + size - slash - 1)
		return false;
	return !access(path, X_OK);
}

/* Start the 32-bit build as a helper; returns its labels in @l. */
static pid_t spawn_32bit(struct __test_metadata *_metadata, const char *path,
			 struct jmp_labels *l)
{
	int fds[2], status;
	char fd_arg[16];
	pid_t pid;

	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(fds[0]);
		snprintf(fd_arg, sizeof(fd_arg), "%d", fds[1]);
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(90);
		execl(path, path, BTS_HELPER_ARG, fd_arg, NULL);
		_exit(91);
	}
	close(fds[1]);
	/* the SIGTRAP of the exec */
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
		TH_LOG("%s: status %#x", path, status);
	}
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
				PTRACE_O_EXITKILL));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(sizeof(*l), read(fds[0], l, sizeof(*l)));
	close(fds[0]);
	wait_trap_at(_metadata, pid, (const char *)(uintptr_t)l->s);
	return pid;
}

/*
 * A 64-bit tracer of a 32-bit tracee gets the same records, with the
 * tracee's 32-bit addresses.
 */
TEST_F(bts, tracee_32bit)
{
	struct branch exp[ARRAY_SIZE(jmp_trace)];
	struct user_regs_struct regs;
	struct iovec iov = { &regs, sizeof(regs) };
	char path[PATH_MAX];
	struct jmp_labels l;
	int i;

	if (!find_32bit_build(path, sizeof(path)))
		SKIP(return, "no ptrace_bts_32 next to this test");
	self->pid = spawn_32bit(_metadata, path, &l);
	/* it is a 32-bit task: its register set is the i386 one */
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGSET, self->pid,
				(void *)NT_PRSTATUS, (unsigned long)&iov));
	ASSERT_GT(sizeof(regs), iov.iov_len);
	for (i = 0; i < ARRAY_SIZE(exp); i++) {
		ASSERT_GT(1ULL << 32, l.from[i]);
		ASSERT_GT(1ULL << 32, l.to[i]);
		exp[i].from = (const char *)(uintptr_t)l.from[i];
		exp[i].to = (const char *)(uintptr_t)l.to[i];
	}
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, (const char *)(uintptr_t)l.e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}
#endif

/* fork (or vfork) under tracing; the child runs branches and exits. */
static void fork_routine(unsigned long use_vfork)
{
	int status, i, sum = 0;
	pid_t child;

	bts_jmp();
	child = use_vfork ? vfork() : fork();
	if (child == 0) {
		if (use_vfork)
			_exit(get_eflags() & X86_EFLAGS_TF ? 3 : 0);
		for (i = 0; i < 1000; i++)
			sum += i & 1 ? i : -i;
		_exit(get_eflags() & X86_EFLAGS_TF ? 3 : sum == 500 ? 0 : 4);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		_exit(6);
	/* the child's fate is ours: a stray SIGTRAP shows here */
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
}

/*
 * An untraced child of a traced task does not inherit the trap flag; the
 * parent, traced all along, has bts_jmp's branches and those of the fork
 * and the wait in its buffer at its exit.
 */
static void fork_untraced(struct __test_metadata *_metadata, pid_t *pid,
			  unsigned long use_vfork)
{
	const int exit_stop = SIGTRAP | (PTRACE_EVENT_EXIT << 8);
	int status, sig = 0;
	bool exit_seen = false;

	*pid = spawn(_metadata, fork_routine, use_vfork, PTRACE_O_TRACEEXIT);
	cont_to(_metadata, *pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, *pid, BTS_MAX_RECORDS * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, jmp_e);
	/* The child's exit stops the tracee with SIGCHLD; pass it on. */
	for (;;) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, sig));
		ASSERT_EQ(*pid, waitpid(*pid, &status, __WALL));
		if (!WIFSTOPPED(status))
			break;
		sig = WSTOPSIG(status);
		if (status >> 8 == exit_stop) {
			check_oldest(_metadata, *pid, jmp_trace,
				     ARRAY_SIZE(jmp_trace));
			EXPECT_LT(ARRAY_SIZE(jmp_trace), bts_size(*pid));
			EXPECT_GT(BTS_MAX_RECORDS, bts_size(*pid));
			exit_seen = true;
			sig = 0;
		}
		ASSERT_NE(SIGTRAP, sig) {
			TH_LOG("a SIGTRAP stop at %#lx",
			       get_ip(_metadata, *pid));
		}
	}
	EXPECT_TRUE(exit_seen);
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	*pid = 0;
}

TEST_F(bts, fork_child_untraced)
{
	fork_untraced(_metadata, &self->pid, 0);
}

TEST_F(bts, vfork_child_untraced)
{
	fork_untraced(_metadata, &self->pid, 1);
}

/*
 * With the child auto-attached, the tracer sees it start unconfigured
 * while the parent's configuration stays.
 */
static void fork_traced(struct __test_metadata *_metadata, pid_t *pid,
			unsigned long use_vfork)
{
	int event = use_vfork ? PTRACE_EVENT_VFORK : PTRACE_EVENT_FORK;
	struct ptrace_bts_config cfg;
	unsigned long msg;
	int status;
	pid_t child;

	*pid = spawn(_metadata, fork_routine, use_vfork,
		     PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK);
	cont_to(_metadata, *pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(_metadata, *pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, jmp_e);
	check_trace(_metadata, *pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, 0));
	ASSERT_EQ(*pid, waitpid(*pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (event << 8), status >> 8);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETEVENTMSG, *pid, NULL,
				(unsigned long)&msg));
	child = msg;
	ASSERT_EQ(child, waitpid(child, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));

	get_status(_metadata, child, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, bts_size(child));
	get_status(_metadata, *pid, &cfg);
	EXPECT_EQ(64 * BTS_REC, cfg.size);

	/* let the child finish; it records nothing */
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, child, NULL,
				PTRACE_O_EXITKILL | PTRACE_O_TRACEEXIT));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, child, NULL, 0));
	ASSERT_EQ(child, waitpid(child, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXIT << 8), status >> 8);
	EXPECT_EQ(0, bts_size(child));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, child, NULL, 0));
	ASSERT_EQ(child, waitpid(child, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(bts, fork_child_starts_unconfigured)
{
	fork_traced(_metadata, &self->pid, 0);
}

TEST_F(bts, vfork_child_starts_unconfigured)
{
	fork_traced(_metadata, &self->pid, 1);
}

static void *thread_fn(void *arg)
{
	bts_call();
	return NULL;
}

static void threads_routine(unsigned long unused)
{
	pthread_t t;

	if (pthread_create(&t, NULL, thread_fn, NULL))
		_exit(7);
	bts_jmp();
	pthread_join(t, NULL);
	_exit(0);
}

/*
 * Per-thread tracing in a thread group: the new thread starts untraced;
 * configured separately, each thread records only its own branches.
 */
TEST_F(bts, threads)
{
	static const struct branch call_trace[] = {
		{ call_f0, call_fn1 }, { call_f1, call_fn2 },
		{ call_f3, call_r1 }, { call_f2, call_r0 },
	};
	struct ptrace_bts_config cfg;
	pid_t tid = 0, t;
	int status, at_end = 0;
	unsigned long ip;
	bool leader;

	self->pid = spawn(_metadata, threads_routine, 0, PTRACE_O_TRACECLONE);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	/*
	 * The stops come in any order between the threads: the clone event,
	 * the new thread's first stop, and each thread's two breakpoints. A
	 * thread at its second breakpoint stays stopped.
	 */
	while (at_end < 2) {
		t = wait_any(_metadata, &status);
		ASSERT_TRUE(WIFSTOPPED(status)) {
			TH_LOG("tid %d status %#x", t, status);
		}
		leader = t == self->pid;
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_CLONE << 8))) {
			ASSERT_TRUE(leader);
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
			continue;
		}
		if (WSTOPSIG(status) == SIGSTOP && !leader) {
			tid = t;
			get_status(_metadata, tid, &cfg);
			EXPECT_EQ(0, cfg.size);
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
			continue;
		}
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ip = get_ip(_metadata, t);
		if (ip == (unsigned long)(leader ? jmp_s : call_s)) {
			ASSERT_EQ(0, bts_config(_metadata, t, (leader ? 8 : 16) * BTS_REC,
						BTS_TRACE_ALLOC, 0));
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
			continue;
		}
		ASSERT_EQ((unsigned long)(leader ? jmp_e : call_e), ip) {
			TH_LOG("tid %d (leader %d)", t, self->pid);
		}
		get_status(_metadata, t, &cfg);
		if (leader) {
			EXPECT_EQ(8 * BTS_REC, cfg.size);
			check_trace(_metadata, t, jmp_trace,
				    ARRAY_SIZE(jmp_trace));
		} else {
			EXPECT_EQ(tid, t);
			EXPECT_EQ(16 * BTS_REC, cfg.size);
			check_trace(_metadata, t, call_trace,
				    ARRAY_SIZE(call_trace));
		}
		at_end++;
	}
	ASSERT_NE(0, tid);
}

/* A thread created by a traced thread starts untraced and stays so. */
TEST_F(bts, new_thread_untraced)
{
	pid_t t, tid = 0;
	int status, done = 0;

	self->pid = spawn(_metadata, threads_routine, 0, PTRACE_O_TRACECLONE);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 4096 * BTS_REC, BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	while (done < 2) {
		t = wait_any(_metadata, &status);
		/* the thread ends while its creator is checked */
		if (t != self->pid && !WIFSTOPPED(status))
			continue;
		ASSERT_TRUE(WIFSTOPPED(status));
		if (t != self->pid && !tid)
			tid = t;
		if (WSTOPSIG(status) == SIGTRAP && t == tid &&
		    get_ip(_metadata, t) == (unsigned long)call_e) {
			/* ran bts_call, unconfigured: nothing */
			EXPECT_EQ(0, bts_size(t));
			done++;
		}
		if (WSTOPSIG(status) == SIGTRAP && t == self->pid &&
		    get_ip(_metadata, t) == (unsigned long)jmp_e) {
			/* the creator's trace goes on */
			EXPECT_LT(4, bts_size(t));
			done++;
		}
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
	}
}

struct killer {
	pid_t pid;
	unsigned int delay_us;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	usleep(k->delay_us);
	kill(k->pid, SIGKILL);
	return NULL;
}

/*
 * SIGKILL races with a large DRAIN: the DRAIN either completes with
 * every record or fails with ESRCH, and the charge goes away.
 */
/* Enough records that a DRAIN takes a while. */
#define DRAIN_RACE_RECORDS	40000

TEST_F_TIMEOUT(bts, sigkill_during_drain, 120)
{
	static const unsigned int delays[] = { 0, 200, 2000 };
	const unsigned long n = DRAIN_RACE_RECORDS;
	struct bts_struct *rec;
	struct killer k;
	pthread_t thread;
	int i, status;
	long got;

	for (i = 0; i < ARRAY_SIZE(delays); i++) {
		self->pid = start_many(_metadata, n, n, 0);
		cont_to(_metadata, self->pid, 0, many_e);
		ASSERT_EQ(n, bts_size(self->pid));
		k.pid = self->pid;
		k.delay_us = delays[i];
		rec = poisoned_records(n);
		ASSERT_FALSE(!rec);
		ASSERT_EQ(0, pthread_create(&thread, NULL, kill_later, &k));
		got = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, n * BTS_REC);
		if (got < 0) {
			EXPECT_EQ(ESRCH, errno);
		} else {
			EXPECT_EQ(n, got);
			check_many_all(_metadata, rec, n);
		}
		free(rec);
		pthread_join(thread, NULL);
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		EXPECT_TRUE(WIFSIGNALED(status));
		self->pid = 0;
		EXPECT_EQ(0, vmpin_settled_kb());
	}
}

/* PTRACE_KILL: the requests see a tracee that is gone, the charge too. */
TEST_F(bts, ptrace_kill)
{
	int status;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 64);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_KILL, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFSIGNALED(status));
	EXPECT_EQ(-1, bts_size(self->pid));
	EXPECT_EQ(ESRCH, errno);
	self->pid = 0;
	EXPECT_EQ(0, vmpin_settled_kb());
}

static int bts_spin(void)
{
	int i;

	/* The empty asm keeps the loop, and its branch, in the program. */
	for (i = 0; i < BTS_SPIN_LOOPS; i++)
		asm volatile ("" ::: "memory");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], BTS_SPIN_ARG))
		return bts_spin();
	if (argc >= 2 && !strcmp(argv[1], BTS_HELPER_ARG))
		return bts_helper(argc > 2 ? argv[2] : NULL);
	return test_harness_run(argc, argv);
}
