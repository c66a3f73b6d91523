// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_errno: the dumpable rule at every read. A tracee that stops
 * being dumpable in the middle of its trace, and the tracer, in a process
 * of its own, that reads at each of its stops.
 */
#define _GNU_SOURCE
#include "ptrace_bts_errno.h"

/* ---- the dumpable rule at every read ---- */

static unsigned int dumpable_sink;

/* Branches to record: a counted loop the compiler keeps. */
static void dumpable_loop(void)
{
	unsigned int i, sum = 0;

	for (i = 0; i < 32; i++) {
		sum += i;
		asm volatile("" : "+r" (sum));
	}
	dumpable_sink = sum;
}

/*
 * The tracee: branches, then not dumpable (more branches) and a stop, then
 * dumpable again and a stop.
 */
static void dumpable_body(void)
{
	dumpable_loop();
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		_exit(3);
	dumpable_loop();
	raise(SIGSTOP);
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		_exit(4);
	raise(SIGSTOP);
}

/*
 * The same with a change of credentials: the effective uid becomes the
 * saved one, which leaves the image not dumpable, and comes back.
 */
static void setuid_body(void)
{
	dumpable_loop();
	if (setresuid(-1, POLICY_UID2, -1))
		_exit(3);
	dumpable_loop();
	raise(SIGSTOP);
	if (setresuid(-1, POLICY_UID, -1) ||
	    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		_exit(4);
	raise(SIGSTOP);
}

#define TRACER_CHECK(cond, step, fmt, ...) do {			\
	int __step = (step);						\
									\
	if (!(cond)) {							\
		ksft_print_msg("tracer step %d: " fmt "\n", __step,	\
			       ##__VA_ARGS__);				\
		_exit(__step);						\
	}								\
} while (0)

static void tracee_resume_to_stop(pid_t pid, int step)
{
	int status;

	TRACER_CHECK(!sys_ptrace(PTRACE_CONT, pid, NULL, 0), step,
		     "PTRACE_CONT: %s", strerror(errno));
	TRACER_CHECK(waitpid(pid, &status, 0) == pid && WIFSTOPPED(status) &&
		     WSTOPSIG(status) == SIGSTOP, step,
		     "the tracee did not stop (status %#x)", status);
}

/*
 * Every request that shows records, or their number, fails with @err;
 * PTRACE_PEEKDATA, whose rule they follow, fails too (EIO).
 */
static void reads_fail(pid_t pid, int err, int step)
{
	struct bts_struct buf[DUMPABLE_RECORDS];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	unsigned long word;

	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0) == -1 &&
		     errno == err, step, "SIZE: %s", strerror(errno));
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_GET, pid, buf, 0) == -1 &&
		     errno == err, step + 1, "GET: %s", strerror(errno));
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, sizeof(buf)) == -1 &&
		     errno == err, step + 2, "DRAIN: %s", strerror(errno));
	memset(&rd, 0, sizeof(rd));
	rd.buf = (unsigned long)buf;
	rd.size = sizeof(buf);
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_READ, pid, &rd, sizeof(rd)) == -1 &&
		     errno == err, step + 2, "READ: %s", strerror(errno));
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) > 0 &&
		     (cfg.state & PTRACE_BTS_S_UNREADABLE) && !cfg.next,
		     step + 2, "STATUS: state %#x, next %llu", cfg.state,
		     (unsigned long long)cfg.next);
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_PEEKDATA, pid, &dumpable_sink,
				(unsigned long)&word) == -1 && errno == EIO,
		     step + 3, "the control, PEEKDATA: %s", strerror(errno));
}

/*
 * The records are there: SIZE at least @least, GET and DRAIN of all; and
 * PTRACE_PEEKDATA reads too.
 */
static void reads_work(pid_t pid, long least, int step)
{
	struct bts_struct buf[DUMPABLE_RECORDS];
	unsigned long word;
	long size, n;

	size = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	TRACER_CHECK(size >= least, step, "SIZE %ld: %s", size,
		     strerror(errno));
	TRACER_CHECK(!sys_ptrace(PTRACE_BTS_GET, pid, buf, 0), step + 1,
		     "GET: %s", strerror(errno));
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, sizeof(buf));
	TRACER_CHECK(n == size, step + 2, "DRAIN %ld of %ld: %s", n, size,
		     strerror(errno));
	/* The raw call stores the word at its data argument. */
	TRACER_CHECK(!sys_ptrace(PTRACE_PEEKDATA, pid, &dumpable_sink,
				 (unsigned long)&word), step + 3,
		     "the control, PEEKDATA: %s", strerror(errno));
}

/*
 * A tracee of POLICY_UID that root attaches to (PTRACE_ATTACH records the
 * tracer's credentials), stopped in the attach's stop; @body runs once it
 * is continued.
 */
static pid_t attached_tracee(void (*body)(void))
{
	int status, go[2];
	pid_t pid;
	char c;

	if (pipe(go))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(go[1]);
		if (setgroups(0, NULL) ||
		    setresgid(POLICY_UID, POLICY_UID, POLICY_UID) ||
		    setresuid(POLICY_UID, POLICY_UID, POLICY_UID) ||
		    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
			_exit(1);
		/* A restarted read: the attach's stop does not end it. */
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		body();
		_exit(0);
	}
	close(go[0]);
	if (sys_ptrace(PTRACE_ATTACH, pid, NULL, 0) ||
	    waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
	    write(go[1], "g", 1) != 1) {
		kill(pid, SIGKILL);
		pid = -1;
	}
	close(go[1]);
	return pid;
}

/* In a tracer of its own: trace, read at each of the tracee's stops. */
void dumpable_tracer(enum dumpable_how how, int backend)
{
	struct ptrace_bts_config cfg = {
		.size	= DUMPABLE_RECORDS * BTS_REC,
		.flags	= BTS_TRACE_ALLOC,
	};
	/* The rule lets the recorded root through, and no one else. */
	bool refused = how != DUMPABLE_ROOT_TRACEE &&
		       how != DUMPABLE_ROOT_ATTACHED;
	pid_t pid = 0;

	switch (how) {
	case DUMPABLE_PRCTL:
		break;
	case DUMPABLE_SETRESUID:
		pid = user_tracee(setuid_body, POLICY_UID2);
		break;
	case DUMPABLE_ROOT_TRACEE:
		pid = user_tracee(dumpable_body, 0);
		break;
	case DUMPABLE_ROOT_TRACER:
		pid = user_tracee(dumpable_body, POLICY_UID);
		break;
	case DUMPABLE_ROOT_ATTACHED:
		pid = attached_tracee(dumpable_body);
		break;
	}
	TRACER_CHECK(pid >= 0, 10, "no tracee");
	/*
	 * CAP_PERFMON: perf's policy gives the hardware where there is one
	 * (a tracee whose ids are not all the tracer's is not its to read
	 * otherwise), and the dumpable rule does not look at it.
	 */
	if (how != DUMPABLE_ROOT_TRACER)
		TRACER_CHECK(!become_user(CAP_PERFMON), 11, "become_user: %s",
			     strerror(errno));
	if (how == DUMPABLE_PRCTL)
		pid = user_tracee(dumpable_body, 0);
	TRACER_CHECK(pid > 0, 12, "no tracee");
	TRACER_CHECK(!sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)), 13,
		     "CONFIG: %s", strerror(errno));
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) > 0 &&
		     cfg.backend == backend, 14, "STATUS: backend %u, want %d",
		     cfg.backend, backend);

	/* Stopped while not dumpable. */
	tracee_resume_to_stop(pid, 15);
	if (refused) {
		reads_fail(pid, EPERM, 16);
		/* STATUS shows the configuration only; it still works. */
		TRACER_CHECK(sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg,
					sizeof(cfg)) > 0, 20,
			     "STATUS: %s", strerror(errno));
		/* Not even to a CONFIG that keeps the buffer. */
		cfg.flags = PTRACE_BTS_O_TRACE;
		cfg.backend = PTRACE_BTS_BACKEND_ANY;
		errno = 0;
		TRACER_CHECK(sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg,
					sizeof(cfg)) == -1 && errno == EPERM,
			     21, "CONFIG: %s", strerror(errno));
	} else {
		reads_work(pid, 32, 16);
	}

	/* Dumpable again: the records are there, those of before too. */
	tracee_resume_to_stop(pid, 22);
	reads_work(pid, refused ? 32 : 1, 23);
	sys_ptrace(PTRACE_CONT, pid, NULL, SIGKILL);
	waitpid(pid, NULL, 0);
	_exit(0);
}
