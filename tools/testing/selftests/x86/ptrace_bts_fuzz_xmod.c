// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_fuzz: code rewritten by other threads, the tracer (int3
 * through /proc/PID/mem) or a uprobe while the traced thread runs it.
 */
#define _GNU_SOURCE
#include "ptrace_bts_fuzz.h"

#define XM_BUF_SIZE		(4UL << 20)	/* the largest trace buffer */
#define XM_MARK			0x5a5a0100UL	/* TF's bit, no flags' bit 1 */
#define XM_FLAGS_FIXED		0x2

/* The word below the stack after NOP (the mark) or PUSHF (the flags). */
static int xm_check_pushf(long r, long arg)
{
	if (r == (long)XM_MARK)
		return 0;
	if ((r & XM_FLAGS_FIXED) && !(r & FZ_TF))
		return 1;
	return -1;	/* the mark spoilt, or flags with TF */
}

/* -CF: POPF loaded the flags with CF set that PUSHF stored. */
static int xm_check_popf(long r, long arg)
{
	return r == 0 ? 0 : r == -1 ? 1 : -1;
}

/* jz taken when arg is 0, jnz when it is not: which one ran. */
int xm_check_jcc(long r, long arg)
{
	if (r != 0 && r != 1)
		return -1;
	return (r == 1) == (arg == 0) ? 0 : 1;
}

/* Taken: 1; not taken: 0; the nop form never takes it. */
static int xm_check_jcc_nop(long r, long arg)
{
	if (r == 1)
		return arg == 0 ? 0 : -1;
	return r == 0 ? (arg == 0 ? 1 : 0) : -1;
}

/*
 *	mov %rsp,%rax; push $XM_MARK; add $8,%rsp	the mark below the stack
 * site:	nop | pushf (with nop after it)
 *	mov -8(%rax),%rcx; mov %rax,%rsp; mov %rcx,%rax; ret
 */
static const uint8_t xm_pushf_head[] = {
	0x48, 0x89, 0xe0, 0x68, 0x00, 0x01, 0x5a, 0x5a, 0x48, 0x83, 0xc4, 0x08,
};

static const uint8_t xm_pushf_tail[] = {
	0x48, 0x8b, 0x48, 0xf8, 0x48, 0x89, 0xc4, 0x48, 0x89, 0xc8, 0xc3,
};

/*
 *	mov %rsp,%rax; clc; pushf; orb $1,(%rsp)	flags with CF set
 * site:	nop | popf (with nop after it)
 *	mov %rax,%rsp; sbb %rax,%rax; ret
 */
static const uint8_t xm_popf_head[] = {
	0x48, 0x89, 0xe0, 0xf8, 0x9c, 0x80, 0x0c, 0x24, 0x01,
};

static const uint8_t xm_popf_tail[] = {
	0x48, 0x89, 0xc4, 0x48, 0x19, 0xc0, 0xc3,
};

/*
 *	test %esi,%esi
 * site:	jz +3 | jnz +3
 *	xor %eax,%eax; ret; mov $1,%eax; ret
 */
static const uint8_t xm_jcc_head[] = { 0x85, 0xf6 };

static const uint8_t xm_jcc_tail[] = {
	0x31, 0xc0, 0xc3, 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3,
};

/*
 *	mov %rsp,%r8; test %esi,%esi
 * site:	jz +0x51 | nop; push %rcx
 *	mov %r8,%rsp; xor %eax,%eax; ret
 * site + 0x53:	mov $1,%eax; ret
 */
static const uint8_t xm_jnop_head[] = { 0x49, 0x89, 0xe0, 0x85, 0xf6 };

static const uint8_t xm_jnop_tail[] = { 0x4c, 0x89, 0xc4, 0x31, 0xc0, 0xc3 };

static const uint8_t xm_jnop_stub[] = { 0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3 };

#define XM_CODE_OF(_head, _tail)					\
	.head = _head, .head_len = sizeof(_head),			\
	.tail = _tail, .tail_len = sizeof(_tail)

const struct xm_form xm_forms[] = {
	/* equal lengths: 90 90 against 9c 90 */
	{ XM_CODE_OF(xm_pushf_head, xm_pushf_tail), .check = xm_check_pushf,
	  .site = { 0x90, 0x90 }, .alt = { 0x9c, 0x90 } },
	/* different lengths: 66 90 (one instruction) against 9c 90 */
	{ XM_CODE_OF(xm_pushf_head, xm_pushf_tail), .check = xm_check_pushf,
	  .site = { 0x66, 0x90 }, .alt = { 0x9c, 0x90 } },
	{ XM_CODE_OF(xm_popf_head, xm_popf_tail), .check = xm_check_popf,
	  .site = { 0x90, 0x90 }, .alt = { 0x9d, 0x90 } },
	{ XM_CODE_OF(xm_popf_head, xm_popf_tail), .check = xm_check_popf,
	  .site = { 0x66, 0x90 }, .alt = { 0x9d, 0x90 } },
	/* the same shape: jz +3 against jnz +3 */
	{ XM_CODE_OF(xm_jcc_head, xm_jcc_tail), .check = xm_check_jcc,
	  .site = { 0x74, 0x03 }, .alt = { 0x75, 0x03 }, .jcc = true,
	  .target = 5 },
	/* other lengths: jz +0x51 against nop, push %rcx */
	{ XM_CODE_OF(xm_jnop_head, xm_jnop_tail), .check = xm_check_jcc_nop,
	  .site = { 0x74, 0x51 }, .alt = { 0x90, 0x51 }, .jcc = true,
	  .target = 0x53, .stub = xm_jnop_stub,
	  .stub_len = sizeof(xm_jnop_stub) },
	/* pushf, with an int3 put there and taken away by the tracer */
	{ XM_CODE_OF(xm_pushf_head, xm_pushf_tail), .check = xm_check_pushf,
	  .site = { 0x9c, 0x90 }, .int3 = true },
	/* pushf, a uprobe before it registered and removed over and over */
	{ XM_CODE_OF(xm_pushf_head, xm_pushf_tail), .check = xm_check_pushf,
	  .site = { 0x9c, 0x90 }, .uprobe = true },
};

/* Lay out the function so that its head ends at the site. */
static void xm_build(const struct xm_form *form, uint8_t *page)
{
	memset(page, 0xcc, 4096);
	memcpy(page + XM_SITE_OFF - form->head_len, form->head,
	       form->head_len);
	memcpy(page + XM_SITE_OFF, form->site, sizeof(form->site));
	memcpy(page + XM_SITE_OFF + sizeof(form->site), form->tail,
	       form->tail_len);
	if (form->stub)
		memcpy(page + XM_SITE_OFF + form->target, form->stub,
		       form->stub_len);
}

/* No thread of the tracee rewrites the code: the tracer does. */
bool xm_by_tracer(const struct xm_form *form)
{
	return form->int3 || form->uprobe;
}

static struct xm_result *xm_res;
static const struct xm_form *xm_form;

static void xm_pin(pid_t tid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(tid, sizeof(set), &set);
}

/*
 * Store one of the two forms at random, at random short intervals: under
 * TCG, strict turns at full speed can fall into step with the retranslation
 * of the traced thread's code and show it one form only.
 */
static void *xm_rewriter(void *arg)
{
	uint16_t *site = (uint16_t *)(XM_ALIAS + XM_SITE_OFF);
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	unsigned long n = 0, spin;
	uint16_t forms[2];

	memcpy(&forms[0], xm_form->site, sizeof(forms[0]));
	memcpy(&forms[1], xm_form->alt, sizeof(forms[1]));
	xm_pin(0, 1);
	while (!__atomic_load_n(&xm_res->stop, __ATOMIC_RELAXED)) {
		rng = fz_mix(rng, n++);
		__atomic_store_n(site, forms[rng & 1], __ATOMIC_RELAXED);
		/* not PAUSE: under TCG it leaves the vCPU's loop each time */
		for (spin = (rng >> 8) & 63; spin; spin--)
			__asm__ __volatile__("" ::: "memory");
	}
	xm_res->rewrites = n;
	return NULL;
}

/* Take the traced thread's CPU from it now and then. */
static void *xm_spinner(void *arg)
{
	xm_pin(0, 0);
	while (!__atomic_load_n(&xm_res->stop, __ATOMIC_RELAXED))
		;
	return NULL;
}

/*
 * Both forms ran, or the tracer's int3 or uprobe was hit: the run showed
 * what it is about. Or XM_SECONDS went by without it, which the test
 * then reports.
 */
static bool xm_enough(const struct timespec *start)
{
	struct timespec now;

	if (xm_by_tracer(xm_form) ? xm_res->hits :
	    xm_res->seen[0] && xm_res->seen[1])
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec - start->tv_sec > XM_SECONDS;
}

static void xm_tracee(void)
{
	unsigned long entry = XM_CODE + XM_SITE_OFF - xm_form->head_len;
	long (*fn)(long unused, long arg) = (void *)entry;
	unsigned int eax, ebx, ecx, edx;
	pthread_t rewriter, spinner;
	struct timespec start;
	struct rusage ru;
	unsigned long i;
	long r;
	int fd, k;

	fd = memfd_create("ptrace_bts_xmod", 0);
	if (fd < 0 || ftruncate(fd, 4096) ||
	    mmap((void *)XM_ALIAS, 4096, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0) != (void *)XM_ALIAS)
		_exit(90);
	xm_build(xm_form, (uint8_t *)XM_ALIAS);
	if (mmap((void *)XM_CODE, 4096, PROT_READ | PROT_EXEC,
		 (xm_by_tracer(xm_form) ? MAP_PRIVATE : MAP_SHARED) |
		 MAP_FIXED_NOREPLACE, fd, 0) != (void *)XM_CODE)
		_exit(90);
	xm_res->memfd = fd;
	xm_pin(0, 0);
	if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
		_exit(91);
	raise(SIGSTOP);		/* the tracer starts the trace */
	if ((!xm_by_tracer(xm_form) &&
	     pthread_create(&rewriter, NULL, xm_rewriter, NULL)) ||
	    pthread_create(&spinner, NULL, xm_spinner, NULL))
		_exit(92);
	while (!xm_by_tracer(xm_form) &&
	       !memcmp((void *)XM_ALIAS + XM_SITE_OFF, xm_form->site, 2))
		sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < XM_CALLS || !xm_enough(&start); i++) {
		/*
		 * Untraced, nothing else orders the rewrites before the
		 * fetch (SDM "Handling Cross-Modifying Code"): a CPU may run
		 * one form for ever. Traced, the return from each trap does.
		 */
		__cpuid(0, eax, ebx, ecx, edx);
		r = fn(0, i & 1);
		k = xm_form->check(r, i & 1);
		xm_res->calls++;
		if (k < 0) {
			if (!xm_res->bad++) {
				xm_res->first_bad = r;
				xm_res->first_arg = i & 1;
			}
			continue;
		}
		xm_res->seen[k]++;
		if (xm_form->jcc && r == 1)
			xm_res->taken++;
	}
	__atomic_store_n(&xm_res->stop, 1, __ATOMIC_RELAXED);
	xm_res->done = 1;
	if (!xm_by_tracer(xm_form))
		pthread_join(rewriter, NULL);
	pthread_join(spinner, NULL);
	if (!getrusage(RUSAGE_THREAD, &ru))
		xm_res->preempted = ru.ru_nivcsw;
	raise(SIGSTOP);		/* the tracer reads the trace */
	_exit(0);
}

/* The records from the site: to its target only, one per taken call. */
static void xm_records(pid_t pid, struct xm_result *res)
{
	size_t size = XM_BUF_SIZE;
	struct bts_struct *rec = malloc(size);
	long n, i;

	n = rec ? sys_ptrace(PTRACE_BTS_DRAIN, pid, rec, size) : -1;
	if (n < 0) {
		snprintf(res->fail, sizeof(res->fail), "DRAIN: %m");
		free(rec);
		return;
	}
	res->records = n;
	for (i = 0; i < n; i++) {
		if (rec[i].qualifier != BTS_BRANCH)
			continue;
		if (rec[i].variant.lbr.from == XM_SITE + 1)
			res->stray++;
		if (rec[i].variant.lbr.from != XM_SITE)
			continue;
		if (rec[i].variant.lbr.to == XM_SITE + xm_form->target)
			res->from_site++;
		else
			res->stray++;
	}
	free(rec);
}

/* A stop other than the last one: a leaked TF traps; one is enough. */
static int xm_stray_stop(pid_t pid, int status, struct xm_result *res)
{
	if (!WIFSTOPPED(status)) {
		snprintf(res->fail, sizeof(res->fail),
			 "the tracee ended: status %#x", status);
		return -1;
	}
	res->stops++;
	snprintf(res->fail, sizeof(res->fail), "signal %d after %lu calls",
		 WSTOPSIG(status), res->calls);
	return -1;
}

/* Resume the tracee until its last stop. */
static int xm_wait(pid_t pid, struct xm_result *res)
{
	int status;

	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0) ||
	    waitpid(pid, &status, 0) != pid) {
		snprintf(res->fail, sizeof(res->fail), "%s",
			 errno == EINTR ? "hangs" : "lost the tracee");
		return -1;
	}
	if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP && res->done)
		return 0;
	return xm_stray_stop(pid, status, res);
}

/*
 * Resume the tracee, then put an int3 at the site and take it away again
 * through /proc/PID/mem while it runs. When it hits one, back to the site,
 * without the int3, as a debugger steps over its breakpoint.
 */
static int xm_int3(pid_t pid, struct xm_result *res)
{
	const struct timespec pause = { .tv_nsec = 20000 };
	const uint8_t int3 = 0xcc, pushf = 0x9c;
	struct user_regs_struct regs;
	char path[64];
	int fd, status, err = -1;
	pid_t got;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDWR);
	if (fd < 0 || sys_ptrace(PTRACE_CONT, pid, NULL, 0)) {
		snprintf(res->fail, sizeof(res->fail), "cannot start: %m");
		goto out;
	}
	for (;;) {
		if (pwrite(fd, &int3, 1, XM_SITE) != 1)
			break;
		nanosleep(&pause, NULL);
		if (pwrite(fd, &pushf, 1, XM_SITE) != 1)
			break;
		got = waitpid(pid, &status, WNOHANG);
		if (!got) {
			nanosleep(&pause, NULL);
			continue;
		}
		if (got != pid)
			break;
		if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP &&
		    res->done) {
			err = 0;
			goto out;
		}
		if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP ||
		    sys_ptrace(PTRACE_GETREGS, pid, NULL,
			       (unsigned long)&regs) ||
		    regs.rip != XM_SITE + 1) {
			xm_stray_stop(pid, status, res);
			goto out;
		}
		res->hits++;
		regs.rip = XM_SITE;
		if (sys_ptrace(PTRACE_SETREGS, pid, NULL, (unsigned long)&regs) ||
		    sys_ptrace(PTRACE_CONT, pid, NULL, 0))
			break;
	}
	snprintf(res->fail, sizeof(res->fail), "%s",
		 errno == EINTR ? "hangs" : "lost the tracee");
out:
	if (fd >= 0)
		close(fd);
	return err;
}

#define XM_TRACEFS	"/sys/kernel/tracing"
#define XM_UPROBE	"ptrace_bts_xmod/site"
/*
 * The uprobe sits on the add before the PUSHF: uprobes' out-of-line step
 * of a PUSHF stores its own TF in the flags (as of 6.12), untraced too.
 */
#define XM_UPROBE_OFF	(XM_SITE_OFF - 4)

static int xm_tracefs(const char *file, const char *text)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), XM_TRACEFS "/%s", file);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The hits of the uprobe on @file, from uprobe_profile. */
static unsigned long xm_uprobe_hits(const char *file)
{
	unsigned long hits = 0;
	char line[512], *p;
	FILE *f;

	f = fopen(XM_TRACEFS "/uprobe_profile", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		p = strrchr(line, ' ');
		if (strstr(line, file) && p)
			hits = strtoul(p, NULL, 10);
	}
	fclose(f);
	return hits;
}

/*
 * Resume the tracee, then register a uprobe by the site, enable it,
 * disable and remove it, over and over while it runs: each registration
 * replaces the page under the running thread, and each hit single-steps
 * the PUSHF out of line, with uprobes' own TF.
 */
static int xm_uprobe(pid_t pid, struct xm_result *res)
{
	const struct timespec pause = { .tv_nsec = 200000 };
	char cmd[128], file[64];
	int status, err = -1;
	pid_t got;

	if (access(XM_TRACEFS "/uprobe_events", F_OK))
		mount("tracefs", XM_TRACEFS, "tracefs", 0, NULL);
	xm_tracefs("uprobe_events", "-:" XM_UPROBE "\n");
	snprintf(file, sizeof(file), "/proc/%d/fd/%d ", pid, res->memfd);
	snprintf(cmd, sizeof(cmd), "p:" XM_UPROBE " %.*s:%#x\n",
		 (int)strlen(file) - 1, file, XM_UPROBE_OFF);
	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0)) {
		snprintf(res->fail, sizeof(res->fail), "cannot start: %m");
		return -1;
	}
	for (;;) {
		if (xm_tracefs("uprobe_events", cmd) ||
		    xm_tracefs("events/" XM_UPROBE "/enable", "1")) {
			snprintf(res->fail, sizeof(res->fail),
				 "cannot register %s: %m", cmd);
			break;
		}
		res->rewrites++;
		nanosleep(&pause, NULL);
		res->hits += xm_uprobe_hits(file);
		if (xm_tracefs("events/" XM_UPROBE "/enable", "0") ||
		    xm_tracefs("uprobe_events", "-:" XM_UPROBE "\n")) {
			snprintf(res->fail, sizeof(res->fail),
				 "cannot remove the uprobe: %m");
			break;
		}
		got = waitpid(pid, &status, WNOHANG);
		if (!got) {
			nanosleep(&pause, NULL);
			continue;
		}
		if (got == pid && WIFSTOPPED(status) &&
		    WSTOPSIG(status) == SIGSTOP && res->done)
			err = 0;
		else if (got == pid)
			xm_stray_stop(pid, status, res);
		else
			snprintf(res->fail, sizeof(res->fail), "lost the tracee");
		break;
	}
	xm_tracefs("events/" XM_UPROBE "/enable", "0");
	xm_tracefs("uprobe_events", "-:" XM_UPROBE "\n");
	return err;
}

/*
 * Run @form in a tracee traced with @backend (-1: ptraced, no branch
 * trace). Returns 0, or -1 with res->fail saying why.
 */
int xm_run(const struct xm_form *form, int backend,
	   struct xm_result *res)
{
	struct ptrace_bts_config cfg = {
		.size = XM_BUF_SIZE,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
		.backend = backend,
	};
	int status;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	xm_res = res;
	xm_form = form;
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid)
		xm_tracee();
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status) ||
	    sys_ptrace(PTRACE_SETOPTIONS, pid, NULL, PTRACE_O_EXITKILL) ||
	    (backend >= 0 &&
	     sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))) {
		snprintf(res->fail, sizeof(res->fail), "cannot start: %m");
		goto kill;
	}
	alarm(FZ_HANG_SECONDS * 6);
	if (form->int3 ? xm_int3(pid, res) :
	    form->uprobe ? xm_uprobe(pid, res) : xm_wait(pid, res))
		goto kill;
	alarm(0);
	if (backend >= 0)
		xm_records(pid, res);
kill:
	alarm(0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return res->fail[0] ? -1 : 0;
}
