// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace without a stop: PTRACE_BTS_STATUS,
 * PTRACE_BTS_SIZE and PTRACE_BTS_READ on a running tracee, for debuggers
 * in non-stop mode, and on one that exited, whose trace stays readable
 * until the tracer reaps it or detaches: also the trace of a thread that
 * another thread's exit_group() took without an exit stop.
 *
 * The oracle is the branches the tracee is known to take; every request
 * that changes the trace still needs the stop (ESRCH).
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* Branches enough that the tracee is still in the loop when read. */
#define LONG_LOOP	1000000000UL
#define RUN_RECORDS	64

static long bts_status(pid_t pid, struct ptrace_bts_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	return sys_ptrace(PTRACE_BTS_STATUS, pid, cfg, sizeof(*cfg));
}

/* Wait until @pid recorded @want records, reading STATUS as it runs. */
static __u64 running_next(struct __test_metadata *_metadata, pid_t pid,
			  __u64 want)
{
	struct ptrace_bts_config cfg;
	int ms;

	for (ms = 0; ms < BTS_WAIT_MS; ms += BTS_POLL_MS) {
		ASSERT_EQ(BTS_CONFIG_SIZE_VER2, bts_status(pid, &cfg));
		if (cfg.next >= want)
			return cfg.next;
		sleep_ms(BTS_POLL_MS);
	}
	ASSERT_TRUE(false) {
		TH_LOG("next %llu after %d ms", (unsigned long long)cfg.next,
		       BTS_WAIT_MS);
	}
	return 0;
}

/* A running tracee's state and records, read as it runs. */
TEST_F(bts, read_running)
{
	struct bts_struct rec[RUN_RECORDS];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	__u64 next, later;
	long n, i;

	self->pid = start_many(_metadata, LONG_LOOP, RUN_RECORDS, 0);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	next = running_next(_metadata, self->pid, 2 * RUN_RECORDS);
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2, bts_status(self->pid, &cfg));
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_EQ(0, cfg.state);
	EXPECT_LE(0, sys_ptrace(PTRACE_BTS_SIZE, self->pid, NULL, 0));

	/* The newest it held at the read: after those STATUS counted. */
	n = bts_read(self->pid, 0, rec, RUN_RECORDS, &rd);
	ASSERT_LT(0, n);
	EXPECT_LE(next - RUN_RECORDS, rd.first);
	EXPECT_LE(next, rd.next);
	EXPECT_EQ(rd.first + n, rd.next);
	/* Deep in the loop: every record is its branch back. */
	for (i = 0; i < n; i++)
		check_many(_metadata, rec + i, 1, 0, 1, LONG_LOOP);
	later = running_next(_metadata, self->pid, rd.next + 1);
	EXPECT_LT(rd.next, later);

	/* Changing the trace still needs the stop. */
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				 sizeof(rec)));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0, 0, 0));
	EXPECT_EQ(ESRCH, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, rec, 0));
	EXPECT_EQ(ESRCH, errno);
}

/* Not the tracer: no reading, stopped or not. */
TEST_F(bts, read_running_not_tracer)
{
	struct ptrace_bts_config cfg;
	int status;
	pid_t other;

	self->pid = start_many(_metadata, LONG_LOOP, RUN_RECORDS, 0);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	other = fork();
	ASSERT_LE(0, other);
	if (other == 0)
		_exit(bts_status(self->pid, &cfg) == -1 && errno == ESRCH ?
		      0 : 1);
	ASSERT_EQ(other, waitpid(other, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* An exited tracee's trace until the tracer reaps it. */
TEST_F(bts, read_after_exit)
{
	struct bts_struct rec[64];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	siginfo_t si;
	long n;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 64);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	memset(&si, 0, sizeof(si));
	ASSERT_EQ(0, waitid(P_PID, self->pid, &si, WEXITED | WNOWAIT));
	ASSERT_EQ(CLD_EXITED, si.si_code);

	ASSERT_EQ(BTS_CONFIG_SIZE_VER2, bts_status(self->pid, &cfg));
	EXPECT_EQ(PTRACE_BTS_S_EXITED, cfg.state);
	EXPECT_LE(4, cfg.next);
	n = bts_read(self->pid, 0, rec, 64, &rd);
	ASSERT_LE(4, n);
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(PTRACE_BTS_S_EXITED, rd.state);
	/* The routine's branches, then its way out. */
	check_records(_metadata, rec, 4, jmp_trace, 4);
	EXPECT_EQ(n, sys_ptrace(PTRACE_BTS_SIZE, self->pid, NULL, 0));

	/* Reaped: gone, and its charge with it (the fixture checks). */
	ASSERT_EQ(self->pid, waitpid(self->pid, NULL, 0));
	EXPECT_EQ(-1, bts_status(self->pid, &cfg));
	EXPECT_EQ(ESRCH, errno);
	self->pid = 0;
}

static int thread_done;

static void *group_thread(void *arg)
{
	bts_many(3);
	__atomic_store_n(&thread_done, 1, __ATOMIC_RELEASE);
	for (;;)
		pause();
	return NULL;
}

/* The leader ends the group once the thread ran its loop. */
static void group_exit_routine(unsigned long unused)
{
	pthread_t t;

	if (pthread_create(&t, NULL, group_thread, NULL))
		_exit(7);
	while (!__atomic_load_n(&thread_done, __ATOMIC_ACQUIRE))
		sched_yield();
	_exit(0);
}

/*
 * exit_group() takes a thread without an exit stop: its trace is still
 * there for the tracer, until it reaps the thread.
 */
TEST_F(bts, read_after_group_exit)
{
	struct bts_struct rec[64];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	bool clone_seen = false;
	pid_t t, tid = 0;
	siginfo_t si;
	int status;

	self->pid = spawn(_metadata, group_exit_routine, 0,
			  PTRACE_O_TRACECLONE);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	/*
	 * The leader's clone event, the thread's SIGSTOP and its breakpoint
	 * at many_s, in whatever order: the new thread runs before its
	 * creator reports the clone, and a leader left in that stop would
	 * never end the group.
	 */
	while (!clone_seen || !tid) {
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
	ASSERT_EQ(0, bts_config(_metadata, tid, 64 * BTS_REC, BTS_TRACE_ALLOC,
				0));
	cont_to(_metadata, tid, 0, many_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, tid, NULL, 0));

	memset(&si, 0, sizeof(si));
	ASSERT_EQ(0, waitid(P_PID, tid, &si, WEXITED | WNOWAIT | __WALL));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2, bts_status(tid, &cfg));
	EXPECT_EQ(PTRACE_BTS_S_EXITED, cfg.state);
	/* The loop, and then nothing but the thread's pause(). */
	ASSERT_LE(3, bts_read(tid, 0, rec, 64, &rd));
	check_many(_metadata, rec, 3, 0, 3, 3);
}

TEST_HARNESS_MAIN
