/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the ptrace_bts_* test programs share: the tracer's helpers, the
 * expected branches of the routines of ptrace_bts_asm.S and the fixture.
 * Each program includes it from its one file.
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
#ifndef PTRACE_BTS_HARNESS_H
#define PTRACE_BTS_HARNESS_H

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
/*
 * The first struct ptrace_bts_config, without backend; the second, without
 * state, next and lost; and today's.
 */
#define BTS_CONFIG_SIZE_VER0	16
#define BTS_CONFIG_SIZE_VER1	20
#define BTS_CONFIG_SIZE_VER2	40
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
static inline long vmpin_settled_kb(void)
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

static inline long bts_config_backend(pid_t pid, unsigned int size,
				      unsigned int flags, unsigned int sig,
				      unsigned int backend)
{
	struct ptrace_bts_config cfg = {
		.size = size, .flags = flags, .signal = sig, .backend = backend,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
}

/* The backend STATUS reports for @pid, or -1. */
static inline long bts_backend(pid_t pid)
{
	struct ptrace_bts_config cfg;

	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		return -1;
	return cfg.backend;
}

/* After a CONFIG with O_ALLOC: is @pid traced by the backend expected? */
static inline bool backend_as_expected(pid_t pid)
{
	return bts_backend(pid) == expected_backend();
}

/* STATUS of @pid; it returns the size of today's struct. */
static inline void get_status(struct __test_metadata *_metadata, pid_t pid,
			      struct ptrace_bts_config *cfg)
{
	memset(cfg, 0xa5, sizeof(*cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, pid, cfg, sizeof(*cfg))) {
		TH_LOG("PTRACE_BTS_STATUS: %m");
	}
}

static inline void check_backend(struct __test_metadata *_metadata, pid_t pid)
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
static inline long bts_config(struct __test_metadata *_metadata, pid_t pid,
			      unsigned int size, unsigned int flags, unsigned int sig)
{
	long ret = bts_config_backend(pid, size, flags, sig,
				      PTRACE_BTS_BACKEND_ANY);

	if (!ret && (flags & BTS_TRACE_ALLOC) == BTS_TRACE_ALLOC)
		check_backend(_metadata, pid);
	return ret;
}

/* PTRACE_BTS_READ of up to @n records from @seq on into @buf; *@rd as returned. */
static inline long bts_read(pid_t pid, __u64 seq, struct bts_struct *buf,
			    long n, struct ptrace_bts_read *rd)
{
	memset(rd, 0, sizeof(*rd));
	rd->seq = seq;
	rd->buf = (unsigned long)buf;
	rd->size = n * BTS_REC;
	return sys_ptrace(PTRACE_BTS_READ, pid, rd, sizeof(*rd));
}

static inline long bts_size(pid_t pid)
{
	return sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
}

/* Start a child that stops itself for its parent, then runs @fn(@arg). */
static inline pid_t spawn(struct __test_metadata *_metadata,
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

static inline unsigned long get_ip(struct __test_metadata *_metadata, pid_t pid)
{
	struct user_regs_struct regs;

	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, pid, NULL,
				(unsigned long)&regs)) {
		TH_LOG("PTRACE_GETREGS: %m");
	}
	return REGS_IP(regs);
}

/* Wait for @pid's stop at the breakpoint before @ip; anything else fails. */
static inline void wait_trap_at(struct __test_metadata *_metadata, pid_t pid,
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
static inline void cont_to(struct __test_metadata *_metadata, pid_t pid, int sig,
			   const char *ip)
{
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, sig));
	wait_trap_at(_metadata, pid, ip);
}

/* Resume @pid and wait for a stop with @sig; returns the stop's IP. */
static inline unsigned long cont_to_signal(struct __test_metadata *_metadata,
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
static inline pid_t wait_any(struct __test_metadata *_metadata, int *status)
{
	pid_t tid = waitpid(-1, status, __WALL);

	ASSERT_LT(0, tid);
	return tid;
}

static inline void run_routine(unsigned long fn)
{
	((void (*)(void))fn)();
}

/*
 * Start a tracee that runs @fn, stopped at its first breakpoint (@start),
 * with branch tracing into a @records record buffer.
 */
static inline pid_t start_traced(struct __test_metadata *_metadata, void (*fn)(void),
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
static inline bool user_address(__u64 addr)
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
static inline void check_records(struct __test_metadata *_metadata,
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
static inline void check_trace(struct __test_metadata *_metadata, pid_t pid,
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
static inline void trace_routine(struct __test_metadata *_metadata, pid_t *pid,
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
static inline pid_t spawn_jmp(struct __test_metadata *_metadata)
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
static inline void rerun_jmp(struct __test_metadata *_metadata, pid_t pid,
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
static inline bool get_record(pid_t pid, long index, struct bts_struct *rec)
{
	memset(rec, 0, sizeof(*rec));
	return !sys_ptrace(PTRACE_BTS_GET, pid, rec, index);
}

/* The @n_exp oldest records, read with GET (nothing drained), are @exp. */
static inline void check_oldest(struct __test_metadata *_metadata, pid_t pid,
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
static inline void check_newest(struct __test_metadata *_metadata, pid_t pid,
				const struct branch *exp, long n_exp)
{
	struct bts_struct rec[16];
	long i;

	ASSERT_LE(n_exp, ARRAY_SIZE(rec));
	for (i = 0; i < n_exp; i++)
		ASSERT_TRUE(get_record(pid, n_exp - 1 - i, &rec[i]));
	check_records(_metadata, rec, n_exp, exp, n_exp);
}

static inline void sleep_ms(unsigned int ms)
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
static inline long stop_when_recorded(pid_t pid, long want)
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

/* Drop CAP_IPC_LOCK from the effective set of this (test) process. */
static inline void drop_cap(struct __test_metadata *_metadata, int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	ASSERT_EQ(0, syscall(SYS_capget, &hdr, data));
	data[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
	ASSERT_EQ(0, syscall(SYS_capset, &hdr, data));
}

/*
 * Install the assembly @handler for @sig with bts_sig_restorer, bypassing
 * libc, whose own code would add branches to the trace.
 */
static inline void install_asm_handler(int sig, void *handler)
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

static const struct branch many_loop = { many_f0, many_t0 };
static const struct branch many_exit = { many_f1, many_t1 };

/*
 * The @n records at @rec must be the @n_exp records [@first, @first +
 * @n_exp) of bts_many(@total).
 */
static inline void check_many(struct __test_metadata *_metadata,
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

static inline pid_t start_many(struct __test_metadata *_metadata, unsigned long n,
			       unsigned int records, unsigned int flags)
{
	pid_t pid = spawn(_metadata, (void (*)(unsigned long))bts_many, n, 0);

	cont_to(_metadata, pid, 0, many_s);
	ASSERT_EQ(0, bts_config(_metadata, pid, records * BTS_REC, BTS_TRACE_ALLOC | flags,
				flags & PTRACE_BTS_O_SIGNAL ? BTS_OVERFLOW_SIG : 0));
	return pid;
}

/* A buffer for @n records, poisoned so that a record not written shows. */
static inline struct bts_struct *poisoned_records(long n)
{
	struct bts_struct *rec = malloc(n * sizeof(*rec));

	if (rec)
		memset(rec, 0xa5, n * sizeof(*rec));
	return rec;
}

/* All @n records of bts_many(@n), one by one; one message for them all. */
static inline void check_many_all(struct __test_metadata *_metadata,
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

#endif /* PTRACE_BTS_HARNESS_H */
