// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, a full buffer with PTRACE_BTS_O_STOP: the
 * tracee stops in a PTRACE_EVENT_BTS event stop, which the program never
 * sees; and what PTRACE_BTS_O_SIGNAL now refuses and says in its siginfo.
 *
 * The program's own view is the oracle: a tracee with a handler for every
 * signal runs the same loop with and without branch tracing, under the same
 * tracer, and must catch the same signals (none) and exit the same way.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* As ptrace_bts_buffer.c: far more branches than the hardware's skid. */
#define STOP_BRANCHES		400
#define STOP_RECORDS		4
#define BTS_STOP_STATUS		(SIGTRAP | (PTRACE_EVENT_BTS << 8))

/* Resume @pid; true at an event stop for a full buffer, false at many_e. */
static bool next_bts_stop(struct __test_metadata *_metadata, pid_t pid,
			  int sig)
{
	struct ptrace_bts_config cfg;
	unsigned long msg = 1;
	int status;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, sig));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("status %#x", status);
	}
	if (status >> 8 == SIGTRAP &&
	    get_ip(_metadata, pid) == (unsigned long)many_e)
		return false;
	ASSERT_EQ(BTS_STOP_STATUS, status >> 8) {
		TH_LOG("stop %#x at %#lx", status >> 8, get_ip(_metadata, pid));
	}
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETEVENTMSG, pid, NULL,
				(unsigned long)&msg));
	/* The position, as STATUS has it: nothing is recorded while paused. */
	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)));
	EXPECT_EQ((unsigned long)cfg.next, msg);
	EXPECT_LT(0, msg);
	return true;
}

/*
 * Records of bts_many(STOP_BRANCHES) from an unknown point: loop branches,
 * the last one perhaps the exit branch.
 */
static void check_loop_records(struct __test_metadata *_metadata,
			       const struct bts_struct *rec, long n)
{
	long i;

	for (i = 0; i < n; i++) {
		bool exit = i == n - 1 &&
			    rec[i].variant.lbr.from == (unsigned long)many_f1;

		check_many(_metadata, rec + i, 1,
			   exit ? STOP_BRANCHES - 1 : 0, 1, STOP_BRANCHES);
	}
}

static void get_config(struct __test_metadata *_metadata, pid_t pid,
		       struct ptrace_bts_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, pid, cfg, sizeof(*cfg)));
}

/*
 * Every full buffer stops the tracee, paused, with the buffer's records,
 * which the next DRAIN resumes. The tracee stops before it runs on, so
 * the numbers go on without a gap unless records were dropped at the full
 * buffer: never on the emulated backend, which records in the trap after
 * each branch; on the hardware, the branches of the threshold interrupt's
 * skid, which lost counts.
 */
TEST_F(bts, stop_drain)
{
	struct bts_struct rec[STOP_RECORDS];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	long n, got = 0, stops = 0, backend;
	__u64 want = 0, lost = 0;
	bool dropped = false;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP);
	backend = bts_backend(self->pid);
	/* A signal given at an event stop is ignored: the program has none. */
	while (next_bts_stop(_metadata, self->pid, stops ? SIGUSR1 : 0)) {
		get_config(_metadata, self->pid, &cfg);
		EXPECT_EQ(PTRACE_BTS_S_PAUSED, cfg.state);
		EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_STOP, cfg.flags);
		memset(&rd, 0, sizeof(rd));
		rd.seq = want;
		rd.buf = (unsigned long)rec;
		rd.size = sizeof(rec);
		ASSERT_EQ(STOP_RECORDS, sys_ptrace(PTRACE_BTS_READ, self->pid,
						   &rd, sizeof(rd)));
		/*
		 * A number is skipped only where the last pause dropped
		 * records, which lost counted at the stop before.
		 */
		EXPECT_TRUE(rd.first == want || (dropped && rd.first == want + 1)) {
			TH_LOG("stop %ld: first %llu, want %llu, lost %llu",
			       stops, (unsigned long long)rd.first,
			       (unsigned long long)want,
			       (unsigned long long)rd.lost);
		}
		if (backend == PTRACE_BTS_BACKEND_EMULATED)
			EXPECT_EQ(0, rd.lost);
		dropped = rd.lost > lost;
		lost = rd.lost;
		n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
		ASSERT_EQ(STOP_RECORDS, n);
		if (backend == PTRACE_BTS_BACKEND_EMULATED)
			check_many(_metadata, rec, n, got, STOP_RECORDS,
				   STOP_BRANCHES);
		else
			check_loop_records(_metadata, rec, n);
		got += n;
		stops++;
		want = rd.next;
	}
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_LE(0, n);
	got += n;
	if (backend == PTRACE_BTS_BACKEND_EMULATED) {
		/* The exit branch fills the last buffer: no record after it. */
		EXPECT_EQ(STOP_BRANCHES / STOP_RECORDS, stops);
		EXPECT_EQ(STOP_BRANCHES, got);
	} else {
		EXPECT_LE(2, stops);
		EXPECT_LE(stops * STOP_RECORDS, got);
		EXPECT_GE(STOP_BRANCHES, got);
	}
}

/* Until a DRAIN or CLEAR, a paused buffer stops the tracee no more. */
TEST_F(bts, stop_once_until_drained)
{
	struct bts_struct rec[STOP_RECORDS];
	long n;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP);
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_FALSE(next_bts_stop(_metadata, self->pid, 0));
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	check_many(_metadata, rec, n, 0, STOP_RECORDS, STOP_BRANCHES);
}

/*
 * Resumed from the event stop without a DRAIN, the tracee runs with the
 * recording paused: that is a gap, marked and numbered at the next DRAIN.
 */
TEST_F(bts, stop_resumed_undrained)
{
	struct bts_struct rec[STOP_RECORDS];
	struct ptrace_bts_config cfg;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP | PTRACE_BTS_O_GAPS);
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_FALSE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_EQ(STOP_RECORDS, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
					   sizeof(rec)));
	/* The mark, numbered after a skipped number. */
	EXPECT_EQ(1, bts_size(self->pid));
	get_config(_metadata, self->pid, &cfg);
	EXPECT_EQ(STOP_RECORDS + 2, cfg.next);
	ASSERT_EQ(1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				sizeof(rec)));
	EXPECT_EQ(BTS_GAP, rec[0].qualifier);
	EXPECT_EQ(PTRACE_BTS_GAP_PAUSED, rec[0].variant.gap.reason);
}

/* CLEAR at the event stop resumes tracing too. */
TEST_F(bts, stop_clear)
{
	long stops = 0;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP);
	while (next_bts_stop(_metadata, self->pid, 0)) {
		ASSERT_EQ(STOP_RECORDS, bts_size(self->pid));
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
		stops++;
	}
	EXPECT_LE(2, stops);
	if (bts_backend(self->pid) == PTRACE_BTS_BACKEND_EMULATED)
		EXPECT_EQ(STOP_BRANCHES / STOP_RECORDS, stops);
}

/*
 * A buffer that pauses must hold a branch besides what a resume puts in it
 * first, or the tracee would stop for ever without running.
 */
TEST_F(bts, stop_needs_room)
{
	static const struct {
		unsigned int flags;
		unsigned int records;
		bool ok;
	} cases[] = {
		{ PTRACE_BTS_O_STOP, 1, true },
		{ PTRACE_BTS_O_STOP | PTRACE_BTS_O_GAPS, 1, false },
		{ PTRACE_BTS_O_STOP | PTRACE_BTS_O_GAPS, 2, true },
		{ PTRACE_BTS_O_STOP | PTRACE_BTS_O_SCHED, 1, false },
		{ PTRACE_BTS_O_STOP | PTRACE_BTS_O_SCHED | PTRACE_BTS_O_GAPS,
		  2, false },
		{ PTRACE_BTS_O_STOP | PTRACE_BTS_O_SCHED | PTRACE_BTS_O_GAPS,
		  3, true },
		{ PTRACE_BTS_O_GAPS | PTRACE_BTS_O_SCHED, 1, true },
	};
	unsigned int i;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		long ret = bts_config_backend(self->pid,
					      cases[i].records * BTS_REC,
					      BTS_TRACE_ALLOC | cases[i].flags,
					      0, PTRACE_BTS_BACKEND_ANY);

		long want = cases[i].ok ? 0 : -1;

		EXPECT_EQ(want, ret) {
			TH_LOG("flags %#x, %u records", cases[i].flags,
			       cases[i].records);
		}
		if (!cases[i].ok)
			EXPECT_EQ(EINVAL, errno);
	}
	/* A flags-only CONFIG is held to it too. */
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE |
				 PTRACE_BTS_O_STOP | PTRACE_BTS_O_GAPS, 0));
	EXPECT_EQ(EINVAL, errno);
}

/* ---- The program's view ---- */

/* Lock-free atomics: what a signal handler may write. */
static atomic_int caught;
static atomic_int caught_sig;

static void count_signal(int sig, siginfo_t *si, void *uc)
{
	caught++;
	caught_sig = sig;
}

/*
 * A handler for every signal a program can catch, then the loop; the exit
 * status is the number of signals caught, or 100 + the signal if that was
 * not one.
 */
static void watch_routine(unsigned long n)
{
	int sig;

	for (sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			install_asm_handler(sig, count_signal);
	bts_many(n);
	_exit(caught == 1 ? 100 + caught_sig : caught);
}

/* Spawn watch_routine, stopped at many_s, traced with @flags or not. */
static pid_t start_watch(struct __test_metadata *_metadata,
			 unsigned int flags)
{
	pid_t pid = spawn(_metadata, watch_routine, STOP_BRANCHES, 0);

	cont_to(_metadata, pid, 0, many_s);
	if (flags)
		ASSERT_EQ(0, bts_config(_metadata, pid,
					STOP_RECORDS * BTS_REC,
					BTS_TRACE_ALLOC | flags, 0));
	return pid;
}

/*
 * The tracee's exit status after many_e, through the event stops of its
 * way out (libc's branches fill the buffer too).
 */
static int finish_watch(struct __test_metadata *_metadata, pid_t pid)
{
	int status;

	for (;;) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
		ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
		if (!WIFSTOPPED(status) || status >> 8 != BTS_STOP_STATUS)
			break;
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, pid, NULL, 0));
	}
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	return WEXITSTATUS(status);
}

/*
 * Many event stops, each resumed with a signal the tracer means to
 * inject: the program catches what it catches without branch tracing.
 */
TEST_F(bts, stop_unseen_by_program)
{
	long stops = 0;
	int untraced;

	self->pid = start_watch(_metadata, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	untraced = finish_watch(_metadata, self->pid);
	EXPECT_EQ(0, untraced);

	self->pid = start_watch(_metadata, PTRACE_BTS_O_STOP);
	while (next_bts_stop(_metadata, self->pid, stops ? SIGUSR2 : 0)) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
		stops++;
	}
	EXPECT_LE(2, stops);
	EXPECT_EQ(untraced, finish_watch(_metadata, self->pid));
	self->pid = 0;
}

/*
 * A detach at the event stop, the buffer still full: the program runs on
 * untraced and never hears of it.
 */
TEST_F(bts, stop_then_detach)
{
	int status;

	self->pid = start_watch(_metadata, PTRACE_BTS_O_STOP);
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_DETACH, self->pid, NULL, 0));
	/* Untraced now: the breakpoint at many_e is the program's SIGTRAP. */
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	EXPECT_EQ(100 + SIGTRAP, WEXITSTATUS(status));
	self->pid = 0;
}

/* The pause and the stop end with the flag; the records stay. */
TEST_F(bts, stop_flag_dropped)
{
	struct ptrace_bts_config cfg;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP);
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE,
				0));
	get_config(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_EQ(0, cfg.state);
	EXPECT_EQ(STOP_RECORDS, bts_size(self->pid));
	/* Wrapping now, to the end of the loop without another stop. */
	ASSERT_FALSE(next_bts_stop(_metadata, self->pid, 0));
	EXPECT_EQ(STOP_RECORDS, bts_size(self->pid));
}

/*
 * The way a paused trace is announced changes while it is paused: from
 * O_STOP to O_SIGNAL at the event stop, the signal follows; from O_SIGNAL
 * to O_STOP at the signal's stop, the event stop follows. No DRAIN comes
 * in between, and nothing else would announce the pause.
 */
TEST_F(bts, overflow_switched_while_paused)
{
	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_STOP);
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE |
				PTRACE_BTS_O_SIGNAL, BTS_OVERFLOW_SIG));
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	EXPECT_EQ(STOP_RECORDS, bts_size(self->pid));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE |
				PTRACE_BTS_O_STOP, 0));
	/* The signal is the tracer's: not delivered. */
	ASSERT_TRUE(next_bts_stop(_metadata, self->pid, 0));
	EXPECT_EQ(STOP_RECORDS, bts_size(self->pid));
}

#define NESTED_SYSCALLS		300

/* System calls with 0 to 3 loop branches between them. */
static void getppid_loop(unsigned long n)
{
	unsigned long i, j;

	for (i = 0; i < n; i++) {
		syscall(SYS_getppid);
		for (j = 0; j < i % 4; j++)
			asm volatile("" ::: "memory");
	}
}

/* At a syscall stop of @pid: true at the entry, false at the exit. */
static bool at_syscall_entry(struct __test_metadata *_metadata, pid_t pid)
{
	struct ptrace_syscall_info info;

	memset(&info, 0, sizeof(info));
	ASSERT_LT(0, sys_ptrace(PTRACE_GET_SYSCALL_INFO, pid,
				(void *)sizeof(info), (unsigned long)&info));
	ASSERT_NE(PTRACE_SYSCALL_INFO_NONE, info.op);
	return info.op == PTRACE_SYSCALL_INFO_ENTRY;
}

/*
 * The event stop never comes in the middle of a system call, before the
 * syscall-exit stop the tracee is committed to. The tracee makes system
 * calls under PTRACE_SYSCALL; with PTRACE_BTS_O_SCHED the departure
 * record of a syscall-entry stop fills the 3-record buffer now and then,
 * as the varying branches between the calls move where it fills. Every
 * other event stop is answered with PTRACE_CONT: no syscall stop may come
 * after it. Each event stop is drained, so that the next one comes.
 */
TEST_F(bts, stop_not_inside_syscall_stop)
{
	int status, bts_stops = 0, cont_stops = 0, syscall_stops = 0;
	bool resumed_cont = false, in_syscall = false;
	struct bts_struct rec[3];

	self->pid = spawn(_metadata, getppid_loop, NESTED_SYSCALLS,
			  PTRACE_O_TRACESYSGOOD);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 3 * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_STOP |
				PTRACE_BTS_O_SCHED, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_SYSCALL, self->pid, NULL, 0));
	for (;;) {
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		if (WIFEXITED(status))
			break;
		ASSERT_TRUE(WIFSTOPPED(status)) {
			TH_LOG("status %#x", status);
		}
		if (status >> 8 == BTS_STOP_STATUS) {
			ASSERT_FALSE(in_syscall) {
				TH_LOG("an event stop inside a system call");
			}
			bts_stops++;
			ASSERT_LE(0, sys_ptrace(PTRACE_BTS_DRAIN, self->pid,
						rec, sizeof(rec)));
			resumed_cont = bts_stops % 2;
			cont_stops += resumed_cont;
			ASSERT_EQ(0, sys_ptrace(resumed_cont ? PTRACE_CONT :
						PTRACE_SYSCALL, self->pid,
						NULL, 0));
			continue;
		}
		ASSERT_EQ(SIGTRAP | 0x80, WSTOPSIG(status)) {
			TH_LOG("status %#x", status);
		}
		ASSERT_FALSE(resumed_cont) {
			TH_LOG("a syscall stop after PTRACE_CONT at an event stop");
		}
		in_syscall = at_syscall_entry(_metadata, self->pid);
		syscall_stops++;
		ASSERT_EQ(0, sys_ptrace(PTRACE_SYSCALL, self->pid, NULL, 0));
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_LT(0, cont_stops);
	EXPECT_LT(0, syscall_stops);
	self->pid = 0;
}

/* ---- PTRACE_BTS_O_SIGNAL ---- */

/* SIGKILL and SIGSTOP, and a signal with O_STOP, change nothing. */
TEST_F(bts, signal_refused)
{
	static const struct {
		unsigned int flags;
		unsigned int sig;
	} bad[] = {
		{ PTRACE_BTS_O_SIGNAL, SIGKILL },
		{ PTRACE_BTS_O_SIGNAL, SIGSTOP },
		{ PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_STOP, BTS_OVERFLOW_SIG },
		{ PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_STOP, 0 },
	};
	struct ptrace_bts_config cfg;
	unsigned int i;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-1, bts_config_backend(self->pid, 8 * BTS_REC,
						 BTS_TRACE_ALLOC | bad[i].flags,
						 bad[i].sig,
						 PTRACE_BTS_BACKEND_ANY));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("flags %#x signal %u", bad[i].flags, bad[i].sig);
		}
		EXPECT_EQ(-1, bts_config_backend(self->pid, 0,
						 PTRACE_BTS_O_TRACE | bad[i].flags,
						 bad[i].sig,
						 PTRACE_BTS_BACKEND_ANY));
		EXPECT_EQ(EINVAL, errno);
	}
	get_config(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_EQ(8 * BTS_REC, cfg.size);
	cont_to(_metadata, self->pid, 0, jmp_e);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* The overflow signal says where it comes from. */
TEST_F(bts, signal_siginfo)
{
	siginfo_t si;

	self->pid = start_many(_metadata, STOP_BRANCHES, STOP_RECORDS,
			       PTRACE_BTS_O_SIGNAL);
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	memset(&si, 0, sizeof(si));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETSIGINFO, self->pid, NULL,
				(unsigned long)&si));
	EXPECT_EQ(BTS_OVERFLOW_SIG, si.si_signo);
	EXPECT_EQ(SI_KERNEL, si.si_code);
	EXPECT_EQ(ENOBUFS, si.si_errno);
}

TEST_HARNESS_MAIN
