// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace: the PTRACE_BTS_* requests.
 *
 * The tracee runs the assembly routines of ptrace_bts_asm.S, so each test
 * knows every branch it must find, at its exact source and target, and
 * checks the trace record by record. The tests run unchanged on the
 * hardware backend and on the emulated one; on CPUs without BTS (any VM
 * under TCG) the emulated one is what they exercise.
 *
 * Every test that traces checks on its way out that the memory charge of
 * the buffers (VmLck of the tracer) is back to zero.
 */
#define _GNU_SOURCE
#include <errno.h>
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
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/ucontext.h>
#include <sys/user.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/elf.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "helpers.h"
#include "ptrace_bts.h"

#define BTS_REC			sizeof(struct bts_struct)
/* The kernel's per-buffer cap, DS_MAX_BUFFER_SIZE. */
#define BTS_MAX_BUFFER		(4u << 20)
#define BTS_OVERFLOW_SIG	SIGUSR2
#define BTS_TRACE_ALLOC		(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC)

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
# define REGS_IP_OFF	offsetof(struct user_regs_struct, rip)
#else
# define REGS_IP(r)	((r).eip)
# define REGS_IP_OFF	offsetof(struct user_regs_struct, eip)
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

static long sys_ptrace(long request, pid_t pid, void *addr, unsigned long data)
{
	return syscall(SYS_ptrace, request, pid, addr, (void *)data);
}

/* Charge of the trace buffers: VmLck of @pid (0: self) in kB. */
static long vmlck_kb(pid_t pid)
{
	char path[64], line[128];
	long kb = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * The refund may be deferred past the tracee's reaping (release from a
 * work item, like the 2.6.31 code did); give it a second.
 */
static long vmlck_settled_kb(void)
{
	long kb;
	int i;

	for (i = 0; i < 100; i++) {
		kb = vmlck_kb(0);
		if (kb == 0)
			break;
		usleep(10000);
	}
	return kb;
}

static long bts_config(pid_t pid, unsigned int size, unsigned int flags,
		       unsigned int sig)
{
	struct ptrace_bts_config cfg = {
		.size = size, .flags = flags, .signal = sig,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
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
	/* A failed assert must not leave a tracee spinning in the VM. */
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

/*
 * Resume @pid (delivering @sig) and wait for its next stop, which must be
 * the breakpoint before @ip. Any other stop (a stray SIGTRAP, a signal,
 * an exit) fails the test.
 */
static void cont_to(struct __test_metadata *_metadata, pid_t pid, int sig,
		    const char *ip)
{
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, sig));
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
	ASSERT_EQ(0, bts_config(pid, records * BTS_REC, BTS_TRACE_ALLOC, 0)) {
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

FIXTURE(bts) {
	pid_t pid;	/* the tracee, killed at teardown */
};

FIXTURE_SETUP(bts)
{
	self->pid = 0;
	ASSERT_EQ(0, vmlck_kb(0));
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
	EXPECT_EQ(0, vmlck_settled_kb());
}

/* ---- The requests ---- */

/* An unconfigured tracee answers STATUS and SIZE; STATUS returns its size. */
TEST_F(bts, status_unconfigured)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	memset(&cfg, 0xa5, sizeof(cfg));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg))) {
		TH_LOG("PTRACE_BTS_STATUS: %m");
	}
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_EQ(0, bts_size(self->pid));
}

/* CONFIG allocates, STATUS reports back what was configured. */
TEST_F(bts, config_status)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	ASSERT_EQ(0, bts_config(self->pid, 10 * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(10 * BTS_REC, cfg.size);
	/* O_ALLOC is an action, not a state: STATUS need not report it. */
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL,
		  cfg.flags & ~PTRACE_BTS_O_ALLOC);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_LT(0, vmlck_kb(0));
}

/* Sizes are rounded down to whole records, with at least one. */
TEST_F(bts, config_rounds_to_records)
{
	static const unsigned int asked[] = { 4096, 30, 1, 3 * BTS_REC + 23 };
	static const unsigned int got[] = { 170 * BTS_REC, BTS_REC, BTS_REC,
					    3 * BTS_REC };
	struct ptrace_bts_config cfg;
	int i;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	for (i = 0; i < ARRAY_SIZE(asked); i++) {
		ASSERT_EQ(0, bts_config(self->pid, asked[i], BTS_TRACE_ALLOC, 0));
		ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid,
						  &cfg, sizeof(cfg)));
		EXPECT_EQ(got[i], cfg.size) {
			TH_LOG("asked for %u bytes", asked[i]);
		}
	}
}

/* O_ALLOC again resizes the buffer and drops the records. */
TEST_F(bts, config_resize)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(4, bts_size(self->pid));
	ASSERT_EQ(0, bts_config(self->pid, 2 * BTS_REC, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(0, bts_size(self->pid));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(2 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags & ~PTRACE_BTS_O_ALLOC);
}

/* Without O_ALLOC only the flags change: buffer and records stay. */
TEST_F(bts, config_flags_only)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, bts_config(self->pid, 0,
				PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SCHED, 0));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(16 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SCHED, cfg.flags);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* Changing the flags needs a buffer to keep. */
TEST_F(bts, config_flags_need_buffer)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, bts_config(self->pid, 0, PTRACE_BTS_O_TRACE, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmlck_kb(0));
}

/* Flags without O_TRACE stop tracing and free the buffer. */
TEST_F(bts, config_disable)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	ASSERT_LT(0, vmlck_kb(0));
	ASSERT_EQ(0, bts_config(self->pid, 0, 0, 0));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, vmlck_settled_kb());
	/* and nothing is recorded any more */
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
	ASSERT_EQ(0, bts_config(self->pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0));
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
	unsigned char buf[2 * sizeof(struct ptrace_bts_config)];
	struct ptrace_bts_config *cfg = (void *)buf;
	int i;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	ASSERT_EQ(0, bts_config(self->pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0));
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(sizeof(*cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
					   sizeof(__u32)));
	EXPECT_EQ(8 * BTS_REC, cfg->size);
	for (i = sizeof(__u32); i < sizeof(buf); i++)
		EXPECT_EQ(0xa5, buf[i]);
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(sizeof(*cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
					   sizeof(buf)));
	EXPECT_EQ(BTS_REC, cfg->bts_size);
	for (i = sizeof(*cfg); i < sizeof(buf); i++)
		EXPECT_EQ(0xa5, buf[i]);
}

/* ---- Errors ---- */

/* Numbers next to the BTS requests are no requests: EIO. */
TEST_F(bts, bad_request)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG - 1, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN + 1, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
}

/* CONFIG with less than the original struct is EINVAL. */
TEST_F(bts, config_bad_len)
{
	struct ptrace_bts_config cfg = {
		.size = 8 * BTS_REC, .flags = BTS_TRACE_ALLOC,
	};

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				 sizeof(cfg) - 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_EQ(0, vmlck_kb(0));
}

/* A larger struct is fine with a zero tail, E2BIG otherwise. */
TEST_F(bts, config_extensible)
{
	struct {
		struct ptrace_bts_config cfg;
		__u32 tail[4];
	} big = {
		.cfg = { .size = 8 * BTS_REC, .flags = BTS_TRACE_ALLOC },
	};
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &big,
				sizeof(big)));
	big.tail[3] = 1;
	big.cfg.size = 2 * BTS_REC;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &big,
				 sizeof(big)));
	EXPECT_EQ(E2BIG, errno);
	/* the failed call changed nothing */
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(8 * BTS_REC, cfg.size);
}

/* Unknown flags and bad signal numbers are EINVAL. */
TEST_F(bts, config_bad_flags)
{
	static const unsigned int bad[] = {
		0x10, 0x80000000, BTS_TRACE_ALLOC | 0x100,
	};
	int i;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-1, bts_config(self->pid, 8 * BTS_REC, bad[i], 0));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("flags %#x", bad[i]);
		}
	}
	EXPECT_EQ(-1, bts_config(self->pid, 8 * BTS_REC,
				 BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL, 1000));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmlck_kb(0));
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

/* Exit status of a child that issues every request on @pid. */
static int all_requests_errno(pid_t pid)
{
	struct ptrace_bts_config cfg = { .size = 8 * BTS_REC,
					 .flags = BTS_TRACE_ALLOC };
	struct bts_struct rec[8];
	long ret[6];
	int i;

	ret[0] = sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
	ret[1] = sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg));
	ret[2] = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	ret[3] = sys_ptrace(PTRACE_BTS_GET, pid, rec, 0);
	ret[4] = sys_ptrace(PTRACE_BTS_CLEAR, pid, NULL, 0);
	ret[5] = sys_ptrace(PTRACE_BTS_DRAIN, pid, rec, sizeof(rec));
	for (i = 0; i < 6; i++)
		if (ret[i] != -1)
			return 10 + i;
	return errno == ESRCH ? 0 : 20;
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
	int status;

	self->pid = spawn(_metadata, spin, 0, 0);
	ASSERT_EQ(0, bts_config(self->pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	usleep(20000);
	EXPECT_EQ(0, all_requests_errno(self->pid));
	/* stopped again, it answers; the spin loop filled the buffer */
	kill(self->pid, SIGSTOP);
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));
	EXPECT_EQ(8, bts_size(self->pid));
}

/* Buffers above DS_MAX_BUFFER_SIZE are EINVAL; the cap itself is fine. */
TEST_F(bts, too_large)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, bts_config(self->pid, BTS_MAX_BUFFER + BTS_REC,
				 BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bts_config(self->pid, 0xffffffff, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmlck_kb(0));
	ASSERT_EQ(0, bts_config(self->pid, BTS_MAX_BUFFER, BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(BTS_MAX_BUFFER / BTS_REC * BTS_REC, cfg.size);
}

/* Drop CAP_IPC_LOCK from the effective set of this (test) process. */
static void drop_ipc_lock(struct __test_metadata *_metadata)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	ASSERT_EQ(0, syscall(SYS_capget, &hdr, data));
	data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	ASSERT_EQ(0, syscall(SYS_capset, &hdr, data));
}

/* Without CAP_IPC_LOCK, RLIMIT_MEMLOCK bounds the buffer: ENOMEM. */
TEST_F(bts, memlock_limit)
{
	struct rlimit lim = { 64 << 10, 64 << 10 };

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	drop_ipc_lock(_metadata);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &lim));
	EXPECT_EQ(-1, bts_config(self->pid, 1 << 20, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(0, vmlck_kb(0));
	/* within the limit it works, and is charged */
	ASSERT_EQ(0, bts_config(self->pid, 32 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(28, vmlck_kb(0));
	EXPECT_GE(64, vmlck_kb(0));
	EXPECT_EQ(0, bts_config(self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmlck_settled_kb());
}

/* The charge follows the buffer size through allocation and resizing. */
TEST_F(bts, memory_charge)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	ASSERT_EQ(0, bts_config(self->pid, 256 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(252, vmlck_kb(0));
	EXPECT_GE(256 + 16, vmlck_kb(0));
	ASSERT_EQ(0, bts_config(self->pid, 16 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(12, vmlck_kb(0));
	EXPECT_GE(16 + 16, vmlck_kb(0));
	ASSERT_EQ(0, bts_config(self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmlck_settled_kb());
}

/* ---- Exact branches of the emulated backend ---- */

/* Short, near and backward jmp. */
TEST_F(bts, branch_jmp)
{
	TRACE_ROUTINE(bts_jmp, jmp_s, jmp_e, jmp_trace, ARRAY_SIZE(jmp_trace));
}

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

/* Install bts_sig_handler with its own restorer, bypassing libc. */
static void sig_routine(unsigned long unused)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned int mask[2];
	} ksa = {
		.handler = (void *)bts_sig_handler,
		.flags = SA_SIGINFO | 0x04000000,	/* SA_RESTORER */
		.restorer = (void *)bts_sig_restorer,
	};

	if (syscall(SYS_rt_sigaction, SIGUSR1, &ksa, NULL, sizeof(ksa.mask)))
		_exit(91);
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
	ASSERT_EQ(0, bts_config(self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to_signal(_metadata, self->pid, 0, SIGUSR1);
	cont_to(_metadata, self->pid, SIGUSR1, sig_e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
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
	int status;

	self->pid = start_traced(_metadata, bts_self, self_s, 32);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	sleep_ms(100);
	kill(self->pid, SIGSTOP);
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(SIGSTOP, WSTOPSIG(status));

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

/* Expected records [@first, @first + @n) of bts_many(@total). */
static void check_many(struct __test_metadata *_metadata,
		       const struct bts_struct *rec, long n, long first,
		       long total)
{
	struct branch exp[64];
	long i;

	ASSERT_LE(n, 64);
	for (i = 0; i < n; i++)
		exp[i] = first + i == total - 1 ? many_exit : many_loop;
	check_records(_metadata, rec, n, exp, n);
}

static pid_t start_many(struct __test_metadata *_metadata, unsigned long n,
			unsigned int records, unsigned int flags)
{
	pid_t pid = spawn(_metadata, (void (*)(unsigned long))bts_many, n, 0);

	cont_to(_metadata, pid, 0, many_s);
	ASSERT_EQ(0, bts_config(pid, records * BTS_REC, BTS_TRACE_ALLOC | flags,
				flags & PTRACE_BTS_O_SIGNAL ? BTS_OVERFLOW_SIG : 0));
	return pid;
}

/*
 * O_SIGNAL: each time the buffer fills, the tracee gets the signal, and
 * draining at that stop loses nothing.
 */
TEST_F(bts, overflow_signal_drain)
{
	struct bts_struct rec[4];
	long n, got = 0;
	int round;

	self->pid = start_many(_metadata, 10, 4, PTRACE_BTS_O_SIGNAL);
	for (round = 0; round < 2; round++) {
		cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
		ASSERT_EQ(4, bts_size(self->pid));
		n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
		check_many(_metadata, rec, n, got, 10);
		got += n;
	}
	/* the signal is the tracer's to suppress */
	cont_to(_metadata, self->pid, 0, many_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(2, n);
	check_many(_metadata, rec, n, got, 10);
}

/* Until drained, a full O_SIGNAL buffer keeps the oldest records. */
TEST_F(bts, overflow_signal_pauses)
{
	struct bts_struct rec[4];
	long n;

	self->pid = start_many(_metadata, 10, 4, PTRACE_BTS_O_SIGNAL);
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	/* no second signal while paused */
	cont_to(_metadata, self->pid, 0, many_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(4, n);
	check_many(_metadata, rec, n, 0, 10);
}

/* CLEAR at the overflow stop resumes tracing too. */
TEST_F(bts, overflow_signal_clear)
{
	struct bts_struct rec[4];
	long n;

	self->pid = start_many(_metadata, 10, 4, PTRACE_BTS_O_SIGNAL);
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	cont_to(_metadata, self->pid, 0, many_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(2, n);
	check_many(_metadata, rec, n, 8, 10);
}

/* Without O_SIGNAL a full buffer wraps silently, no signal. */
TEST_F(bts, overflow_wraps_without_signal)
{
	struct bts_struct rec[4];
	long n;

	self->pid = start_many(_metadata, 10, 4, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(4, n);
	check_many(_metadata, rec, n, 6, 10);
}

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * O_SCHED: departures and arrivals are recorded with the tracee's tid and
 * CLOCK_MONOTONIC nanoseconds; the branches between them stay exact.
 */
TEST_F(bts, sched_timestamps)
{
	static const struct branch exp[] = {
		{ sleep_f0, sleep_t0 }, { sleep_f1, sleep_t1 },
	};
	struct bts_struct rec[64], br[64];
	__u64 t0, t1, last = 0, departed = 0, slept = 0;
	long n, i, nbr = 0, arrives = 0, departs = 0;
	__u64 prev_q = BTS_INVALID;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_sleep, 0);
	cont_to(_metadata, self->pid, 0, sleep_s);
	/* before CONFIG: the tracee may still be on its way off the CPU */
	t0 = now_ns();
	ASSERT_EQ(0, bts_config(self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC |
				PTRACE_BTS_O_SCHED, 0));
	cont_to(_metadata, self->pid, 0, sleep_e);
	t1 = now_ns();
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_LT(0, n);
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
		EXPECT_EQ(self->pid, rec[i].variant.event.pid);
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
		} else {
			arrives++;
			if (departed && last - departed > slept)
				slept = last - departed;
		}
	}
	EXPECT_LE(1, departs);
	EXPECT_LE(1, arrives);
	/*
	 * The 2 ms nanosleep is away from the CPU, in nanoseconds. Its
	 * timer starts before the task departs, so the gap may be a little
	 * shorter than 2 ms; half of it tells nanoseconds from microseconds
	 * and a missing sleep alike.
	 */
	EXPECT_LE(1000000, slept);
	EXPECT_GE(t1 - t0, slept);
	check_records(_metadata, br, nbr, exp, ARRAY_SIZE(exp));
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
	ASSERT_EQ(0, bts_config(self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
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
	ASSERT_EQ(0, bts_config(self->pid, 256 * BTS_REC, BTS_TRACE_ALLOC, 0));
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
 * PTRACE_SINGLEBLOCK stops at branch targets (on every instruction where
 * DEBUGCTL.BTF is not honoured, as under TCG); never elsewhere.
 */
TEST_F(bts, with_singleblock)
{
	static const char *const ips[] = { step_f0, step_t0, step_f1, step_t1 };
	unsigned long ip = 0;
	int stops = 0, i, status;

	self->pid = start_traced(_metadata, bts_step, step_s, 64);
	while (ip != (unsigned long)step_t1) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_SINGLEBLOCK, self->pid, NULL, 0));
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ip = get_ip(_metadata, self->pid);
		for (i = 0; i < ARRAY_SIZE(ips); i++)
			if (ip == (unsigned long)ips[i])
				break;
		ASSERT_LT(i, ARRAY_SIZE(ips)) {
			TH_LOG("stop at %#lx", ip);
		}
		ASSERT_LT(++stops, 5);
	}
	cont_to(_metadata, self->pid, 0, step_e);
	check_trace(_metadata, self->pid, step_trace, ARRAY_SIZE(step_trace));
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
	ASSERT_EQ(0, bts_config(self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_LT(0, vmlck_kb(0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_DETACH, self->pid, NULL, 0));
	EXPECT_EQ(0, vmlck_settled_kb());
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
 * A tracer process attaches to the spinning @target, traces it, tells us
 * through @fd and then exits or waits to be killed.
 */
static void other_tracer(pid_t target, int fd, bool wait_for_kill)
{
	int status;

	if (sys_ptrace(PTRACE_ATTACH, target, NULL, 0) ||
	    waitpid(target, &status, __WALL) != target ||
	    bts_config(target, 64 << 10, BTS_TRACE_ALLOC, 0) ||
	    vmlck_kb(0) <= 0 ||
	    sys_ptrace(PTRACE_CONT, target, NULL, 0))
		_exit(1);
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
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, *tracee, &cfg,
					  sizeof(cfg)));
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
	ASSERT_EQ(0, bts_config(self->pid, 1024 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXIT << 8), status >> 8);
	/* the branches of the way out through libc */
	EXPECT_LT(ARRAY_SIZE(jmp_trace), bts_size(self->pid));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status));
	self->pid = 0;
	EXPECT_EQ(0, vmlck_settled_kb());
}

static void exec_routine(unsigned long unused)
{
	bts_jmp();
	execl("/bin/true", "true", NULL);
	execl("/bin/busybox", "true", NULL);
	_exit(5);
}

/*
 * exec with tracing on: at the exec stop tracing is either off (and
 * refunded) or still configured as before, never half of it; the new
 * program runs and exits normally.
 */
TEST_F(bts, tracee_execs)
{
	struct ptrace_bts_config cfg;
	struct bts_struct rec;
	long n, i;
	int status;

	self->pid = spawn(_metadata, exec_routine, 0, PTRACE_O_TRACEEXEC);
	cont_to(_metadata, self->pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXEC << 8), status >> 8);
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
					  sizeof(cfg)));
	if (cfg.size) {
		EXPECT_EQ(64 * BTS_REC, cfg.size);
		EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags & ~PTRACE_BTS_O_ALLOC);
		EXPECT_LT(0, vmlck_kb(0));
	} else {
		EXPECT_EQ(0, cfg.flags);
		EXPECT_EQ(0, vmlck_settled_kb());
	}
	n = bts_size(self->pid);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, i));
		EXPECT_TRUE(user_address(rec.variant.lbr.from));
		EXPECT_TRUE(user_address(rec.variant.lbr.to));
	}
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	self->pid = 0;
}

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

/* An untraced child of a traced task does not inherit the trap flag. */
static void fork_untraced(struct __test_metadata *_metadata, pid_t *pid,
			  unsigned long use_vfork)
{
	int status;

	*pid = spawn(_metadata, fork_routine, use_vfork, 0);
	cont_to(_metadata, *pid, 0, jmp_s);
	ASSERT_EQ(0, bts_config(*pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, jmp_e);
	/* The child's exit stops the tracee with SIGCHLD; pass it on. */
	status = 0;
	do {
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL,
					WIFSTOPPED(status) ? WSTOPSIG(status) : 0));
		ASSERT_EQ(*pid, waitpid(*pid, &status, __WALL));
		ASSERT_FALSE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
			TH_LOG("a SIGTRAP stop at %#lx",
			       get_ip(_metadata, *pid));
		}
	} while (WIFSTOPPED(status));
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
	ASSERT_EQ(0, bts_config(*pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
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

	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, child, &cfg,
					  sizeof(cfg)));
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, bts_size(child));
	ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, *pid, &cfg,
					  sizeof(cfg)));
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

/* Wait for any stop of the tracee's threads; returns the tid. */
static pid_t wait_any(struct __test_metadata *_metadata, int *status)
{
	pid_t tid = waitpid(-1, status, __WALL);

	ASSERT_LT(0, tid);
	return tid;
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
			ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS,
							  tid, &cfg, sizeof(cfg)));
			EXPECT_EQ(0, cfg.size);
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
			continue;
		}
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ip = get_ip(_metadata, t);
		if (ip == (unsigned long)(leader ? jmp_s : call_s)) {
			ASSERT_EQ(0, bts_config(t, (leader ? 8 : 16) * BTS_REC,
						BTS_TRACE_ALLOC, 0));
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, t, NULL, 0));
			continue;
		}
		ASSERT_EQ((unsigned long)(leader ? jmp_e : call_e), ip) {
			TH_LOG("tid %d (leader %d)", t, self->pid);
		}
		ASSERT_EQ(sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, t, &cfg,
						  sizeof(cfg)));
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
	ASSERT_EQ(0, bts_config(self->pid, 4096 * BTS_REC, BTS_TRACE_ALLOC, 0));
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

TEST_F_TIMEOUT(bts, sigkill_during_drain, 240)
{
	static const unsigned int delays[] = { 0, 200, 2000 };
	static struct bts_struct rec[DRAIN_RACE_RECORDS];
	const unsigned long n = DRAIN_RACE_RECORDS;
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
		ASSERT_EQ(0, pthread_create(&thread, NULL, kill_later, &k));
		got = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, n * BTS_REC);
		if (got < 0) {
			EXPECT_EQ(ESRCH, errno);
		} else {
			EXPECT_EQ(n, got);
			EXPECT_EQ((unsigned long)many_f0, rec[0].variant.lbr.from);
			EXPECT_EQ((unsigned long)many_f1,
				  rec[n - 1].variant.lbr.from);
		}
		pthread_join(thread, NULL);
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		EXPECT_TRUE(WIFSIGNALED(status));
		self->pid = 0;
		EXPECT_EQ(0, vmlck_settled_kb());
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
	EXPECT_EQ(0, vmlck_settled_kb());
}

TEST_HARNESS_MAIN
