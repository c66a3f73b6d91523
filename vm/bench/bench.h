/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmark programs of make bench (mk/bench.py) share: a clock,
 * CPU time, pinning, and ptrace without libc's variadic wrapper.
 */
#ifndef BENCH_H
#define BENCH_H

#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

static inline double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU time of this process and of its reaped children, in µs. */
static inline double cpu_us(void)
{
	struct rusage self, kids;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	return (self.ru_utime.tv_sec + self.ru_stime.tv_sec +
		kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) * 1e6 +
	       self.ru_utime.tv_usec + self.ru_stime.tv_usec +
	       kids.ru_utime.tv_usec + kids.ru_stime.tv_usec;
}

static inline long sys_ptrace(long req, pid_t pid, void *addr,
			      unsigned long data)
{
	return syscall(SYS_ptrace, req, pid, addr, (void *)data);
}

static inline void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	exit(2);
}

/* Pin the caller (and what it forks from now on) to one CPU; -1: any. */
static inline void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
}

#endif
