// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: print the branch trace of a program, through PTRACE_BTS_*.
 *
 *   btrace [options] program [args...]
 *   btrace [options] -p pid
 *   btrace [--calls | --json] --core FILE
 *
 * Runs the program (or attaches to every thread of process pid) with
 * branch tracing on and prints every taken branch as "from -> to", named
 * after the symbols of the objects the process maps (btrace_sym.c) and,
 * where an object has DWARF (built with -g), with the source file and
 * line of the address (btrace_dwarf.c, through libdw): "main+0x12
 * (demo.c:31)". Every
 * thread of the program is traced, from its first instruction. Each buffer
 * is configured with PTRACE_BTS_O_STOP: when it fills, the thread stops in
 * a PTRACE_EVENT_BTS stop, which the program never sees, and btrace drains
 * it. Under the emulated backend nothing is lost; the CPU's BTS may drop
 * the few branches of its interrupt's skid, and btrace then says so. The
 * gaps of the trace (signal handlers, exec, losses) are shown where they
 * are (PTRACE_BTS_O_GAPS).
 *
 * A thread that gets a fatal signal is shown with the signal, where it
 * was and the faulting address; the signal then takes effect, and btrace
 * ends as the program did: with its exit status, or killed by its signal.
 *
 *   -n N         print only the last N branches (of each thread)
 *   -s size      trace buffer size in bytes (default 64 KiB)
 *   -b symbol    begin tracing at the first execution of symbol (main)
 *   -p pid       attach to every thread of a running process until it
 *                exits or btrace gets SIGINT
 *   -f           follow children (fork, vfork) too
 *   --calls      the calls and returns, indented, instead of branches
 *   --json       one JSON object per record (JSON Lines)
 *   --on-crash[=N] print nothing but, at a fatal signal, the thread's last
 *                N branches (default 32)
 *   --core FILE  print the branch trace of each thread in a core dump
 *                (btrace_core.c)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "btrace.h"

#define DEFAULT_SIZE		(64 << 10)
#define ON_CRASH_DEFAULT	32
#define BTS_STOP_STATUS		(SIGTRAP | (PTRACE_EVENT_BTS << 8))
#define EVENT_OF(status)	((status) >> 16)

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
#else
# define REGS_IP(r)	((r).eip)
#endif

/* A traced thread, and the newest records kept for -n and --on-crash. */
struct thread {
	pid_t tid;
	bool configured;
	/* Dying of a signal, or exited: its records stay for the core dump. */
	bool dying;
	/* Its newest records were printed (a crash). */
	bool printed;
	struct bts_struct *ring;
	unsigned long ring_count;
};

static struct thread *threads;
static size_t nthreads;
static unsigned long ring_max;	/* -n or --on-crash: records kept */
static bool on_crash;
static unsigned int bufsize = DEFAULT_SIZE;
static struct bts_struct *buf;
static unsigned long total;
static unsigned long long lost;
static unsigned int backend;
/* Set by the SIGINT handler: lock-free atomics are async-signal-safe. */
static atomic_int interrupted;

static long sys_ptrace(long request, pid_t pid, void *addr, unsigned long data)
{
	return syscall(SYS_ptrace, request, pid, addr, (void *)data);
}

void die(const char *what)
{
	perror(what);
	exit(1);
}

static struct thread *thread_of(pid_t tid)
{
	size_t i;

	for (i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			return &threads[i];
	return NULL;
}

static struct thread *thread_add(pid_t tid)
{
	struct thread *t = thread_of(tid);

	if (t)
		return t;
	threads = reallocarray(threads, nthreads + 1, sizeof(*threads));
	if (!threads)
		die("realloc");
	t = &threads[nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	if (ring_max) {
		t->ring = calloc(ring_max, sizeof(*t->ring));
		if (!t->ring)
			die("calloc");
	}
	out_threads(nthreads > 1);
	return t;
}

static void thread_del(pid_t tid)
{
	struct thread *t = thread_of(tid);

	if (!t)
		return;
	free(t->ring);
	*t = threads[--nthreads];
}

/* The newest records of @t, oldest first. */
static void print_ring(struct thread *t)
{
	unsigned long i, n = t->ring_count < ring_max ? t->ring_count :
							 ring_max;

	for (i = t->ring_count - n; i < t->ring_count; i++)
		out_record(t->tid, &t->ring[i % ring_max]);
}

/* Records the kernel could not store, counted once per thread. */
static unsigned long long lost_records(pid_t tid)
{
	struct ptrace_bts_config cfg = { 0 };

	if (sys_ptrace(PTRACE_BTS_STATUS, tid, &cfg, sizeof(cfg)) < 0)
		return 0;
	return cfg.lost;
}

/* Print @n records of @t now, or keep the newest. */
static void take(struct thread *t, const struct bts_struct *rec, long n)
{
	long i;

	total += n;
	for (i = 0; i < n; i++) {
		if (ring_max)
			t->ring[t->ring_count++ % ring_max] = rec[i];
		else
			out_record(t->tid, &rec[i]);
	}
}

/* Take @t's records and drop them from its buffer. */
static void drain(struct thread *t)
{
	long n;

	if (!t->configured || t->dying)
		return;
	/* Libraries loaded since the last drain, while the maps are there. */
	sym_load_process(t->tid);
	n = sys_ptrace(PTRACE_BTS_DRAIN, t->tid, buf, bufsize);
	if (n < 0) {
		if (errno != ESRCH)
			perror("PTRACE_BTS_DRAIN");
		return;
	}
	take(t, buf, n);
}

/*
 * Take the records of a thread about to die of a signal without dropping
 * them, so that its core dump has them too; they are its last.
 */
static void take_last(struct thread *t)
{
	struct ptrace_bts_read rd = {
		.buf = (unsigned long)buf,
		.size = bufsize,
	};
	long n;

	if (!t->configured || t->dying)
		return;
	sym_load_process(t->tid);
	n = sys_ptrace(PTRACE_BTS_READ, t->tid, &rd, sizeof(rd));
	if (n > 0)
		take(t, buf, n);
	t->dying = true;
}

static void configure(struct thread *t)
{
	struct ptrace_bts_config cfg = {
		.size = bufsize,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
			 PTRACE_BTS_O_STOP | PTRACE_BTS_O_GAPS,
		.backend = PTRACE_BTS_BACKEND_ANY,
	};

	if (sys_ptrace(PTRACE_BTS_CONFIG, t->tid, &cfg, sizeof(cfg))) {
		if (errno == EDQUOT)
			fprintf(stderr,
				"btrace: a %u-byte buffer exceeds RLIMIT_MEMLOCK: raise it (ulimit -l) or use a smaller -s\n",
				bufsize);
		die("PTRACE_BTS_CONFIG");
	}
	if (sys_ptrace(PTRACE_BTS_STATUS, t->tid, &cfg, sizeof(cfg)) < 0)
		die("PTRACE_BTS_STATUS");
	backend = cfg.backend;
	t->configured = true;
}

static const char *backend_name(void)
{
	switch (backend) {
	case PTRACE_BTS_BACKEND_HARDWARE:
		return "the CPU's Branch Trace Store";
	case PTRACE_BTS_BACKEND_EMULATED:
		return "the emulated backend (single-stepping in the kernel)";
	default:
		return "an unknown backend";
	}
}

static unsigned long get_ip(pid_t tid)
{
	struct user_regs_struct regs;

	if (sys_ptrace(PTRACE_GETREGS, tid, NULL, (unsigned long)&regs))
		return 0;
	return REGS_IP(regs);
}

/*
 * Is @sig one the thread catches or ignores (from its status)? A signal
 * it blocks does not come to a signal-delivery stop.
 */
static bool sig_handled(pid_t tid, int sig)
{
	char path[64], line[256];
	unsigned long long mask;
	bool handled = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if ((!strncmp(line, "SigCgt:", 7) ||
		     !strncmp(line, "SigIgn:", 7)) &&
		    sscanf(line + 7, "%llx", &mask) == 1 &&
		    mask & (1ULL << (sig - 1)))
			handled = true;
	}
	fclose(f);
	return handled;
}

/* Does @sig kill the thread that is about to get it (default action)? */
static bool sig_fatal(pid_t tid, int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGURG:
	case SIGWINCH:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		return false;
	}
	return !sig_handled(tid, sig);
}

/* A signal about to kill @t: its last branches, where and why. */
static void report_crash(struct thread *t, int sig)
{
	siginfo_t si;
	bool fault;

	take_last(t);
	if (ring_max) {
		print_ring(t);
		t->printed = true;
	}
	memset(&si, 0, sizeof(si));
	sys_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, (unsigned long)&si);
	fault = si.si_code > 0 && (sig == SIGSEGV || sig == SIGBUS ||
				   sig == SIGILL || sig == SIGFPE);
	out_signal(t->tid, sig, get_ip(t->tid),
		   (uint64_t)(unsigned long)si.si_addr, fault);
	fflush(stdout);
}

/*
 * Run the program to the first execution of @addr with a breakpoint. Its
 * signals are delivered meanwhile; false if it ended first.
 */
static bool run_to(pid_t pid, uint64_t addr, int *status)
{
	struct user_regs_struct regs;
	unsigned long orig, patched;
	int sig = 0;

	/* The raw PEEKTEXT stores the word at *data, unlike glibc's wrapper. */
	if (sys_ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)addr,
		       (unsigned long)&orig))
		die("PTRACE_PEEKTEXT");
	patched = (orig & ~0xffUL) | 0xcc;
	if (sys_ptrace(PTRACE_POKETEXT, pid, (void *)(uintptr_t)addr, patched))
		die("PTRACE_POKETEXT");
	for (;;) {
		if (sys_ptrace(PTRACE_CONT, pid, NULL, sig))
			die("PTRACE_CONT");
		if (waitpid(pid, status, __WALL) != pid)
			die("waitpid");
		if (!WIFSTOPPED(*status))
			return false;
		sig = EVENT_OF(*status) ? 0 : WSTOPSIG(*status);
		if (sig != SIGTRAP)
			continue;
		if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
			die("PTRACE_GETREGS");
		if (REGS_IP(regs) == addr + 1)
			break;
	}
	REGS_IP(regs) = addr;
	if (sys_ptrace(PTRACE_SETREGS, pid, NULL, (unsigned long)&regs) ||
	    sys_ptrace(PTRACE_POKETEXT, pid, (void *)(uintptr_t)addr, orig))
		die("restoring the breakpoint");
	return true;
}

static void on_sigint(int sig)
{
	interrupted = 1;
}

/* Interrupted: drain and stop every thread's trace, and let them go. */
static void detach_all(void)
{
	size_t i;
	int status;

	for (i = 0; i < nthreads; i++)
		sys_ptrace(PTRACE_INTERRUPT, threads[i].tid, NULL, 0);
	while (nthreads) {
		pid_t tid = waitpid(-1, &status, __WALL);
		struct thread *t = thread_of(tid);

		if (tid < 0)
			break;
		if (!t)
			continue;
		if (WIFSTOPPED(status)) {
			drain(t);
			lost += lost_records(tid);
			if (ring_max && !on_crash)
				print_ring(t);
			sys_ptrace(PTRACE_BTS_CONFIG, tid,
				   &(struct ptrace_bts_config){ 0 },
				   sizeof(struct ptrace_bts_config));
			sys_ptrace(PTRACE_DETACH, tid, NULL, 0);
		}
		thread_del(tid);
	}
}

/* What to deliver after a stop of @t, 0 for none. */
static int stopped(struct thread *t, int status, bool seized)
{
	int sig = WSTOPSIG(status), event = EVENT_OF(status);
	unsigned long msg;

	if (status >> 8 == BTS_STOP_STATUS) {
		drain(t);
		return 0;
	}
	switch (event) {
	case 0:
		break;
	case PTRACE_EVENT_EXIT:
		drain(t);
		return 0;
	case PTRACE_EVENT_EXEC:
		/* The old image's records, with its names; then the new one's. */
		drain(t);
		sym_reset();
		sym_load_process(t->tid);
		return 0;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		if (!sys_ptrace(PTRACE_GETEVENTMSG, t->tid, NULL,
				(unsigned long)&msg))
			thread_add(msg);
		return 0;
	case PTRACE_EVENT_STOP:
		/* A new thread's first stop, seized; or a group stop. */
		if (!t->configured)
			configure(t);
		return 0;
	default:
		return 0;
	}
	/* A new thread's first stop, not seized: its SIGSTOP is ours. */
	if (!t->configured && sig == SIGSTOP) {
		configure(t);
		return 0;
	}
	if (sig_fatal(t->tid, sig))
		report_crash(t, sig);
	return sig;
}

/*
 * The next thread to report: an exit is seen before the thread is reaped,
 * so that its last records, which no exit stop took (another thread's
 * exit_group() or exec, a fatal signal), are read while the kernel keeps
 * them.
 */
static pid_t next_report(int *status)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOWAIT | __WALL))
		return -1;
	if (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED ||
	    si.si_code == CLD_DUMPED) {
		struct thread *t = thread_of(si.si_pid);

		if (t && t->configured) {
			take_last(t);
			lost += lost_records(t->tid);
		}
	}
	return waitpid(si.si_pid, status, __WALL);
}

/*
 * Follow the threads until the first one, @pid, and all the others have
 * ended (or we are interrupted). Returns @pid's wait status.
 */
static int follow(pid_t pid, bool seized)
{
	int status, sig, result = 0;
	struct thread *t;
	pid_t tid;

	for (;;) {
		tid = next_report(&status);
		if (tid < 0) {
			if (errno == EINTR && interrupted && seized) {
				detach_all();
				return 0;
			}
			if (errno == ECHILD)
				return result;
			die("waitpid");
		}
		t = thread_of(tid);
		if (!t)
			t = thread_add(tid);
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (tid == pid)
				result = status;
			if (ring_max && !on_crash && !t->printed)
				print_ring(t);
			thread_del(tid);
			if (!nthreads)
				return result;
			continue;
		}
		sig = stopped(t, status, seized);
		sys_ptrace(PTRACE_CONT, tid, NULL, sig);
	}
}

/* Seize every thread of @pid and stop them; the first is @pid itself. */
static void attach(pid_t pid, unsigned long options)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		die(path);
	while ((d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		struct thread *t;
		int status;

		if (tid <= 0 || thread_of(tid))
			continue;
		/*
		 * A thread a seized one created since is ours already
		 * (TRACECLONE: EPERM), one that exited is gone (ESRCH): the
		 * event loop meets the former at its first stop.
		 */
		if (sys_ptrace(PTRACE_SEIZE, tid, NULL, options)) {
			if (errno == EPERM || errno == ESRCH)
				continue;
			die("PTRACE_SEIZE");
		}
		sys_ptrace(PTRACE_INTERRUPT, tid, NULL, 0);
		if (waitpid(tid, &status, __WALL) != tid)
			die("waitpid");
		t = thread_add(tid);
		configure(t);
		/*
		 * A signal that was pending stops the thread before the
		 * interrupt does: it goes on to the thread, and the
		 * interrupt's stop comes to the event loop later.
		 */
		sys_ptrace(PTRACE_CONT, tid, NULL,
			   status >> 16 ? 0 : WSTOPSIG(status));
	}
	closedir(dir);
}

/* Start the program, stopped after its exec; returns its pid. */
static pid_t launch(char **argv, unsigned long options)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			die("PTRACE_TRACEME");
		execvp(argv[0], argv);
		die(argv[0]);
	}
	/* The stop after exec: the new image is there. */
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
		fprintf(stderr, "btrace: %s did not start\n", argv[0]);
		exit(1);
	}
	if (sys_ptrace(PTRACE_SETOPTIONS, pid, NULL, options))
		die("PTRACE_SETOPTIONS");
	return pid;
}

/* End as the program did: its exit status, or its signal. */
static int finish(int status)
{
	struct rlimit none = { 0, 0 };
	sigset_t set;
	int sig;

	if (!WIFSIGNALED(status))
		return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	sig = WTERMSIG(status);
	/* No core of btrace: the program's is the one that matters. */
	setrlimit(RLIMIT_CORE, &none);
	signal(sig, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	return 128 + sig;
}

static void print_usage(void)
{
	fprintf(stderr,
		"usage: btrace [-n N] [-s size] [-b symbol] [-f] [--calls|--json] [--on-crash[=N]] program [args...]\n"
		"       btrace [-n N] [-s size] [--calls|--json] [--on-crash[=N]] -p pid\n"
		"       btrace [--calls|--json] --core FILE\n"
		"Addresses in objects with DWARF (-g) come with their file:line.\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "core", required_argument, NULL, 'c' },
		{ "calls", no_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'J' },
		{ "on-crash", optional_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long options = PTRACE_O_TRACEEXIT | PTRACE_O_TRACECLONE |
				PTRACE_O_TRACEEXEC;
	const char *begin = NULL, *core = NULL;
	pid_t pid = 0;
	int opt, status;
	bool seized = false;

	while ((opt = getopt_long(argc, argv, "+n:s:b:p:fh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			core = optarg;
			break;
		case 'C':
			out_init(OUT_CALLS);
			break;
		case 'J':
			out_init(OUT_JSON);
			break;
		case 'X':
			on_crash = true;
			ring_max = optarg ? strtoul(optarg, NULL, 0) :
					    ON_CRASH_DEFAULT;
			break;
		case 'n':
			ring_max = strtoul(optarg, NULL, 0);
			break;
		case 's':
			bufsize = strtoul(optarg, NULL, 0);
			break;
		case 'b':
			begin = optarg;
			break;
		case 'p':
			pid = strtol(optarg, NULL, 0);
			break;
		case 'f':
			options |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
			break;
		default:
			print_usage();
		}
	}
	if (core) {
		status = optind == argc && !pid ? core_print(core) : 2;
		sym_exit();
		out_exit();
		return status;
	}
	if ((pid && optind != argc) || (!pid && optind == argc) || !bufsize ||
	    (on_crash && !ring_max))
		print_usage();
	buf = malloc(bufsize);
	if (!buf)
		die("malloc");

	if (pid) {
		/* SEIZE, so that SIGINT can stop them with PTRACE_INTERRUPT. */
		seized = true;
		/* No SA_RESTART: SIGINT must interrupt waitpid(). */
		sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_sigint },
			  NULL);
		attach(pid, options);
	} else {
		pid = launch(argv + optind, options | PTRACE_O_EXITKILL);
		sym_load_process(pid);
		if (begin) {
			const struct sym *s = sym_find(begin);

			if (!s) {
				fprintf(stderr, "btrace: no symbol %s\n", begin);
				kill(pid, SIGKILL);
				return 1;
			}
			if (!run_to(pid, s->addr, &status))
				return finish(status);
		}
		configure(thread_add(pid));
		sys_ptrace(PTRACE_CONT, pid, NULL, 0);
	}
	status = follow(pid, seized);
	fflush(stdout);
	if (!on_crash) {
		fprintf(stderr, "btrace: traced by %s\n", backend_name());
		fprintf(stderr, "btrace: %lu branch records%s\n", total,
			ring_max ? " (the last ones of each thread shown)" : "");
	}
	if (lost)
		fprintf(stderr, "btrace: %llu records lost: the trace has gaps\n",
			lost);
	sym_exit();
	out_exit();
	free(threads);
	free(buf);
	return finish(status);
}
