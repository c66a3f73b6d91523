// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: print the branch trace of a program, through PTRACE_BTS_*.
 *
 *   btrace [-n N] [-s size] [-f symbol] program [args...]
 *   btrace [-n N] [-s size] -p pid
 *   btrace --core FILE
 *
 * Runs the program (or attaches to pid) with branch tracing on and prints
 * every taken branch as "from -> to", named after the symbols of the
 * objects the process maps (btrace_sym.c). The buffer is configured with
 * PTRACE_BTS_O_STOP: when it fills, the tracee stops in a PTRACE_EVENT_BTS
 * stop, which the program never sees, and btrace drains it. Under the
 * emulated backend nothing is lost; the CPU's BTS may drop the few
 * branches of its interrupt's skid, and btrace then says how many times.
 *
 *   -n N       print only the last N branches
 *   -s size    trace buffer size in bytes (default 64 KiB)
 *   -f symbol  start tracing at the first execution of symbol (e.g. main)
 *   -p pid     attach to a running process (thread) until it exits or
 *              btrace gets SIGINT
 *   --core FILE  print the branch trace of each thread in a core dump
 *              (btrace_core.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "btrace.h"

#define DEFAULT_SIZE	(64 << 10)
#define BTS_STOP_STATUS	(SIGTRAP | (PTRACE_EVENT_BTS << 8))

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
#else
# define REGS_IP(r)	((r).eip)
#endif

/* Records kept for -n, as a ring; all are printed as they come otherwise. */
static struct bts_struct *tail;
static unsigned long tail_max, tail_count;
static unsigned long total;
/* PTRACE_BTS_STATUS's lost at the end: records the kernel could not store. */
static unsigned long long lost;

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

static void print_addr(uint64_t addr)
{
	char name[256];

	sym_format(addr, name, sizeof(name));
	printf("%#10llx <%s>", (unsigned long long)addr, name);
}

void print_record(const struct bts_struct *r)
{
	switch (r->qualifier) {
	case BTS_BRANCH:
		print_addr(r->variant.lbr.from);
		printf("  ->  ");
		print_addr(r->variant.lbr.to);
		printf("\n");
		break;
	case BTS_TASK_ARRIVES:
	case BTS_TASK_DEPARTS:
		printf("  [%llu.%09llu] task %u %s\n",
		       (unsigned long long)r->variant.event.clock / 1000000000,
		       (unsigned long long)r->variant.event.clock % 1000000000,
		       r->variant.event.pid,
		       r->qualifier == BTS_TASK_ARRIVES ? "arrives" : "departs");
		break;
	}
}

/* Drain the tracee's buffer: print now, or keep the newest for -n. */
static void drain(pid_t pid, unsigned int bufsize)
{
	static struct bts_struct *buf;
	long n, i;

	if (!buf) {
		buf = malloc(bufsize);
		if (!buf)
			die("malloc");
	}
	/* Libraries loaded since the last drain, while the maps are there. */
	sym_load_process(pid);
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, bufsize);
	if (n < 0) {
		if (errno != ESRCH)
			perror("PTRACE_BTS_DRAIN");
		return;
	}
	total += n;
	for (i = 0; i < n; i++) {
		if (!tail_max) {
			print_record(&buf[i]);
			continue;
		}
		tail[tail_count++ % tail_max] = buf[i];
	}
}

static void print_tail(void)
{
	unsigned long i, n = tail_count < tail_max ? tail_count : tail_max;

	for (i = tail_count - n; i < tail_count; i++)
		print_record(&tail[i % tail_max]);
}

/* Returns the backend the kernel chose, PTRACE_BTS_BACKEND_*. */
static unsigned int configure(pid_t pid, unsigned int size)
{
	struct ptrace_bts_config cfg = {
		.size = size,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
			 PTRACE_BTS_O_STOP,
		.backend = PTRACE_BTS_BACKEND_ANY,
	};

	if (sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg))) {
		if (errno == EDQUOT)
			fprintf(stderr,
				"btrace: a %u-byte buffer exceeds RLIMIT_MEMLOCK: raise it (ulimit -l) or use a smaller -s\n",
				size);
		die("PTRACE_BTS_CONFIG");
	}
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		die("PTRACE_BTS_STATUS");
	return cfg.backend;
}

static const char *backend_name(unsigned int backend)
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

/* Records the kernel could not store, at the end. */
static unsigned long long lost_records(pid_t pid)
{
	struct ptrace_bts_config cfg = { 0 };

	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		return 0;
	return cfg.lost;
}

/* Run @pid to the first execution of @addr with a breakpoint. */
static int run_to(pid_t pid, uint64_t addr)
{
	struct user_regs_struct regs;
	unsigned long orig, patched;
	int status;

	/* The raw PEEKTEXT stores the word at *data, unlike glibc's wrapper. */
	if (sys_ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)addr,
		       (unsigned long)&orig))
		die("PTRACE_PEEKTEXT");
	patched = (orig & ~0xffUL) | 0xcc;
	if (sys_ptrace(PTRACE_POKETEXT, pid, (void *)(uintptr_t)addr, patched))
		die("PTRACE_POKETEXT");
	for (;;) {
		if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
			die("PTRACE_CONT");
		if (waitpid(pid, &status, __WALL) != pid)
			die("waitpid");
		if (!WIFSTOPPED(status))
			return -1;
		if (WSTOPSIG(status) != SIGTRAP)
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
	return 0;
}

static void on_sigint(int sig)
{
	interrupted = 1;
}

/* Follow @pid until it exits (or we are interrupted), draining on the way. */
static int follow(pid_t pid, unsigned int size, bool seized)
{
	int status, sig, ret = 0;

	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
		die("PTRACE_CONT");
	for (;;) {
		if (waitpid(pid, &status, __WALL) < 0) {
			if (errno == EINTR && interrupted && seized) {
				sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0);
				continue;
			}
			die("waitpid");
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			ret = WIFEXITED(status) ? WEXITSTATUS(status) :
			      128 + WTERMSIG(status);
			break;
		}
		sig = WSTOPSIG(status);
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
			drain(pid, size);
			lost += lost_records(pid);
			sig = 0;
		} else if (status >> 16 == PTRACE_EVENT_STOP) {
			/* our PTRACE_INTERRUPT (or a group stop) */
			if (interrupted) {
				drain(pid, size);
				lost += lost_records(pid);
				sys_ptrace(PTRACE_BTS_CONFIG, pid,
					   &(struct ptrace_bts_config){ 0 },
					   sizeof(struct ptrace_bts_config));
				sys_ptrace(PTRACE_DETACH, pid, NULL, 0);
				break;
			}
			sig = 0;
		} else if (status >> 8 == BTS_STOP_STATUS) {
			drain(pid, size);
			sig = 0;
		} else if (status >> 16) {
			sig = 0;
		}
		if (sys_ptrace(PTRACE_CONT, pid, NULL, sig))
			break;
	}
	return ret;
}

static void print_usage(void)
{
	fprintf(stderr,
		"usage: btrace [-n N] [-s size] [-f symbol] program [args...]\n"
		"       btrace [-n N] [-s size] -p pid\n"
		"       btrace --core FILE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int size = DEFAULT_SIZE;
	const char *from_sym = NULL;
	pid_t pid = 0;
	unsigned int backend;
	int opt, status, ret;
	bool seized = false;
	static const struct option longopts[] = {
		{ "core", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "+n:s:f:p:h", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (optind != argc)
				print_usage();
			return core_print(optarg);
		case 'n':
			tail_max = strtoul(optarg, NULL, 0);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'f':
			from_sym = optarg;
			break;
		case 'p':
			pid = strtol(optarg, NULL, 0);
			break;
		default:
			print_usage();
		}
	}
	if ((pid && optind != argc) || (!pid && optind == argc))
		print_usage();
	if (tail_max) {
		tail = calloc(tail_max, sizeof(*tail));
		if (!tail)
			die("calloc");
	}

	if (pid) {
		/* SEIZE, so that SIGINT can stop it with PTRACE_INTERRUPT */
		if (sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_TRACEEXIT))
			die("PTRACE_SEIZE");
		seized = true;
		sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0);
		if (waitpid(pid, &status, __WALL) != pid)
			die("waitpid");
		/* no SA_RESTART: SIGINT must interrupt waitpid() */
		sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_sigint },
			  NULL);
	} else {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
				die("PTRACE_TRACEME");
			execvp(argv[optind], argv + optind);
			die(argv[optind]);
		}
		/* the stop after exec: the new image is there */
		if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
			fprintf(stderr, "btrace: %s did not start\n", argv[optind]);
			return 1;
		}
		if (sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
			       PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL))
			die("PTRACE_SETOPTIONS");
	}
	sym_load_process(pid);

	if (from_sym) {
		const struct sym *s = sym_find(from_sym);

		if (!s) {
			fprintf(stderr, "btrace: no symbol %s\n", from_sym);
			kill(pid, SIGKILL);
			return 1;
		}
		if (run_to(pid, s->addr))
			return 1;
	}

	backend = configure(pid, size);
	ret = follow(pid, size, seized);
	if (tail_max)
		print_tail();
	fprintf(stderr, "btrace: traced by %s\n", backend_name(backend));
	fprintf(stderr, "btrace: %lu branch records%s\n", total,
		tail_max && total > tail_max ? " (the last ones shown)" : "");
	if (lost)
		fprintf(stderr,
			"btrace: %llu records lost: the trace has gaps\n",
			lost);
	return ret;
}
