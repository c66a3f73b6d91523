// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, a full buffer (wrap-around, the signal on
 * overflow) and the scheduling records.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

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
 * would not sleep at all), as a 2 ms one did in a busy virtual machine.
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
		 * time off the CPU would not hold in a slow virtual machine,
		 * where the way from the timer's start to the switch can take
		 * milliseconds.
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

TEST_HARNESS_MAIN
