// SPDX-License-Identifier: GPL-2.0
/*
 * bench-reads: how fast a tracer reads a branch trace, what each request
 * costs, and whether a request disturbs the other CPUs.
 *
 * Usage: bench-reads [-b any|hw|emu] [-r REPS] [-k REQUESTS] [-m BYTES]
 *
 * A child pinned to CPU 1 runs a loop until its buffer (4 MiB) is full,
 * then stops; the tracer runs on CPU 0. Prints "name value" lines:
 *   records            records in the full buffer
 *   memcpy_us          memcpy() of the buffer's bytes in user space
 *   drain_us           PTRACE_BTS_DRAIN of the full buffer (each rep
 *                      fills the buffer again)
 *   read_us            PTRACE_BTS_READ of the whole buffer in one call
 *   read4k_ns_rec      READ through a 4 KiB buffer, per record
 *   get_ns_rec         PTRACE_BTS_GET, per record
 *   running_read_us    READ of the whole buffer while the child runs
 *   req_<R>_us         the latency of request R (stopped tracee); DRAIN's
 *                      is that of an empty buffer (the first empties it)
 *   req_<R>_ipi        IPIs per request R on the other CPUs, less the
 *                      rate a second of getppid() calls sees
 *   run_<R>_us/_ipi    the same while the tracee runs (those that may)
 * Each time is the minimum over REPS (3).
 */
#include "bench.h"
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#define TRACER_CPU	0
#define TRACEE_CPU	1

static unsigned int backend = PTRACE_BTS_BACKEND_ANY;
static unsigned long fill_iters;
static unsigned int buf_bytes = 4u << 20;

static double fmin2(double a, double b)
{
	return a < b ? a : b;
}

static void spin(unsigned long n)
{
	asm volatile("1:	dec %%rcx\n"
		     "	jnz 1b\n" : "+c" (n) : : "cc");
}

/* The child: stopped at first, then loops and stops after each fill. */
static void child(void)
{
	pin(TRACEE_CPU);
	if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
		_exit(1);
	for (;;) {
		raise(SIGSTOP);
		spin(fill_iters ? fill_iters : 1UL << 40);
	}
}

/* The child's stop at its raise(SIGSTOP), and no other. */
static void wait_stop(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
	    WSTOPSIG(status) != SIGSTOP) {
		fprintf(stderr, "bench-reads: child status %#x\n", status);
		exit(2);
	}
}

static void cont(pid_t pid)
{
	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
		die("PTRACE_CONT");
}

static void config(pid_t pid, unsigned int flags)
{
	struct ptrace_bts_config cfg = {
		/* the buffer's size: the struct's is the request's data */
		.size = buf_bytes,
		.flags = flags,
		.backend = backend,
	};

	if (sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))
		die("PTRACE_BTS_CONFIG");
}

/* Run the child until it stops again: one fill of the buffer. */
static void fill(pid_t pid)
{
	cont(pid);
	wait_stop(pid);
}

static long read_all(pid_t pid, void *buf, unsigned long bytes)
{
	struct ptrace_bts_read rd = {
		.buf = (unsigned long)buf,
		.size = bytes,
	};
	long n, total = 0;

	do {
		n = sys_ptrace(PTRACE_BTS_READ, pid, &rd, sizeof(rd));
		if (n < 0)
			die("PTRACE_BTS_READ");
		total += n;
		rd.seq = rd.next;
	} while (n && bytes < buf_bytes);
	return total;
}

/* Interrupts of the kinds that are IPIs, on every CPU but the tracer's. */
static unsigned long ipis(void)
{
	static const char * const kinds[] = { "CAL:", "TLB:", "RES:" };
	unsigned long sum = 0, v;
	char line[1024], *p, *end;
	FILE *f = fopen("/proc/interrupts", "r");
	int i, cpu, ncpus = 0;

	if (!f || !fgets(line, sizeof(line), f))
		die("/proc/interrupts");
	/* the header names the CPUs, one column each */
	for (p = line; (p = strstr(p, "CPU")); p += 3)
		ncpus++;
	while (fgets(line, sizeof(line), f)) {
		for (p = line; *p == ' '; p++)
			;
		for (i = 0; i < 3; i++) {
			if (strncmp(p, kinds[i], 4))
				continue;
			p += 4;
			for (cpu = 0; cpu < ncpus; cpu++, p = end) {
				v = strtoul(p, &end, 10);
				if (end == p)
					break;
				if (cpu != TRACER_CPU)
					sum += v;
			}
		}
	}
	fclose(f);
	return sum;
}

struct req {
	const char *name;
	long request;
	bool running;	/* allowed on a running tracee */
};

static const struct req reqs[] = {
	{ "CONFIG", PTRACE_BTS_CONFIG, false },
	{ "STATUS", PTRACE_BTS_STATUS, true },
	{ "SIZE", PTRACE_BTS_SIZE, true },
	{ "READ", PTRACE_BTS_READ, true },
	{ "DRAIN", PTRACE_BTS_DRAIN, false },
};

static void issue(pid_t pid, const struct req *r, struct bts_struct *rec)
{
	struct ptrace_bts_config cfg = {
		.size = buf_bytes, .flags = PTRACE_BTS_O_TRACE,
		.backend = backend,
	};
	struct ptrace_bts_read rd = {
		.buf = (unsigned long)rec, .size = sizeof(*rec),
	};
	long ret;

	switch (r->request) {
	case PTRACE_BTS_CONFIG:
		/* the same buffer: only the flags are set again */
		ret = sys_ptrace(r->request, pid, &cfg, sizeof(cfg));
		break;
	case PTRACE_BTS_STATUS:
		ret = sys_ptrace(r->request, pid, &cfg, sizeof(cfg));
		break;
	case PTRACE_BTS_READ:
		ret = sys_ptrace(r->request, pid, &rd, sizeof(rd));
		break;
	case PTRACE_BTS_DRAIN:
		ret = sys_ptrace(r->request, pid, rec, buf_bytes);
		break;
	default:
		ret = sys_ptrace(r->request, pid, NULL, 0);
	}
	if (ret < 0)
		die(r->name);
}

static void requests(pid_t pid, const char *prefix, bool running, int k,
		     int reps, struct bts_struct *buf)
{
	double best, t0, t1, base_rate, start, took;
	unsigned long i0;
	size_t i;
	int j, rep;

	/* what the other CPUs get anyway, per second: a second of getppid() */
	i0 = ipis();
	t0 = now_us();
	do {
		syscall(SYS_getppid);
		t1 = now_us();
	} while (t1 - t0 < 1e6);
	base_rate = (ipis() - i0) / (t1 - t0);
	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		if (running && !reqs[i].running)
			continue;
		best = 1e99;
		i0 = ipis();
		start = now_us();
		for (rep = 0; rep < reps; rep++) {
			t0 = now_us();
			for (j = 0; j < k; j++)
				issue(pid, &reqs[i], buf);
			best = fmin2(best, (now_us() - t0) / k);
		}
		took = now_us() - start;
		printf("%s_%s_us %.2f\n", prefix, reqs[i].name, best);
		printf("%s_%s_ipi %.3f\n", prefix, reqs[i].name,
		       ((double)(ipis() - i0) - base_rate * took) / (k * reps));
	}
}

int main(int argc, char **argv)
{
	int reps = 3, k = 1000, opt, rep;
	double t0, best;
	struct bts_struct *buf, one;
	void *copy;
	long n, records, i;
	pid_t pid;

	while ((opt = getopt(argc, argv, "b:r:k:m:")) != -1) {
		switch (opt) {
		case 'b':
			backend = !strcmp(optarg, "hw") ? PTRACE_BTS_BACKEND_HARDWARE :
				  !strcmp(optarg, "emu") ? PTRACE_BTS_BACKEND_EMULATED :
				  PTRACE_BTS_BACKEND_ANY;
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'k':
			k = atoi(optarg);
			break;
		case 'm':
			buf_bytes = strtoul(optarg, NULL, 0);
			break;
		default:
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	buf = malloc(buf_bytes);
	copy = malloc(buf_bytes);
	if (!buf || !copy)
		die("malloc");
	memset(buf, 1, buf_bytes);
	memset(copy, 0, buf_bytes);
	/* a branch per iteration, and a tenth more than the buffer holds */
	fill_iters = buf_bytes / sizeof(struct bts_struct) * 11 / 10;
	pin(TRACER_CPU);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid)
		child();
	wait_stop(pid);
	sys_ptrace(PTRACE_SETOPTIONS, pid, NULL, PTRACE_O_EXITKILL);
	config(pid, PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC);
	fill(pid);
	records = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	printf("records %ld\n", records);
	if (records != buf_bytes / sizeof(*buf)) {
		fprintf(stderr, "bench-reads: %ld records in a full buffer of %u bytes\n",
			records, buf_bytes);
		return 2;
	}

	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		t0 = now_us();
		memcpy(copy, buf, records * sizeof(*buf));
		asm volatile("" : : "r" (copy) : "memory");
		best = fmin2(best, now_us() - t0);
	}
	printf("memcpy_us %.1f\n", best);

	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		t0 = now_us();
		n = read_all(pid, buf, buf_bytes);
		best = fmin2(best, now_us() - t0);
		if (n != records)
			die("READ: short");
	}
	printf("read_us %.1f\n", best);

	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		t0 = now_us();
		n = read_all(pid, buf, 4096);
		best = fmin2(best, (now_us() - t0) * 1e3 / n);
	}
	printf("read4k_ns_rec %.1f\n", best);

	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		t0 = now_us();
		for (i = 0; i < records && i < 20000; i++)
			if (sys_ptrace(PTRACE_BTS_GET, pid, &one, i))
				die("PTRACE_BTS_GET");
		best = fmin2(best, (now_us() - t0) * 1e3 / i);
	}
	printf("get_ns_rec %.1f\n", best);

	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		if (rep)
			fill(pid);
		t0 = now_us();
		n = sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, buf_bytes);
		best = fmin2(best, now_us() - t0);
		if (n != records)
			die("DRAIN: short");
	}
	printf("drain_us %.1f\n", best);

	fill(pid);
	requests(pid, "req", false, k, reps, buf);

	/* from here on the child loops until killed */
	fill(pid);
	if (sys_ptrace(PTRACE_POKEDATA, pid, &fill_iters, 0))
		die("PTRACE_POKEDATA");
	cont(pid);
	usleep(100000);
	best = 1e99;
	for (rep = 0; rep < reps; rep++) {
		t0 = now_us();
		read_all(pid, buf, buf_bytes);
		best = fmin2(best, now_us() - t0);
	}
	printf("running_read_us %.1f\n", best);
	requests(pid, "run", true, k, reps, buf);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}
