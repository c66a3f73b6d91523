// SPDX-License-Identifier: GPL-2.0
/*
 * bench-trace: run a program untraced, under PTRACE_BTS_* or under a
 * PTRACE_SINGLESTEP tracer, and say what it cost.
 *
 * Usage: bench-trace [-m none|bts|step] [-b any|hw|emu] [-s BYTES]
 *                    [-a PREFIX] [-c CPU] [-o OUT] -- PROGRAM [ARG...]
 *
 *   none  fork, exec, wait: the reference.
 *   bts   the program and every thread it creates are traced from exec
 *         on with a buffer of BYTES (64 KiB) on the given backend, with
 *         PTRACE_BTS_O_STOP: at each full buffer and at exit the records
 *         are drained, so every branch is counted, as a lossless recorder
 *         (btrace) counts them.
 *   step  the program is single-stepped from exec on, its registers read
 *         at every step, as a software recorder (gdb's record full) does.
 *
 * With -a, tracing starts where the program first opens a file whose path
 * begins with PREFIX (at that openat()'s entry), as make bench's gdb
 * sessions start recording there: the program's start runs at full speed
 * under PTRACE_SYSCALL up to it. SIGTERM ends a run early: the line is
 * printed for what ran, and the program is killed with the tracer.
 *
 * The program's standard output and error go to OUT (/dev/null). Prints one line:
 * wall_us (fork to reap), cpu_us (this tracer's and the program's CPU
 * time), records (bts), lost (bts: STATUS's lost at the program's exit),
 * steps (step), status (the program's exit status).
 */
#include "bench.h"
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

enum mode { M_NONE, M_BTS, M_STEP };

static enum mode mode;
static unsigned int backend = PTRACE_BTS_BACKEND_ANY;
static unsigned int bts_bytes = 64 << 10;
static struct bts_struct *drain_buf;
static unsigned long records, steps, lost;
static const char *arm_prefix;
static volatile sig_atomic_t stopping;
/* threads created and not yet seen at their first stop */
#define MAX_NEW		64
static pid_t new_tids[MAX_NEW];

static void bts_config(pid_t pid)
{
	struct ptrace_bts_config cfg = {
		/* the buffer's size: the struct's is the request's data */
		.size = bts_bytes,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
			 PTRACE_BTS_O_STOP,
		.backend = backend,
	};

	if (sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))
		die("PTRACE_BTS_CONFIG");
	/* what was configured is what is measured */
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		die("PTRACE_BTS_STATUS");
	if (cfg.size != bts_bytes / sizeof(struct bts_struct) * sizeof(struct bts_struct)) {
		fprintf(stderr, "bench-trace: a buffer of %u bytes, not %u\n",
			cfg.size, bts_bytes);
		exit(2);
	}
}

static void bts_drain(pid_t pid)
{
	long n = sys_ptrace(PTRACE_BTS_DRAIN, pid, drain_buf, bts_bytes);

	if (n < 0)
		die("PTRACE_BTS_DRAIN");
	records += n;
}

static int step_all(pid_t pid)
{
	struct user_regs_struct regs;
	int status;

	while (!stopping) {
		if (sys_ptrace(PTRACE_SINGLESTEP, pid, NULL, 0))
			die("PTRACE_SINGLESTEP");
		if (waitpid(pid, &status, 0) != pid)
			die("waitpid");
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return status;
		if (WIFSTOPPED(status) && WSTOPSIG(status) != SIGTRAP)
			die("a signal while single-stepping");
		if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
			die("PTRACE_GETREGS");
		steps++;
	}
	return 0;
}

/* Does the path at @addr in @pid's memory begin with arm_prefix? */
static bool path_matches(pid_t pid, unsigned long addr)
{
	size_t len = strlen(arm_prefix), i;
	char buf[256];
	long word;

	if (len >= sizeof(buf) - sizeof(long))
		return false;
	for (i = 0; i < len; i += sizeof(long)) {
		/* the system call stores the word at data; glibc's returns it */
		if (sys_ptrace(PTRACE_PEEKDATA, pid, (void *)(addr + i),
			       (unsigned long)&word))
			return false;
		memcpy(buf + i, &word, sizeof(word));
	}
	return !strncmp(buf, arm_prefix, len);
}

/* Run @pid under PTRACE_SYSCALL to the entry of its openat(arm_prefix...). */
static void run_to_arm(pid_t pid)
{
	struct user_regs_struct regs;
	int status;

	for (;;) {
		if (sys_ptrace(PTRACE_SYSCALL, pid, NULL, 0) ||
		    waitpid(pid, &status, 0) != pid)
			die("PTRACE_SYSCALL");
		if (!WIFSTOPPED(status) || WSTOPSIG(status) != (SIGTRAP | 0x80)) {
			fprintf(stderr, "bench-trace: status %#x before %s was opened\n",
				status, arm_prefix);
			exit(2);
		}
		if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
			die("PTRACE_GETREGS");
		/* an entry stop has -ENOSYS in rax (the exec's exit comes first) */
		if (regs.rax == (unsigned long long)-ENOSYS &&
		    regs.orig_rax == SYS_openat && path_matches(pid, regs.rsi))
			return;
	}
}

/* Was @pid announced by a clone event? Then forget it: it is here. */
static bool new_thread(pid_t pid)
{
	int i;

	for (i = 0; i < MAX_NEW; i++) {
		if (new_tids[i] == pid) {
			new_tids[i] = 0;
			return true;
		}
	}
	return false;
}

static void add_thread(pid_t parent)
{
	unsigned long tid;
	int i;

	if (sys_ptrace(PTRACE_GETEVENTMSG, parent, NULL, (unsigned long)&tid))
		die("PTRACE_GETEVENTMSG");
	for (i = 0; i < MAX_NEW && new_tids[i]; i++)
		;
	if (i == MAX_NEW) {
		fprintf(stderr, "bench-trace: more than %d new threads at once\n", MAX_NEW);
		exit(2);
	}
	new_tids[i] = tid;
}

/* The main thread's last records, and what STATUS says was lost. */
static void bts_last(pid_t pid)
{
	struct ptrace_bts_config cfg;

	bts_drain(pid);
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		die("PTRACE_BTS_STATUS");
	lost = cfg.lost;
}

/* Run the tracee to its end; returns its wait status. */
static int trace(pid_t child)
{
	int status, sig, event, result = 0;
	unsigned long opts = PTRACE_O_EXITKILL | PTRACE_O_TRACEEXEC |
			     PTRACE_O_TRACESYSGOOD;
	pid_t pid;

	if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status))
		die("waitpid (first stop)");
	if (mode == M_BTS)
		opts |= PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXIT;
	if (sys_ptrace(PTRACE_SETOPTIONS, child, NULL, opts))
		die("PTRACE_SETOPTIONS");
	/* to the exec: from there on it is the program */
	if (sys_ptrace(PTRACE_CONT, child, NULL, 0) ||
	    waitpid(child, &status, 0) != child ||
	    status >> 8 != (SIGTRAP | PTRACE_EVENT_EXEC << 8))
		die("exec stop");
	if (arm_prefix)
		run_to_arm(child);
	if (mode == M_STEP)
		return step_all(child);
	bts_config(child);
	pid = child;
	sig = 0;
	while (!stopping) {
		if (sys_ptrace(PTRACE_CONT, pid, NULL, sig) && errno != ESRCH)
			die("PTRACE_CONT");
		pid = waitpid(-1, &status, __WALL);
		if (pid < 0)
			break;
		sig = 0;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (pid == child)
				result = status;
			continue;
		}
		event = status >> 16;
		if (event == PTRACE_EVENT_EXIT && pid == child)
			bts_last(pid);
		else if (event == PTRACE_EVENT_BTS || event == PTRACE_EVENT_EXIT)
			bts_drain(pid);
		else if (event == PTRACE_EVENT_CLONE)
			add_thread(pid);
		else if (!event && WSTOPSIG(status) == SIGSTOP && new_thread(pid))
			/* a new thread's first stop: trace it too */
			bts_config(pid);
		else if (!event)
			sig = WSTOPSIG(status);
	}
	return result;
}

static void on_term(int sig)
{
	stopping = 1;
}

int main(int argc, char **argv)
{
	const char *out = "/dev/null";
	double t0, c0, wall, cpu;
	int opt, status, fd;
	pid_t child;

	while ((opt = getopt(argc, argv, "+m:b:s:a:c:o:")) != -1) {
		switch (opt) {
		case 'm':
			if (!strcmp(optarg, "bts"))
				mode = M_BTS;
			else if (!strcmp(optarg, "step"))
				mode = M_STEP;
			else if (strcmp(optarg, "none"))
				return 2;
			break;
		case 'b':
			if (!strcmp(optarg, "hw"))
				backend = PTRACE_BTS_BACKEND_HARDWARE;
			else if (!strcmp(optarg, "emu"))
				backend = PTRACE_BTS_BACKEND_EMULATED;
			else if (strcmp(optarg, "any"))
				return 2;
			break;
		case 'a':
			arm_prefix = optarg;
			break;
		case 's':
			bts_bytes = strtoul(optarg, NULL, 0);
			break;
		case 'c':
			pin(atoi(optarg));
			break;
		case 'o':
			out = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: bench-trace [-m none|bts|step] [-b any|hw|emu] [-s BYTES] [-a PREFIX] [-c CPU] [-o OUT] -- PROGRAM [ARG...]\n");
		return 2;
	}
	drain_buf = malloc(bts_bytes);
	if (!drain_buf)
		die("malloc");
	/* no SA_RESTART: the wait returns, and the loop ends */
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_term }, NULL);
	t0 = now_us();
	c0 = cpu_us();
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		if (mode != M_NONE) {
			sys_ptrace(PTRACE_TRACEME, 0, NULL, 0);
			raise(SIGSTOP);
		}
		execvp(argv[optind], argv + optind);
		_exit(127);
	}
	if (mode == M_NONE) {
		/* SIGTERM: the program goes with its runner, as a tracee would */
		while (waitpid(child, &status, 0) != child) {
			if (errno != EINTR)
				die("waitpid");
			kill(child, SIGKILL);
		}
	} else {
		status = trace(child);
	}
	wall = now_us() - t0;
	cpu = cpu_us() - c0;
	printf("wall_us=%.0f cpu_us=%.0f records=%lu lost=%lu steps=%lu status=%d\n",
	       wall, cpu, records, lost, steps,
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}
