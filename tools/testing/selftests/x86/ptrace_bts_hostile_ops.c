// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_hostile: the random numbers, the tracees, and the random
 * PTRACE_BTS_* requests with the answers each may get.
 */
#define _GNU_SOURCE
#include "ptrace_bts_hostile.h"

struct ho_shared *ho;

/* xorshift64*: one stream per process, from the seed and its number. */
static uint64_t ho_rnd_state;

void ho_srand(uint64_t seed, uint64_t stream)
{
	ho_rnd_state = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (stream << 32 | stream);
	if (!ho_rnd_state)
		ho_rnd_state = 1;
}

uint64_t ho_rand(void)
{
	ho_rnd_state ^= ho_rnd_state >> 12;
	ho_rnd_state ^= ho_rnd_state << 25;
	ho_rnd_state ^= ho_rnd_state >> 27;
	return ho_rnd_state * 0x2545f4914f6cdd1dULL;
}

uint64_t ho_below(uint64_t n)
{
	return n ? ho_rand() % n : 0;
}

long ho_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ho_write(const char *path, const char *val)
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

const char *ho_self;

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
void ho_tracee(uint64_t seed, long end)
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

void ho_maps(void)
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
		       (ho_below(3) ? 0 : PTRACE_BTS_O_SIGNAL) |
		       (ho_below(3) ? 0 : PTRACE_BTS_O_STOP);
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
		       err == ENOMEM || err == EDQUOT || err == EBUSY ||
		       err == EOPNOTSUPP;
	case PTRACE_BTS_STATUS:
		return err == EFAULT;
	case PTRACE_BTS_GET:
		return err == EINVAL || err == EFAULT;
	case PTRACE_BTS_DRAIN:
		return err == EINVAL || err == EFAULT || err == ENOMEM;
	case PTRACE_BTS_READ:
		return err == EINVAL || err == E2BIG || err == EFAULT ||
		       err == ENOMEM || err == ERANGE;
	}
	return false;
}

static const char *const ho_names[] = {
	"CONFIG", "STATUS", "SIZE", "GET", "CLEAR", "DRAIN", "READ",
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
long ho_request(long req, pid_t pid, void *addr, unsigned long data)
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
	if (good && p == &cfg && cfg.flags & ~0x3fU)
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

/*
 * READ from a number the trace has, one it has not yet, or anything, into
 * a buffer of any size at any address; the argument itself good or not.
 */
static void ho_read(pid_t pid)
{
	struct ptrace_bts_config st = { 0 };
	struct ptrace_bts_read rd = { 0 };
	unsigned long len = sizeof(rd);
	bool good;
	void *p = &rd;

	ho_request(PTRACE_BTS_STATUS, pid, &st, sizeof(st));
	switch (ho_below(4)) {
	case 0:
		rd.seq = 0;
		break;
	case 1:
		rd.seq = st.next;
		break;
	case 2:
		rd.seq = st.next + 1;
		break;
	default:
		rd.seq = ho_rand();
		break;
	}
	rd.size = ho_below(2) ? ho_len() : ho_rand();
	rd.buf = (unsigned long)ho_pointer(rd.size < HO_PAGE ? rd.size : 1,
					   &good);
	if (!ho_below(4)) {
		len = ho_len();
		p = ho_pointer(len < HO_PAGE ? len : sizeof(rd), &good);
		if (p == ho_rw || p == ho_edge + HO_PAGE - sizeof(rd))
			memcpy(p, &rd, sizeof(rd));
	}
	ho_request(PTRACE_BTS_READ, pid, p, len);
}

/* A random PTRACE_BTS_* request on @pid. */
void ho_one(pid_t pid)
{
	struct ptrace_bts_config st;
	unsigned long len;
	bool good;

	switch (ho_below(9)) {
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
	case 6:
		ho_read(pid);
		break;
	default:
		ho_drain(pid);
		break;
	}
}
