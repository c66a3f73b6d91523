// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile use of ptrace branch tracing: a bounded, seeded fuzzer.
 *
 * Several tracer processes, all of one unprivileged uid with a small
 * RLIMIT_MEMLOCK, each trace several tracees that loop, fork, spawn
 * threads, exec, signal themselves and die; their children and threads
 * are traced too (PTRACE_O_TRACEFORK, CLONE, EXEC) and get requests like
 * the others. The tracers stop them at
 * random and issue random PTRACE_BTS_* requests: random sizes, flags,
 * signals, backends, indexes, lengths and pointers (NULL, unmapped,
 * read-only, kernel, misaligned, straddling the end of a page). Tracers
 * detach, and are killed in the middle of it; CPU 1 goes offline and
 * online underneath. failslab and fail_page_alloc fail the allocations
 * made in the series' code (the text of ds.c, ptrace_bts.c and
 * ds_emulate.c, from /proc/kallsyms) for these processes.
 *
 * Every error must be one Documentation/arch/x86/ptrace-bts.rst allows for
 * the request. Before and after, one tracer of the uid can have exactly
 * RLIMIT_MEMLOCK of trace buffer and not a page more, and a second tracer
 * of the uid none meanwhile: the budget is the user's and all of it comes
 * back. Then, as root and without a locked-memory limit, tracers in a
 * memory cgroup with memory.max set: the cgroup, not the user, must pay
 * for their buffers, and refuse the one that does not fit with ENOMEM, no
 * OOM kill. Last, kmemleak must not suspect anything the series allocated.
 *
 * A long run or a rerun: ptrace_bts_hostile --seed S --ops N
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_util.h"

/* The unprivileged tracers' uid and their RLIMIT_MEMLOCK. */
#define HO_UID			4242
#define HO_PAGE			4096UL
#define HO_MEMLOCK		(16 * HO_PAGE)
#define HO_RECORD		sizeof(struct bts_struct)
/* The default run: operations, seed, processes. */
#define HO_OPS			6000
#define HO_SEED			1
#define HO_TRACERS		3
#define HO_TRACEES		6	/* per tracer, forks included */
/* A tracee exits after this long; the whole run is bounded anyway. */
#define HO_TRACEE_LIFE_MS	1500
/* The supervisor kills a tracer now and then, CPU 1 goes on and off. */
#define HO_KILL_EVERY_MS	700
#define HO_HOTPLUG_EVERY_MS	150
/* Fault injection: percent of the allocations in range, at most times. */
#define HO_FAIL_PROBABILITY	"25"
#define HO_FAIL_TIMES		"100000"
/* Freed from a workqueue after a tracer dies: wait that long for it. */
#define HO_REFUND_WAIT_MS	10000
/*
 * A tracer that waits this long for a stop it asked for is stuck: the
 * supervisor shows where it and its tracees are, then kills it. A tracer
 * waiting longer than HO_SUSPECT_MS is spared the random kills meanwhile.
 */
#define HO_HANG_S		30
#define HO_SUSPECT_MS		2000
/* The exit status of a tracee that could not exec the fuzzer. */
#define HO_EXEC_FAILED		99
/* Symbols of other objects between functions of the series' objects. */
#define HO_FOREIGN_RUN		16
/* Objects younger than 5 s are never reported. */
#define HO_KMEMLEAK_SETTLE_S	6

#define HO_DEBUGFS	"/sys/kernel/debug"
#define HO_CPU1		"/sys/devices/system/cpu/cpu1/online"

/* What a tracer shows the supervisor, for its watchdog. */
struct ho_slot {
	atomic_int	pid;		/* the tracer, 0 when none */
	atomic_long	waiting;	/* since when it waits for a stop, ms */
	atomic_int	interrupted;	/* the tracee it interrupted */
	atomic_int	n;		/* its tracees */
	atomic_int	tids[HO_TRACEES * 4];
};

/* What the processes of a run share, in a shared mapping. */
struct ho_shared {
	atomic_long	ops;		/* PTRACE_BTS_* requests issued */
	atomic_long	stops;		/* ptrace stops handled */
	atomic_long	forks;		/* PTRACE_EVENT_FORK */
	atomic_long	vforks;		/* PTRACE_EVENT_VFORK */
	atomic_long	clones;		/* PTRACE_EVENT_CLONE */
	atomic_long	execs;		/* PTRACE_EVENT_EXEC */
	atomic_long	adopted;	/* auto-attached children and threads */
	atomic_long	child_ops;	/* requests on them */
	atomic_long	exec_failed;	/* tracees that could not exec */
	atomic_long	hangs;		/* tracers the watchdog killed */
	atomic_long	exits;		/* tracees that exited or died */
	atomic_long	detaches;
	atomic_long	kills;		/* tracers killed by the supervisor */
	atomic_long	toggles;	/* CPU 1 offline and online again */
	atomic_long	granted;	/* PTRACE_BTS_CONFIG that returned 0 */
	atomic_long	enomem;
	atomic_long	bad;		/* errors the documentation does not allow */
	atomic_int	stop;		/* the hotplug child may stop */
	long		limit;		/* operations of the run */
	struct ho_slot	slots[HO_TRACERS];
};

static struct ho_shared *ho;

/* xorshift64*: one stream per process, from the seed and its number. */
static uint64_t ho_rnd_state;

static void ho_srand(uint64_t seed, uint64_t stream)
{
	ho_rnd_state = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (stream << 32 | stream);
	if (!ho_rnd_state)
		ho_rnd_state = 1;
}

static uint64_t ho_rand(void)
{
	ho_rnd_state ^= ho_rnd_state >> 12;
	ho_rnd_state ^= ho_rnd_state << 25;
	ho_rnd_state ^= ho_rnd_state >> 27;
	return ho_rnd_state * 0x2545f4914f6cdd1dULL;
}

static uint64_t ho_below(uint64_t n)
{
	return n ? ho_rand() % n : 0;
}

static long ho_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ho_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* ---- the tracees ---- */

static const char *ho_self;

static void *ho_thread(void *arg)
{
	long end = ho_now_ms() + (long)(uintptr_t)arg;

	while (ho_now_ms() < end)
		;
	return NULL;
}

static void ho_handler(int sig)
{
}

/* Loops and does something now and then, until its time is up. */
static void ho_tracee(uint64_t seed, long end)
{
	char arg_seed[32], arg_end[32];
	pthread_t thread;
	unsigned long n;
	pid_t pid;

	signal(SIGUSR1, ho_handler);
	signal(SIGUSR2, ho_handler);
	ho_srand(seed, getpid());
	while (ho_now_ms() < end) {
		/* Branches to trace; the barrier keeps the loop. */
		for (n = 0; n < 2000; n++)
			asm volatile("" ::: "memory");
		switch (ho_below(64)) {
		case 0:
			pid = fork();
			if (pid == 0)
				ho_srand(seed, getpid());
			else if (pid > 0 && ho_below(2))
				waitpid(pid, NULL, 0);
			break;
		case 1:
			if (!pthread_create(&thread, NULL, ho_thread,
					    (void *)(uintptr_t)ho_below(300)))
				pthread_detach(thread);
			break;
		case 2:
			snprintf(arg_seed, sizeof(arg_seed), "%llu",
				 (unsigned long long)ho_rand());
			snprintf(arg_end, sizeof(arg_end), "%ld", end);
			execl(ho_self, ho_self, "--tracee", arg_seed, arg_end,
			      NULL);
			break;
		case 3:
			kill(getpid(), ho_below(2) ? SIGUSR1 : SIGUSR2);
			break;
		case 4:
			if (!ho_below(4))
				raise(SIGKILL);
			if (!ho_below(4))
				_exit(3);
			break;
		case 5:
			pid = vfork();
			if (pid == 0)
				_exit(0);
			break;
		}
	}
	_exit(0);
}

/* ---- the requests ---- */

/* Buffers the pointers point into, set up once per tracer. */
static char *ho_rw;		/* two read-write pages */
static char *ho_ro;		/* one read-only page */
static char *ho_hole;		/* an unmapped page */
static char *ho_edge;		/* a read-write page followed by ho_hole */

static void ho_maps(void)
{
	char *p = mmap(NULL, 4 * HO_PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(2);
	ho_rw = malloc(64 * HO_PAGE);
	ho_ro = p;
	ho_edge = p + HO_PAGE;
	ho_hole = p + 2 * HO_PAGE;
	memset(ho_ro, 0, HO_PAGE);
	memset(ho_edge, 0, HO_PAGE);
	mprotect(ho_ro, HO_PAGE, PROT_READ);
	munmap(ho_hole, 2 * HO_PAGE);
	if (!ho_rw)
		_exit(2);
	memset(ho_rw, 0, 64 * HO_PAGE);
}

/* A pointer for a request of @len bytes, and whether it is a good one. */
static void *ho_pointer(size_t len, bool *good)
{
	*good = false;
	switch (ho_below(12)) {
	case 0:
		return NULL;
	case 1:
		return ho_hole;
	case 2:
		return ho_ro;
	case 3:
		return (void *)0xffffffff81000000UL;
	case 4:
		return (void *)(-1UL - 7);
	case 5:
		/* Straddles the end of the page. */
		return ho_edge + HO_PAGE - (len > 1 ? len / 2 : 1);
	case 6:
		*good = len < 63 * HO_PAGE;
		return ho_rw + 1 + ho_below(7);
	default:
		*good = len <= 64 * HO_PAGE;
		return ho_rw;
	}
}

static unsigned long ho_size(void)
{
	switch (ho_below(14)) {
	case 0:
		return 0;
	case 1:
		return 1 + ho_below(HO_RECORD);
	case 2:
		return HO_MEMLOCK;
	case 3:
		return HO_MEMLOCK + HO_PAGE;
	case 4:
		return 4UL << 20;
	case 5:
		return (4UL << 20) + 1;
	case 6:
		return 0xffffffffUL;
	case 7:
		return ho_rand() & 0xffffffffUL;
	default:
		return 1 + ho_below(HO_MEMLOCK / 2);
	}
}

static unsigned long ho_len(void)
{
	switch (ho_below(10)) {
	case 0:
		return 0;
	case 1:
		return ho_below(20);
	case 2:
		return 20 + ho_below(HO_PAGE);
	case 3:
		return HO_PAGE + 1;
	case 4:
		return -1UL;
	case 5:
		return ho_rand();
	default:
		return 16 + 4 * ho_below(2);
	}
}

static unsigned int ho_flags(void)
{
	switch (ho_below(6)) {
	case 0:
		return ho_rand();
	case 1:
		return 1U << ho_below(32);
	case 2:
		return 0;
	default:
		return PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
		       (ho_below(2) ? PTRACE_BTS_O_SCHED : 0) |
		       (ho_below(3) ? 0 : PTRACE_BTS_O_SIGNAL);
	}
}

static unsigned int ho_signal(void)
{
	switch (ho_below(5)) {
	case 0:
		return 0;
	case 1:
		return 65 + ho_below(1000);
	case 2:
		return -1U;
	default:
		return 1 + ho_below(64);
	}
}

/*
 * The errors Documentation/arch/x86/ptrace-bts.rst allows each request,
 * besides ESRCH (not stopped: it may have died or been resumed). ENOMEM
 * ("no memory", the Errors table) for DRAIN, which allocates a bounce
 * buffer, too.
 */
static bool ho_allowed(long req, int err)
{
	if (err == ESRCH)
		return true;
	switch (req) {
	case PTRACE_BTS_CONFIG:
		return err == EINVAL || err == E2BIG || err == EFAULT ||
		       err == ENOMEM || err == EBUSY || err == EOPNOTSUPP;
	case PTRACE_BTS_STATUS:
		return err == EFAULT;
	case PTRACE_BTS_GET:
		return err == EINVAL || err == EFAULT;
	case PTRACE_BTS_DRAIN:
		return err == EINVAL || err == EFAULT || err == ENOMEM;
	}
	return false;
}

static const char *const ho_names[] = {
	"CONFIG", "STATUS", "SIZE", "GET", "CLEAR", "DRAIN",
};

static void ho_bad(const char *what, long req, pid_t pid, void *addr,
		   unsigned long data, long ret, int err)
{
	atomic_fetch_add(&ho->bad, 1);
	fprintf(stderr,
		"# hostile: PTRACE_BTS_%s(pid %d, addr %p, data %#lx): %s %ld, errno %d (%s)\n",
		ho_names[req - PTRACE_BTS_CONFIG], pid, addr, data, what, ret,
		err, strerror(err));
}

/* One request, its result checked; returns it. */
static long ho_request(long req, pid_t pid, void *addr, unsigned long data)
{
	long ret;
	int err;

	errno = 0;
	ret = sys_ptrace(req, pid, addr, data);
	err = errno;
	atomic_fetch_add(&ho->ops, 1);
	if (ret < 0) {
		if (!ho_allowed(req, err))
			ho_bad("undocumented error", req, pid, addr, data, ret,
			       err);
		if (err == ENOMEM)
			atomic_fetch_add(&ho->enomem, 1);
		return -err;
	}
	switch (req) {
	case PTRACE_BTS_CONFIG:
	case PTRACE_BTS_GET:
	case PTRACE_BTS_CLEAR:
		if (ret)
			ho_bad("returned", req, pid, addr, data, ret, 0);
		break;
	case PTRACE_BTS_STATUS:
		if (ret != sizeof(struct ptrace_bts_config))
			ho_bad("returned", req, pid, addr, data, ret, 0);
		break;
	case PTRACE_BTS_SIZE:
	case PTRACE_BTS_DRAIN:
		if (ret > (long)((4UL << 20) / HO_RECORD))
			ho_bad("returned", req, pid, addr, data, ret, 0);
		break;
	}
	return ret;
}

/* A well-formed request that must fail with EINVAL, unless ESRCH. */
static void ho_expect_einval(long req, pid_t pid, void *addr,
			     unsigned long data)
{
	long ret = ho_request(req, pid, addr, data);

	if (ret != -EINVAL && ret != -ESRCH && ret != -EFAULT)
		ho_bad("instead of EINVAL", req, pid, addr, data, ret,
		       ret < 0 ? -ret : 0);
}

static void ho_config(pid_t pid)
{
	struct ptrace_bts_config cfg = {
		.size		= ho_size(),
		.flags		= ho_flags(),
		.signal		= ho_signal(),
		.bts_size	= ho_below(2) ? 0 : ho_rand(),
		.backend	= ho_below(8) ? ho_below(3) : ho_rand(),
	};
	unsigned long len = ho_len();
	bool good;
	void *p = ho_pointer(len < HO_PAGE ? len : sizeof(cfg), &good);

	if (!ho_below(3)) {
		len = sizeof(cfg);
		p = &cfg;
		good = true;
	}
	if (p == ho_rw || p == ho_edge + HO_PAGE - sizeof(cfg))
		memcpy(p, &cfg, sizeof(cfg));
	if (ho_request(PTRACE_BTS_CONFIG, pid, p, len) == 0)
		atomic_fetch_add(&ho->granted, 1);
	/* What must fail with a good pointer and length, whatever else. */
	if (good && p == &cfg && cfg.flags & ~0xfU)
		ho_expect_einval(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
	if (good && p == &cfg && (cfg.flags & 0xfU) == 0x9 && !cfg.size &&
	    cfg.backend < 3) {
		cfg.signal = 0;
		ho_expect_einval(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
	}
}

static void ho_get(pid_t pid)
{
	long size = ho_request(PTRACE_BTS_SIZE, pid, NULL, 0);
	unsigned long index;
	bool good;
	void *p = ho_pointer(HO_RECORD, &good);

	switch (ho_below(5)) {
	case 0:
		index = size > 0 ? size : 0;
		break;
	case 1:
		index = -1UL;
		break;
	case 2:
		index = ho_rand();
		break;
	default:
		index = size > 0 ? ho_below(size) : 0;
		break;
	}
	ho_request(PTRACE_BTS_GET, pid, p, index);
}

static void ho_drain(pid_t pid)
{
	long size = ho_request(PTRACE_BTS_SIZE, pid, NULL, 0);
	unsigned long len = ho_below(2) && size > 0 ? size * HO_RECORD :
			    ho_len();
	bool good;
	void *p = ho_pointer(len, &good);

	ho_request(PTRACE_BTS_DRAIN, pid, p, len);
}

/* A random PTRACE_BTS_* request on @pid. */
static void ho_one(pid_t pid)
{
	struct ptrace_bts_config st;
	unsigned long len;
	bool good;

	switch (ho_below(8)) {
	case 0:
	case 1:
		ho_config(pid);
		break;
	case 2:
		len = ho_len();
		ho_request(PTRACE_BTS_STATUS, pid,
			   ho_below(2) ? (void *)&st : ho_pointer(len, &good),
			   len);
		break;
	case 3:
		ho_request(PTRACE_BTS_SIZE, pid, ho_pointer(1, &good),
			   ho_rand());
		break;
	case 4:
		ho_get(pid);
		break;
	case 5:
		ho_request(PTRACE_BTS_CLEAR, pid, ho_pointer(1, &good),
			   ho_rand());
		break;
	default:
		ho_drain(pid);
		break;
	}
}

/* ---- the tracers ---- */

/**
 * struct ho_tracer - a tracer's tracees
 * @slot:	what the supervisor sees of it
 * @tids:	the tracees: its own, their children and threads
 * @child:	which of @tids were attached automatically
 * @n:		number of @tids
 */
struct ho_tracer {
	struct ho_slot	*slot;
	pid_t		tids[HO_TRACEES * 4];
	bool		child[HO_TRACEES * 4];
	int		n;
};

static void ho_publish(struct ho_tracer *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		atomic_store(&t->slot->tids[i], t->tids[i]);
	atomic_store(&t->slot->n, t->n);
}

static int ho_find(struct ho_tracer *t, pid_t tid)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (t->tids[i] == tid)
			return i;
	return -1;
}

static void ho_forget(struct ho_tracer *t, pid_t tid)
{
	int i = ho_find(t, tid);

	if (i < 0)
		return;
	t->n--;
	t->tids[i] = t->tids[t->n];
	t->child[i] = t->child[t->n];
	ho_publish(t);
}

static void ho_adopt(struct ho_tracer *t, pid_t tid, bool child)
{
	if (ho_find(t, tid) >= 0)
		return;
	/* Too many: it dies at its first stop, or now. */
	if (t->n == (int)ARRAY_SIZE(t->tids)) {
		kill(tid, SIGKILL);
		return;
	}
	t->tids[t->n] = tid;
	t->child[t->n] = child;
	t->n++;
	ho_publish(t);
	if (child)
		atomic_fetch_add(&ho->adopted, 1);
}

/* Random requests on a tracee; counted apart for an attached child. */
static void ho_some(struct ho_tracer *t, pid_t tid, int n)
{
	int i = ho_find(t, tid);

	if (i >= 0 && t->child[i])
		atomic_fetch_add(&ho->child_ops, n);
	while (n--)
		ho_one(tid);
}

static long ho_options(void)
{
	return PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
	       PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
	       (ho_below(2) ? PTRACE_O_EXITKILL : 0) |
	       (ho_below(2) ? PTRACE_O_TRACEEXIT : 0);
}

static void ho_spawn(struct ho_tracer *t)
{
	char arg_seed[32], arg_end[32];
	pid_t pid;

	snprintf(arg_seed, sizeof(arg_seed), "%llu",
		 (unsigned long long)ho_rand());
	snprintf(arg_end, sizeof(arg_end), "%ld",
		 ho_now_ms() + (long)ho_below(HO_TRACEE_LIFE_MS));
	pid = fork();
	if (pid == 0) {
		execl(ho_self, ho_self, "--tracee", arg_seed, arg_end, NULL);
		_exit(HO_EXEC_FAILED);
	}
	if (pid < 0)
		return;
	if (sys_ptrace(PTRACE_SEIZE, pid, NULL, ho_options())) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return;
	}
	ho_adopt(t, pid, false);
}

/* Resume a stopped tracee: the signal it stopped for, none, or another. */
static void ho_resume(pid_t tid, int sig)
{
	int inject = sig;

	switch (ho_below(6)) {
	case 0:
		inject = 0;
		break;
	case 1:
		inject = ho_below(2) ? SIGUSR1 : 65 + (int)ho_below(100);
		break;
	}
	if (sys_ptrace(PTRACE_CONT, tid, NULL, inject))
		sys_ptrace(PTRACE_CONT, tid, NULL, 0);
}

/*
 * A fork, vfork, clone or exec event: the new child or thread is attached
 * already and gets requests of its own, maybe before its first stop
 * (ESRCH). An exec by a thread other than the leader takes the leader's
 * pid: the thread's own id is gone.
 */
static void ho_event(struct ho_tracer *t, pid_t tid, int event)
{
	unsigned long msg;

	if (sys_ptrace(PTRACE_GETEVENTMSG, tid, NULL, (unsigned long)&msg))
		return;
	switch (event) {
	case PTRACE_EVENT_FORK:
		atomic_fetch_add(&ho->forks, 1);
		break;
	case PTRACE_EVENT_VFORK:
		atomic_fetch_add(&ho->vforks, 1);
		break;
	case PTRACE_EVENT_CLONE:
		atomic_fetch_add(&ho->clones, 1);
		break;
	case PTRACE_EVENT_EXEC:
		atomic_fetch_add(&ho->execs, 1);
		if ((pid_t)msg != tid)
			ho_forget(t, msg);
		return;
	default:
		return;
	}
	ho_adopt(t, msg, true);
	if (ho_below(2))
		ho_some(t, msg, 1);
}

/* A tracee stopped: requests on it, maybe detach, then let it go on. */
static void ho_stopped(struct ho_tracer *t, pid_t tid, int status)
{
	int event = status >> 16, sig = WSTOPSIG(status);

	atomic_fetch_add(&ho->stops, 1);
	if (event)
		ho_event(t, tid, event);
	/* Group stops, events and our interrupts deliver no signal. */
	if (event || sig == SIGTRAP || sig == SIGSTOP)
		sig = 0;
	ho_some(t, tid, 1 + ho_below(4));
	if (!ho_below(25)) {
		atomic_fetch_add(&ho->detaches, 1);
		sys_ptrace(PTRACE_DETACH, tid, NULL, ho_below(2) ? sig : 0);
		ho_forget(t, tid);
		return;
	}
	ho_resume(tid, sig);
	/* And once more while it runs: ESRCH, or it stopped again. */
	if (!ho_below(4))
		ho_some(t, tid, 1);
}

/*
 * Handles the next state change of any tracee; every stop reported is
 * resumed or detached, none is dropped. Returns the tracee, 0 when none
 * is pending (@block false), -1 when there are none left.
 */
static pid_t ho_wait(struct ho_tracer *t, bool block)
{
	int status;
	pid_t tid;

	tid = waitpid(-1, &status, __WALL | (block ? 0 : WNOHANG));
	if (tid < 0) {
		if (errno == ECHILD) {
			t->n = 0;
			ho_publish(t);
		}
		return -1;
	}
	if (!tid)
		return 0;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		atomic_fetch_add(&ho->exits, 1);
		if (WIFEXITED(status) && WEXITSTATUS(status) == HO_EXEC_FAILED) {
			atomic_fetch_add(&ho->exec_failed, 1);
			atomic_fetch_add(&ho->bad, 1);
			fprintf(stderr, "# hostile: tracee %d could not exec %s\n",
				tid, ho_self);
		}
		ho_forget(t, tid);
	} else if (WIFSTOPPED(status)) {
		ho_stopped(t, tid, status);
	}
	return tid;
}

static void ho_tracer(uint64_t seed, int nr, struct ho_slot *slot)
{
	struct ho_tracer t = { .slot = slot };
	pid_t tid;
	int i;

	ho_srand(seed, 1000 + nr);
	ho_maps();
	while (atomic_load(&ho->ops) < ho->limit) {
		if (t.n < HO_TRACEES && (t.n < 2 || !ho_below(8)))
			ho_spawn(&t);
		if (!t.n)
			continue;
		tid = t.tids[ho_below(t.n)];
		if (sys_ptrace(PTRACE_INTERRUPT, tid, NULL, 0)) {
			/* Gone, maybe a thread that exec'ed: reap it. */
			ho_request(PTRACE_BTS_SIZE, tid, NULL, 0);
			ho_forget(&t, tid);
			continue;
		}
		/* The supervisor's watchdog looks at this. */
		atomic_store(&slot->interrupted, tid);
		atomic_store(&slot->waiting, ho_now_ms());
		ho_wait(&t, true);
		atomic_store(&slot->waiting, 0);
		for (i = 0; i < 3 && ho_wait(&t, false) > 0; i++)
			;
	}
	/* Done: the tracees die with us or run out their time. */
	for (i = 0; i < t.n; i++)
		kill(t.tids[i], SIGKILL);
	_exit(0);
}

/* ---- the run ---- */

/*
 * Become the unprivileged tracer uid with a small RLIMIT_MEMLOCK and no
 * capabilities, as an ordinary debugger is.
 */
static int ho_unprivileged(void)
{
	struct rlimit rl = { HO_MEMLOCK, HO_MEMLOCK };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -1;
	if (setgid(HO_UID) || setuid(HO_UID))
		return -1;
	return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static pid_t ho_start_tracer(uint64_t seed, int nr, struct ho_slot *slot)
{
	pid_t pid;

	atomic_store(&slot->waiting, 0);
	atomic_store(&slot->n, 0);
	pid = fork();
	if (pid) {
		atomic_store(&slot->pid, pid > 0 ? pid : 0);
		return pid;
	}
	/* Fault injection for this process and what it forks. */
	ho_write("/proc/self/make-it-fail", "1");
	if (ho_unprivileged())
		_exit(2);
	ho_tracer(seed, nr, slot);
	return 0;
}

/* Where a task is: its state, wait channel and kernel stack. */
static void ho_show(const char *who, pid_t pid)
{
	char path[64], line[256], wchan[64] = "", state[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(wchan, sizeof(wchan), f))
			wchan[0] = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "State:", 6))
			snprintf(state, sizeof(state), "%s", line + 7);
	if (f)
		fclose(f);
	state[strcspn(state, "\n")] = 0;
	ksft_print_msg("watchdog: %s %d: %s, wchan %s\n", who, pid,
		       f ? state : "gone", wchan);
	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		ksft_print_msg("watchdog:   %s", line);
	if (f)
		fclose(f);
}

/* How long the tracer of @slot has waited for a stop, in ms; 0 if not. */
static long ho_waited(struct ho_slot *slot)
{
	long since = atomic_load(&slot->waiting);

	return since ? ho_now_ms() - since : 0;
}

/*
 * A tracer stuck waiting for a stop after a PTRACE_INTERRUPT that
 * succeeded: show where it and its tracees are, then kill it.
 */
static void ho_watchdog(struct ho_slot *slot)
{
	pid_t pid = atomic_load(&slot->pid);
	int i, n;

	if (!pid || ho_waited(slot) < HO_HANG_S * 1000L)
		return;
	ksft_print_msg("watchdog: tracer %d waited %ld ms after PTRACE_INTERRUPT of %d\n",
		       pid, ho_waited(slot), atomic_load(&slot->interrupted));
	ho_show("tracer", pid);
	n = atomic_load(&slot->n);
	for (i = 0; i < n && i < (int)ARRAY_SIZE(slot->tids); i++)
		ho_show("tracee", atomic_load(&slot->tids[i]));
	atomic_store(&slot->waiting, 0);
	if (!kill(pid, SIGKILL)) {
		atomic_fetch_add(&ho->hangs, 1);
		atomic_fetch_add(&ho->bad, 1);
	}
}

static pid_t ho_start_hotplug(void)
{
	char state[4] = "1";
	pid_t pid;

	if (access(HO_CPU1, W_OK))
		return 0;
	pid = fork();
	if (pid)
		return pid;
	while (!atomic_load(&ho->stop)) {
		usleep(HO_HOTPLUG_EVERY_MS * 1000);
		state[0] = state[0] == '1' ? '0' : '1';
		if (!ho_write(HO_CPU1, state) && state[0] == '1')
			atomic_fetch_add(&ho->toggles, 1);
	}
	ho_write(HO_CPU1, "1");
	_exit(0);
}

/*
 * The stack trace filter's range: the text of ds.o, ptrace_bts.o and
 * ds_emulate.o, linked in that order and next to each other
 * (arch/x86/kernel/Makefile). Their functions are named ds_* and
 * ptrace_bts_*, but the compiler places copies of static inline helpers
 * (mmgrab, lock_is_held, ...) and KASAN's constructors among them, so the
 * range is the cluster of those names around ptrace_bts_request, with at
 * most HO_FOREIGN_RUN other symbols in a row inside. It may take in the
 * KUnit suites linked next (ds_hw_*, ds_stress_*): harmless, the filter is
 * also by task. One function of each file must be inside.
 */
static bool ho_ours(const char *name)
{
	if (!strncmp(name, "__pfx_", 6))
		name += 6;
	return !strncmp(name, "ds_", 3) || !strncmp(name, "ptrace_bts_", 11);
}

static const char *const ho_anchors[] = {
	"ds_request_bts_task",		/* ds.c */
	"ptrace_bts_request",		/* ptrace_bts.c */
	"ds_emu_exit_thread",		/* ds_emulate.c */
};

#define HO_MAX_SYMS	200000

struct ho_sym {
	unsigned long	addr;
	bool		ours;
	int		anchor;		/* index in ho_anchors, or -1 */
};

/* The text symbols, in address order; returns their number. */
static int ho_text_syms(struct ho_sym *syms)
{
	char type, name[256], line[512];
	unsigned long addr;
	int n = 0, i;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (n < HO_MAX_SYMS && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3 ||
		    (type != 't' && type != 'T'))
			continue;
		if (n && addr < syms[n - 1].addr)
			break;	/* not sorted: give up */
		syms[n].addr = addr;
		syms[n].ours = ho_ours(name);
		syms[n].anchor = -1;
		for (i = 0; i < (int)ARRAY_SIZE(ho_anchors); i++)
			if (!strcmp(name, ho_anchors[i]))
				syms[n].anchor = i;
		n++;
	}
	fclose(f);
	return n;
}

static int ho_text_range(unsigned long *start, unsigned long *end)
{
	int n, i, lo, hi, mid = -1, covered = 0;
	struct ho_sym *syms;

	*start = *end = 0;
	syms = calloc(HO_MAX_SYMS, sizeof(*syms));
	if (!syms)
		return -1;
	n = ho_text_syms(syms);
	for (i = 0; i < n; i++)
		if (syms[i].anchor == 1)
			mid = i;
	if (mid < 0) {
		free(syms);
		return -1;
	}
	for (lo = mid, i = mid; i >= 0 && lo - i <= HO_FOREIGN_RUN; i--)
		if (syms[i].ours)
			lo = i;
	for (hi = mid, i = mid; i < n && i - hi <= HO_FOREIGN_RUN; i++)
		if (syms[i].ours)
			hi = i;
	for (i = lo; i <= hi; i++)
		if (syms[i].anchor >= 0)
			covered |= 1 << syms[i].anchor;
	*start = syms[lo].addr;
	*end = hi + 1 < n ? syms[hi + 1].addr : syms[hi].addr + 1;
	free(syms);
	for (i = 0; i < (int)ARRAY_SIZE(ho_anchors); i++)
		if (!(covered & 1 << i))
			ksft_print_msg("fault range misses %s\n", ho_anchors[i]);
	return covered == (1 << ARRAY_SIZE(ho_anchors)) - 1 ? 0 : -1;
}

static const char *const ho_fail_attrs[] = { "failslab", "fail_page_alloc" };

static void ho_fault_attr(const char *attr, const char *file, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), HO_DEBUGFS "/%s/%s", attr, file);
	ho_write(path, val);
}

/* Aim both at the series' code; returns 0 when set up. */
static int ho_faults_on(unsigned long start, unsigned long end)
{
	char s[32], e[32];
	unsigned int i;

	snprintf(s, sizeof(s), "%lu", start);
	snprintf(e, sizeof(e), "%lu", end);
	for (i = 0; i < 2; i++) {
		const char *a = ho_fail_attrs[i];

		ho_fault_attr(a, "probability", "0");
		ho_fault_attr(a, "verbose", "0");
		ho_fault_attr(a, "task-filter", "Y");
		ho_fault_attr(a, "ignore-gfp-wait", "N");
		/*
		 * fail_page_alloc: vmalloc's pages are __GFP_HIGHMEM and
		 * order 0, both ignored by default.
		 */
		ho_fault_attr(a, "ignore-gfp-highmem", "N");
		ho_fault_attr(a, "min-order", "0");
		ho_fault_attr(a, "interval", "1");
		ho_fault_attr(a, "space", "0");
		ho_fault_attr(a, "stacktrace-depth", "32");
		ho_fault_attr(a, "require-start", s);
		ho_fault_attr(a, "require-end", e);
		ho_fault_attr(a, "times", HO_FAIL_TIMES);
		ho_fault_attr(a, "probability", HO_FAIL_PROBABILITY);
	}
	return 0;
}

static long ho_faults_left(const char *attr)
{
	char path[128], buf[32] = "";
	int fd;

	snprintf(path, sizeof(path), HO_DEBUGFS "/%s/times", attr);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return strtol(buf, NULL, 0);
}

static void ho_faults_off(void)
{
	unsigned int i;

	for (i = 0; i < 2; i++)
		ho_fault_attr(ho_fail_attrs[i], "probability", "0");
}

/* Runs the fuzzer; returns the number of bad answers. */
static long ho_run(uint64_t seed, long ops)
{
	pid_t tracers[HO_TRACERS], hotplug;
	unsigned long start = 0, end = 0;
	long faults[2], last_kill;
	int i, alive, status, nr = 0;

	ho = mmap(NULL, sizeof(*ho), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ho == MAP_FAILED)
		return 1;
	memset(ho, 0, sizeof(*ho));
	ho->limit = ops;
	ho_srand(seed, 0);

	if (ho_text_range(&start, &end)) {
		ksft_print_msg("%s\n",
			       "the series' text is not in /proc/kallsyms: no faults");
		start = 0;
	} else {
		ksft_print_msg("faults aimed at %#lx-%#lx (ds.c, ptrace_bts.c, ds_emulate.c)\n",
			       start, end);
	}
	if (start && !access(HO_DEBUGFS "/failslab", F_OK))
		ho_faults_on(start, end);
	faults[0] = ho_faults_left("failslab");
	faults[1] = ho_faults_left("fail_page_alloc");

	hotplug = ho_start_hotplug();
	for (i = 0; i < HO_TRACERS; i++)
		tracers[i] = ho_start_tracer(seed, nr++, &ho->slots[i]);
	last_kill = ho_now_ms();
	alive = HO_TRACERS;
	while (alive) {
		usleep(20000);
		/*
		 * Kill one in the middle of whatever it does; start another.
		 * Not one that has waited long for a stop: the watchdog
		 * judges that one.
		 */
		if (ho_now_ms() - last_kill > HO_KILL_EVERY_MS &&
		    atomic_load(&ho->ops) < ops) {
			last_kill = ho_now_ms();
			i = ho_below(HO_TRACERS);
			if (tracers[i] > 0 &&
			    ho_waited(&ho->slots[i]) < HO_SUSPECT_MS &&
			    !kill(tracers[i], SIGKILL))
				atomic_fetch_add(&ho->kills, 1);
		}
		for (i = 0; i < HO_TRACERS; i++) {
			if (tracers[i] <= 0)
				continue;
			ho_watchdog(&ho->slots[i]);
			if (waitpid(tracers[i], &status, WNOHANG) != tracers[i])
				continue;
			if (WIFEXITED(status) && WEXITSTATUS(status)) {
				ksft_print_msg("tracer %d: exit status %d\n",
					       tracers[i], WEXITSTATUS(status));
				atomic_fetch_add(&ho->bad, 1);
			}
			atomic_store(&ho->slots[i].pid, 0);
			tracers[i] = atomic_load(&ho->ops) < ops ?
				     ho_start_tracer(seed, nr++,
						     &ho->slots[i]) : 0;
			if (!tracers[i])
				alive--;
		}
	}
	ho_faults_off();
	atomic_store(&ho->stop, 1);
	if (hotplug > 0)
		waitpid(hotplug, NULL, 0);

	ksft_print_msg("seed %llu: %ld operations, %ld stops\n",
		       (unsigned long long)seed, atomic_load(&ho->ops),
		       atomic_load(&ho->stops));
	ksft_print_msg("events: %ld fork, %ld vfork, %ld clone, %ld exec\n",
		       atomic_load(&ho->forks), atomic_load(&ho->vforks),
		       atomic_load(&ho->clones), atomic_load(&ho->execs));
	ksft_print_msg("%ld attached children and threads, %ld requests on them\n",
		       atomic_load(&ho->adopted), atomic_load(&ho->child_ops));
	ksft_print_msg("%ld tracee exits, %ld detaches, %d tracers, %ld killed\n",
		       atomic_load(&ho->exits), atomic_load(&ho->detaches), nr,
		       atomic_load(&ho->kills));
	ksft_print_msg("%ld CPU 1 toggles, %ld tracers stuck, %ld tracees that could not exec\n",
		       atomic_load(&ho->toggles), atomic_load(&ho->hangs),
		       atomic_load(&ho->exec_failed));
	ksft_print_msg("%ld buffers, %ld ENOMEM, injected: %ld slab, %ld page\n",
		       atomic_load(&ho->granted), atomic_load(&ho->enomem),
		       faults[0] < 0 ? -1 : faults[0] - ho_faults_left("failslab"),
		       faults[1] < 0 ? -1 :
		       faults[1] - ho_faults_left("fail_page_alloc"));
	return atomic_load(&ho->bad);
}

/* ---- the budget ---- */

/* A stopped tracee of this process, seized; 0 on failure. */
static pid_t ho_budget_tracee(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		for (;;)
			pause();
	}
	if (pid < 0 || sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_EXITKILL) ||
	    sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0) ||
	    waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status))
		return 0;
	return pid;
}

static long ho_alloc(pid_t pid, unsigned long size)
{
	struct ptrace_bts_config cfg = {
		.size	= size,
		.flags	= size ? PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC : 0,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)) ? -errno : 0;
}

/* In the second tracer: nothing while the first holds the budget. */
static int ho_budget_second(void)
{
	pid_t pid = ho_budget_tracee();
	long err;

	if (!pid)
		return 10;
	err = ho_alloc(pid, HO_RECORD);
	if (err != -ENOMEM) {
		fprintf(stderr,
			"# a second tracer of the uid got a buffer (%ld) while the first holds RLIMIT_MEMLOCK: the budget is not per user\n",
			err);
		return 11;
	}
	return 0;
}

/*
 * As the tracer uid: exactly RLIMIT_MEMLOCK and not a page more, none for
 * a second tracer of the uid meanwhile, all of it again afterwards. Waits
 * for tracers that died to be refunded (from a workqueue).
 */
static int ho_budget(void)
{
	struct ptrace_bts_config st;
	long err, deadline;
	int status;
	pid_t pid, second;

	if (ho_unprivileged())
		return 1;
	pid = ho_budget_tracee();
	if (!pid)
		return 2;
	deadline = ho_now_ms() + HO_REFUND_WAIT_MS;
	while ((err = ho_alloc(pid, HO_MEMLOCK)) == -ENOMEM &&
	       ho_now_ms() < deadline)
		usleep(100000);
	if (err) {
		fprintf(stderr, "# a buffer of RLIMIT_MEMLOCK: %ld\n", err);
		return 3;
	}
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &st, sizeof(st)) < 0 ||
	    st.size != HO_MEMLOCK / HO_RECORD * HO_RECORD)
		return 4;
	second = fork();
	if (second == 0)
		_exit(ho_budget_second());
	if (waitpid(second, &status, 0) != second || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return 5;
	if (ho_alloc(pid, 0))
		return 6;
	err = ho_alloc(pid, HO_MEMLOCK + HO_PAGE);
	if (err != -ENOMEM) {
		fprintf(stderr, "# a page over RLIMIT_MEMLOCK: %ld\n", err);
		return 7;
	}
	if (ho_alloc(pid, HO_MEMLOCK) || ho_alloc(pid, 0))
		return 8;
	return 0;
}

static void ho_budget_check(struct __test_metadata *_metadata)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(ho_budget());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) {
		TH_LOG("budget check failed at step %d", WEXITSTATUS(status));
	}
}

/* ---- the memory cgroup ---- */

/*
 * RLIMIT_MEMLOCK is per user: without the memory cgroup's charge, tracers
 * in a container could pin memory its memory.max never sees. Tracers in a
 * cgroup with room for HO_MEMCG_GRANTED buffers, their tracees in a
 * sibling; the oracle is the cgroups' own counters, not VmPin.
 */
#define HO_MEMCG_TRACERS	5
#define HO_MEMCG_GRANTED	3
/* The largest buffer the ABI allows, whole pages of it. */
#define HO_MEMCG_BUF		(4L << 20)
/*
 * The tolerance of each comparison of memory.current: it also counts the
 * charges each CPU keeps in stock, up to MEMCG_CHARGE_BATCH (64) pages per
 * CPU, and the pipe pages and page tables the processes touch while they
 * talk. A buffer missing or left over must stand out: the test needs a
 * buffer to be more than twice that.
 */
#define HO_MEMCG_STOCK		(64 * (long)HO_PAGE)
#define HO_MEMCG_SLACK		(64 * (long)HO_PAGE)
#define HO_MEMCG_PATH		256
/* Why ho_memcg_setup() could not: the test skips. */
#define HO_MEMCG_NO_CGROUP2	1
#define HO_MEMCG_NO_MEMCG	2

/* What the supervisor asks a tracer, which answers 0 or an errno. */
enum ho_memcg_cmd {
	HO_MEMCG_ALLOC	= 'a',	/* a buffer of HO_MEMCG_BUF */
	HO_MEMCG_FREE	= 'f',	/* no buffer */
	HO_MEMCG_CHECK	= 'c',	/* the tracee is still there, stopped */
};

struct ho_memcg {
	char	mnt[HO_MEMCG_PATH];		/* the cgroup2 mount */
	bool	mounted;			/* by us, on a temporary dir */
	bool	enabled;			/* +memory at the root by us */
	char	top[HO_MEMCG_PATH + 32];	/* ours, below the root */
	char	tracers[HO_MEMCG_PATH + 48];	/* below top, memory.max */
	char	tracees[HO_MEMCG_PATH + 48];	/* below top, no limit */
	long	tol;				/* bytes */
	pid_t	pid[HO_MEMCG_TRACERS];
	int	cmd[HO_MEMCG_TRACERS];		/* write ends */
	int	ans[HO_MEMCG_TRACERS];		/* read ends */
};

static long ho_memcg_current(const char *dir)
{
	return cgroup_read(dir, "memory.current", NULL);
}

/* Where cgroup2 is mounted already, if it is. */
static bool ho_memcg_find(char *mnt, size_t len)
{
	char dir[HO_MEMCG_PATH], type[64];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mounts", "r");
	if (!f)
		return false;
	while (!found &&
	       fscanf(f, "%*s %255s %63s %*[^\n]", dir, type) == 2)
		found = !strcmp(type, "cgroup2");
	fclose(f);
	if (found)
		snprintf(mnt, len, "%s", dir);
	return found;
}

static void ho_memcg_init(struct ho_memcg *mc)
{
	int i;

	memset(mc, 0, sizeof(*mc));
	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		mc->cmd[i] = -1;
		mc->ans[i] = -1;
	}
	mc->tol = sysconf(_SC_NPROCESSORS_CONF) * HO_MEMCG_STOCK +
		  HO_MEMCG_SLACK;
}

static int ho_memcg_mount(struct ho_memcg *mc)
{
	int err;

	if (ho_memcg_find(mc->mnt, sizeof(mc->mnt)))
		return 0;
	snprintf(mc->mnt, sizeof(mc->mnt), "/tmp/ptrace_bts_memcg.XXXXXX");
	if (!mkdtemp(mc->mnt)) {
		mc->mnt[0] = 0;
		return -1;
	}
	if (mount("cgroup2", mc->mnt, "cgroup2", 0, NULL)) {
		err = errno;
		rmdir(mc->mnt);
		mc->mnt[0] = 0;
		errno = err;
		return err == ENODEV ? HO_MEMCG_NO_CGROUP2 : -1;
	}
	mc->mounted = true;
	return 0;
}

/* 0, HO_MEMCG_NO_* when the kernel cannot, -1 on an error (errno). */
static int ho_memcg_setup(struct ho_memcg *mc)
{
	int err = ho_memcg_mount(mc);

	if (err)
		return err;
	if (!cgroup_lists(mc->mnt, "cgroup.controllers", "memory"))
		return HO_MEMCG_NO_MEMCG;
	if (!cgroup_lists(mc->mnt, "cgroup.subtree_control", "memory")) {
		if (cgroup_write(mc->mnt, "cgroup.subtree_control", "+memory"))
			return -1;
		mc->enabled = true;
	}
	snprintf(mc->top, sizeof(mc->top), "%s/ptrace_bts_memcg.%d", mc->mnt,
		 getpid());
	if (mkdir(mc->top, 0755)) {
		mc->top[0] = 0;
		return -1;
	}
	/* Both children get memory.* files: no process lives in top. */
	if (cgroup_write(mc->top, "cgroup.subtree_control", "+memory"))
		return -1;
	snprintf(mc->tracers, sizeof(mc->tracers), "%s/tracers", mc->top);
	if (mkdir(mc->tracers, 0755)) {
		mc->tracers[0] = 0;
		return -1;
	}
	snprintf(mc->tracees, sizeof(mc->tracees), "%s/tracees", mc->top);
	if (mkdir(mc->tracees, 0755)) {
		mc->tracees[0] = 0;
		return -1;
	}
	return 0;
}

/* After ho_memcg_stop(): the cgroups are empty. */
static void ho_memcg_cleanup(struct ho_memcg *mc)
{
	if (mc->tracees[0])
		rmdir(mc->tracees);
	if (mc->tracers[0])
		rmdir(mc->tracers);
	if (mc->top[0])
		rmdir(mc->top);
	if (mc->enabled)
		cgroup_write(mc->mnt, "cgroup.subtree_control", "-memory");
	if (mc->mounted) {
		umount2(mc->mnt, MNT_DETACH);
		rmdir(mc->mnt);
	}
}

/* Move the calling process into cgroup @dir. */
static int ho_memcg_join(const char *dir)
{
	return cgroup_write(dir, "cgroup.procs", "0");
}

/* In the tracer: a tracee of its own in the sibling cgroup, stopped. */
static pid_t ho_memcg_tracee(const struct ho_memcg *mc)
{
	int p[2], status;
	char ok = 0;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		ok = !ho_memcg_join(mc->tracees);
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	/* Ready once in its cgroup: the baseline has everyone where they stay. */
	if (pid > 0 && (read(p[0], &ok, 1) != 1 || !ok ||
			sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_EXITKILL) ||
			sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0) ||
			waitpid(pid, &status, __WALL) != pid ||
			!WIFSTOPPED(status))) {
		/* Nothing else would end it: the reaper waits for everyone. */
		kill(pid, SIGKILL);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

/*
 * A tracer in the limited cgroup, root with no RLIMIT_MEMLOCK: only the
 * cgroup can refuse it. It answers the supervisor until its pipe closes.
 */
static void ho_memcg_tracer(const struct ho_memcg *mc, int cmd, int ans)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	int err = 0, status;
	pid_t pid = -1;
	char c;

	if (ho_memcg_join(mc->tracers))
		err = 1;
	else if (setrlimit(RLIMIT_MEMLOCK, &rl))
		err = 2;
	else
		pid = ho_memcg_tracee(mc);
	if (!err && pid < 0)
		err = 3;
	if (write(ans, &err, sizeof(err)) != sizeof(err) || err)
		_exit(err);
	while (read(cmd, &c, 1) == 1) {
		switch (c) {
		case HO_MEMCG_ALLOC:
			err = -ho_alloc(pid, HO_MEMCG_BUF);
			break;
		case HO_MEMCG_FREE:
			err = -ho_alloc(pid, 0);
			break;
		default:
			err = waitpid(pid, &status, WNOHANG | __WALL) ? ESRCH : 0;
			break;
		}
		if (write(ans, &err, sizeof(err)) != sizeof(err))
			break;
	}
	_exit(0);
}

/* The tracer's answer: 0 or an errno (its step, once started); -1 if gone. */
static int ho_memcg_answer(struct ho_memcg *mc, int i)
{
	int err;

	if (read(mc->ans[i], &err, sizeof(err)) != sizeof(err))
		return -1;
	return err;
}

static int ho_memcg_ask(struct ho_memcg *mc, int i, char cmd)
{
	if (write(mc->cmd[i], &cmd, 1) != 1)
		return -1;
	return ho_memcg_answer(mc, i);
}

static int ho_memcg_start(struct ho_memcg *mc, int i)
{
	int cmd[2], ans[2], j;

	if (pipe(cmd))
		return -1;
	if (pipe(ans)) {
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	mc->pid[i] = fork();
	if (mc->pid[i] == 0) {
		/* A tracer sees EOF only when no other one holds its pipe. */
		for (j = 0; j < i; j++) {
			close(mc->cmd[j]);
			close(mc->ans[j]);
		}
		close(cmd[1]);
		close(ans[0]);
		ho_memcg_tracer(mc, cmd[0], ans[1]);
	}
	close(cmd[0]);
	close(ans[1]);
	mc->cmd[i] = cmd[1];
	mc->ans[i] = ans[0];
	return mc->pid[i] < 0 ? -1 : ho_memcg_answer(mc, i);
}

/* Close the pipes, so every tracer exits, and reap whoever is left. */
static void ho_memcg_stop(struct ho_memcg *mc)
{
	int i;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		if (mc->cmd[i] >= 0)
			close(mc->cmd[i]);
		if (mc->ans[i] >= 0)
			close(mc->ans[i]);
		mc->cmd[i] = -1;
		mc->ans[i] = -1;
	}
	while (waitpid(-1, NULL, __WALL) > 0)
		;
}

/* memory.current of @dir once at most @bytes, or after the refund wait. */
static long ho_memcg_settle(const char *dir, long bytes)
{
	long deadline = ho_now_ms() + HO_REFUND_WAIT_MS, cur;

	while ((cur = ho_memcg_current(dir)) > bytes && ho_now_ms() < deadline)
		usleep(100000);
	return cur;
}

/* Tracer @i asks for a buffer: its answer, and what its cgroup counted. */
static int ho_memcg_charge(struct ho_memcg *mc, int i, long *charged,
			   long *vmalloc)
{
	long cur = ho_memcg_current(mc->tracers);
	long vm = cgroup_read(mc->tracers, "memory.stat", "vmalloc");
	int err = ho_memcg_ask(mc, i, HO_MEMCG_ALLOC);

	*charged = ho_memcg_current(mc->tracers) - cur;
	*vmalloc = cgroup_read(mc->tracers, "memory.stat", "vmalloc") - vm;
	ksft_print_msg("memcg: tracer %d: %s, memory.current %+ld KiB, vmalloc %+ld KiB\n",
		       i, err ? strerror(err) : "granted", *charged >> 10,
		       *vmalloc >> 10);
	return err;
}

/*
 * Each of the first HO_MEMCG_GRANTED tracers is charged one buffer; the
 * others, the cgroup full, get ENOMEM and are charged nothing. The
 * cgroup's limit refused them, its OOM killer was never considered, and
 * the tracees' cgroup paid for nothing.
 */
static void ho_memcg_fill(struct __test_metadata *_metadata,
			  struct ho_memcg *mc)
{
	long peer = ho_memcg_current(mc->tracees);
	long charged, vm, max, oom, kills;
	int i, err;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		err = ho_memcg_charge(mc, i, &charged, &vm);
		if (i < HO_MEMCG_GRANTED) {
			EXPECT_EQ(0, err);
			EXPECT_GE(mc->tol, labs(charged - HO_MEMCG_BUF)) {
				TH_LOG("tracer %d's cgroup was charged %ld bytes for %ld",
				       i, charged, HO_MEMCG_BUF);
			}
			EXPECT_GE(mc->tol, labs(vm - HO_MEMCG_BUF));
		} else {
			EXPECT_EQ(ENOMEM, err);
			EXPECT_GE(mc->tol, labs(charged)) {
				TH_LOG("a refused tracer's cgroup kept %ld bytes",
				       charged);
			}
			EXPECT_GE(mc->tol, labs(vm));
		}
	}
	peer = ho_memcg_current(mc->tracees) - peer;
	max = cgroup_read(mc->tracers, "memory.events", "max");
	oom = cgroup_read(mc->tracers, "memory.events", "oom");
	kills = cgroup_read(mc->tracers, "memory.events", "oom_kill");
	ksft_print_msg("memcg: the tracees' cgroup %+ld KiB; max %ld, oom %ld, oom_kill %ld\n",
		       peer >> 10, max, oom, kills);
	EXPECT_GE(mc->tol, labs(peer)) {
		TH_LOG("the tracees' cgroup was charged for the buffers");
	}
	EXPECT_LT(0, max);
	EXPECT_EQ(0, oom);
	EXPECT_EQ(0, kills);
}

/* A buffer given back is uncharged, and the room goes to a refused one. */
static void ho_memcg_refund(struct __test_metadata *_metadata,
			    struct ho_memcg *mc, long base)
{
	long held = base + (HO_MEMCG_GRANTED - 1) * HO_MEMCG_BUF;
	long cur, charged, vm;

	EXPECT_EQ(0, ho_memcg_ask(mc, 0, HO_MEMCG_FREE));
	/* vfree()d after an RCU grace period, from a workqueue. */
	cur = ho_memcg_settle(mc->tracers, held + mc->tol);
	ksft_print_msg("memcg: tracer 0 freed its buffer: %+ld KiB over the baseline\n",
		       (cur - base) >> 10);
	EXPECT_GE(mc->tol, labs(cur - held));
	EXPECT_EQ(0, ho_memcg_charge(mc, HO_MEMCG_GRANTED, &charged, &vm));
	EXPECT_GE(mc->tol, labs(charged - HO_MEMCG_BUF));
}

/*
 * Every tracer and tracee lived to the end; once they exit, holding
 * buffers or not, the cgroup is back below its baseline.
 */
static void ho_memcg_end(struct __test_metadata *_metadata,
			 struct ho_memcg *mc, long base)
{
	int i, status;
	long cur;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		EXPECT_EQ(0, ho_memcg_ask(mc, i, HO_MEMCG_CHECK)) {
			TH_LOG("tracer %d's tracee is gone", i);
		}
	}
	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		close(mc->cmd[i]);
		mc->cmd[i] = -1;
		EXPECT_EQ(mc->pid[i], waitpid(mc->pid[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status)) {
			TH_LOG("tracer %d: status %#x", i, status);
		}
	}
	ho_memcg_stop(mc);
	cur = ho_memcg_settle(mc->tracers, base + mc->tol);
	ksft_print_msg("memcg: all exited: memory.current %ld KiB, baseline %ld KiB\n",
		       cur >> 10, base >> 10);
	EXPECT_GE(base + mc->tol, cur);
	EXPECT_EQ(0, cgroup_read(mc->tracers, "memory.events", "oom_kill"));
	EXPECT_EQ(0, cgroup_read(mc->tracees, "memory.events", "oom_kill"));
}

/* ---- kmemleak ---- */

/* Suspects naming the series' functions; the others are listed. */
static int ho_kmemleak(int *others)
{
	char line[512], block[8192] = "";
	int ours = 0, fd;
	bool in = false;
	FILE *f;

	*others = 0;
	sleep(HO_KMEMLEAK_SETTLE_S);
	fd = open(HO_DEBUGFS "/kmemleak", O_WRONLY);
	if (fd < 0)
		return -1;
	if (write(fd, "scan", 4) != 4) {
		close(fd);
		return -1;
	}
	close(fd);
	f = fopen(HO_DEBUGFS "/kmemleak", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f) || in) {
		bool last = feof(f);

		if (!strncmp(line, "unreferenced object", 19) || last) {
			if (in) {
				if (strstr(block, " ds_") ||
				    strstr(block, " ptrace_bts_"))
					ours++;
				else
					(*others)++;
				fprintf(stderr, "# %s", block);
			}
			in = !last;
			block[0] = 0;
			if (last)
				break;
		}
		if (in && strlen(block) + strlen(line) < sizeof(block))
			strcat(block, line);
	}
	fclose(f);
	return ours;
}

FIXTURE(hostile) {
};

FIXTURE_SETUP(hostile)
{
	if (geteuid())
		SKIP(return, "needs root: it sets up fault injection and drops to uid %d",
		     HO_UID);
	/* A kernel without the requests, or with neither backend. */
	errno = 0;
	sys_ptrace(PTRACE_BTS_SIZE, getpid(), NULL, 0);
	if (errno == EIO)
		SKIP(return, "no PTRACE_BTS_* requests (EIO)");
}

FIXTURE_TEARDOWN(hostile)
{
}

/* A tracer of the uid has all of its budget, a second one none meanwhile. */
TEST_F(hostile, budget_before)
{
	ho_budget_check(_metadata);
}

/*
 * The fuzzer: every answer documented. Its operations take about a minute
 * on a KASAN kernel under software emulation, and more than linearly
 * longer on a slower machine: the tracee lifetimes, the kills and the CPU
 * toggles are timed, so a slower machine sees more of them per operation.
 * The timeout only bounds a hang.
 */
TEST_F_TIMEOUT(hostile, fuzz, 420)
{
	EXPECT_EQ(0, ho_run(HO_SEED, HO_OPS));
	/* The paths of a traced fork, clone and exec were taken. */
	EXPECT_LT(0, atomic_load(&ho->forks) + atomic_load(&ho->vforks));
	EXPECT_LT(0, atomic_load(&ho->clones));
	EXPECT_LT(0, atomic_load(&ho->execs));
}

/* ... and after it, with tracers killed and tracees gone, all of it again. */
TEST_F(hostile, budget_after)
{
	ho_budget_check(_metadata);
}

/*
 * Issue 14, finding 7: forked tracers in a memory cgroup with memory.max
 * set. The cgroup pays for their buffers, a full one refuses a buffer
 * with ENOMEM instead of OOM-killing, and neither leaks a charge.
 */
TEST_F_TIMEOUT(hostile, memcg, 120)
{
	char max[32] = "";
	struct ho_memcg mc;
	int i, err;
	long base;

	ho_memcg_init(&mc);
	if (2 * mc.tol >= HO_MEMCG_BUF)
		SKIP(return, "too many CPUs: their charge stocks hide a buffer");
	err = ho_memcg_setup(&mc);
	if (err > 0) {
		ho_memcg_cleanup(&mc);
		SKIP(return, "%s: buffers cannot be charged to a cgroup here",
		     err == HO_MEMCG_NO_CGROUP2 ? "no cgroup2 (CONFIG_CGROUPS)" :
						  "no memory controller (CONFIG_MEMCG)");
	}
	ASSERT_EQ(0, err) {
		TH_LOG("setting up the cgroups: %m");
		ho_memcg_cleanup(&mc);
	}
	/* The tracees of tracers that exit are reaped here. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < HO_MEMCG_TRACERS && !err; i++)
		err = ho_memcg_start(&mc, i);
	base = ho_memcg_current(mc.tracers);
	if (!err) {
		snprintf(max, sizeof(max), "%ld", base + HO_MEMCG_BUF / 2 +
			 HO_MEMCG_GRANTED * HO_MEMCG_BUF);
		err = cgroup_write(mc.tracers, "memory.max", max);
	}
	EXPECT_EQ(0, err) {
		TH_LOG("tracer %d: step %d, memory.max %s: %m", i - 1, err, max);
	}
	if (!err) {
		ksft_print_msg("memcg: baseline %ld KiB, memory.max %ld KiB, tolerance %ld KiB\n",
			       base >> 10, atol(max) >> 10, mc.tol >> 10);
		ho_memcg_fill(_metadata, &mc);
		ho_memcg_refund(_metadata, &mc, base);
		ho_memcg_end(_metadata, &mc, base);
	}
	ho_memcg_stop(&mc);
	ho_memcg_cleanup(&mc);
}

/* Nothing the series allocated is leaked. */
TEST_F_TIMEOUT(hostile, kmemleak, 60)
{
	int ours, others;

	if (access(HO_DEBUGFS "/kmemleak", F_OK))
		SKIP(return, "no kmemleak");
	ours = ho_kmemleak(&others);
	ASSERT_LE(0, ours);
	ksft_print_msg("kmemleak: %d suspects of the series, %d others\n",
		       ours, others);
	EXPECT_EQ(0, ours);
}

int main(int argc, char **argv)
{
	unsigned long long seed = HO_SEED;
	long ops = 0;
	int i;

	ho_self = "/proc/self/exe";
	if (argc == 4 && !strcmp(argv[1], "--tracee"))
		ho_tracee(strtoull(argv[2], NULL, 0), strtol(argv[3], NULL, 0));
	for (i = 1; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--ops"))
			ops = strtol(argv[i + 1], NULL, 0);
		else
			break;
	}
	if (!ops)
		return test_harness_run(argc, argv);
	i = ho_run(seed, ops);
	printf("%d bad answers\n", i);
	return i ? 1 : 0;
}
