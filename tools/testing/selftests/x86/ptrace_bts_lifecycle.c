// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, the life of tracer and tracee: detach,
 * exit, exec, fork, threads and kills.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

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
 * an unprivileged tracer cannot start another trace. The old image's
 * records stay readable at the exit stop and once the thread exited.
 */
TEST_F(bts, tracee_execs_private)
{
	struct ptrace_bts_config cfg;
	siginfo_t si;
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

	/* At the exit stop and after the exit, the old image's, as before. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, self->pid, NULL,
				PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXIT << 8), status >> 8);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_S_STOPPED_EXEC, cfg.state);
	EXPECT_EQ(at_exec, bts_size(self->pid));
	check_oldest(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(0, waitid(P_PID, self->pid, &si, WEXITED | WNOWAIT | __WALL));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_S_STOPPED_EXEC | PTRACE_BTS_S_EXITED, cfg.state);
	/* GET needs a stop: SIZE, which obeys the same rule, says enough */
	EXPECT_EQ(at_exec, bts_size(self->pid));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
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
	static const char name[] = "ptrace_bts_lifecycle_32";
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
		SKIP(return, "no ptrace_bts_lifecycle_32 next to this test");
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
