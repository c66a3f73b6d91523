/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of ptrace_bts_hostile share: its bounds, the state the
 * tracers share, and the functions the test cases call.
 */
#ifndef PTRACE_BTS_HOSTILE_H
#define PTRACE_BTS_HOSTILE_H

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

#include "../kselftest.h"
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

/* ptrace_bts_hostile_ops.c */
extern struct ho_shared *ho;
void ho_srand(uint64_t seed, uint64_t stream);
uint64_t ho_rand(void);
uint64_t ho_below(uint64_t n);
long ho_now_ms(void);
int ho_write(const char *path, const char *val);
extern const char *ho_self;
void ho_tracee(uint64_t seed, long end);
void ho_maps(void);
long ho_request(long req, pid_t pid, void *addr, unsigned long data);
void ho_one(pid_t pid);

/* ptrace_bts_hostile_run.c */
int ho_unprivileged(void);
long ho_run(uint64_t seed, long ops);
int ho_kmemleak(int *others);

/* ptrace_bts_hostile_memcg.c */
int ho_budget(void);
long ho_memcg_current(const char *dir);
void ho_memcg_init(struct ho_memcg *mc);
int ho_memcg_setup(struct ho_memcg *mc);
void ho_memcg_cleanup(struct ho_memcg *mc);
int ho_memcg_ask(struct ho_memcg *mc, int i, char cmd);
int ho_memcg_start(struct ho_memcg *mc, int i);
void ho_memcg_stop(struct ho_memcg *mc);
long ho_memcg_settle(const char *dir, long bytes);
int ho_memcg_charge(struct ho_memcg *mc, int i, long *charged,
		    long *vmalloc);

#endif /* PTRACE_BTS_HOSTILE_H */
