// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_fuzz: running a block in the tracees and comparing what they
 * end with.
 */
#define _GNU_SOURCE
#include "ptrace_bts_fuzz.h"

/*
 * The tracee's only handler: fold the signal, its code, where it hit and
 * the flags of the signal frame (which would show a leaked TF) into the
 * log. Resume at %r14 but after a single-step trap: the items arm it
 * right before each instruction that faults or traps (int1 is a fault on
 * some hypervisors).
 */
static void fz_handler(int sig, siginfo_t *si, void *ctx)
{
	greg_t *gr = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	struct fz_log *log = (struct fz_log *)FZ_LOG;

	log->signals++;
	log->digest = fz_mix(log->digest, sig);
	log->digest = fz_mix(log->digest, si->si_code);
	log->digest = fz_mix(log->digest, gr[REG_RIP]);
	log->digest = fz_mix(log->digest, gr[REG_EFL]);
	log->digest = fz_mix(log->digest, gr[REG_RSP]);
	if (sig != SIGTRAP || si->si_code != TRAP_TRACE)
		gr[REG_RIP] = gr[REG_R14];
}

/* Only there to interrupt the tracer's waitpid(): EINTR is the news. */
static void fz_on_alarm(int sig)
{
}

/*
 * The tracee: handlers on an alternate stack, then a stop; the tracer
 * moves it to each block by its registers.
 */
static void fz_tracee_main(void)
{
	static char altstack[1 << 16];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	struct sigaction sa = {
		.sa_sigaction = fz_handler,
		.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER,
	};
	static const int sigs[] = { SIGTRAP, SIGILL, SIGSEGV, SIGBUS, SIGFPE };
	unsigned int i;

	if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0) || sigaltstack(&ss, NULL))
		_exit(90);
	for (i = 0; i < ARRAY_SIZE(sigs); i++)
		if (sigaction(sigs[i], &sa, NULL))
			_exit(91);
	raise(SIGSTOP);
	_exit(92);	/* never: the tracer sends it to the blocks */
}

static int fz_tracee_start(struct fz_tracee *t, int backend)
{
	struct ptrace_bts_config cfg = {
		.size = FZ_RECORDS * sizeof(struct bts_struct),
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
		.backend = backend,
	};
	int status;

	t->backend = backend;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0)
		fz_tracee_main();
	if (waitpid(t->pid, &status, 0) != t->pid || !WIFSTOPPED(status) ||
	    WSTOPSIG(status) != SIGSTOP)
		return -1;
	if (sys_ptrace(PTRACE_SETOPTIONS, t->pid, NULL, PTRACE_O_EXITKILL) ||
	    sys_ptrace(PTRACE_GETREGS, t->pid, NULL, (unsigned long)&t->regs0) ||
	    sys_ptrace(PTRACE_GETFPREGS, t->pid, NULL, (unsigned long)&t->fp0))
		return -1;
	if (backend >= 0 &&
	    sys_ptrace(PTRACE_BTS_CONFIG, t->pid, &cfg, sizeof(cfg)))
		return -1;
	return 0;
}

static void fz_tracee_stop(struct fz_tracee *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
	}
	t->pid = 0;
}

/* The block's start: registers and memory from its seed alone. */
static void fz_setup(const struct fz_tracee *t, uint64_t seed,
		     struct user_regs_struct *regs,
		     struct user_fpregs_struct *fp)
{
	struct fz_gen g = { .rng = fz_mix(seed, 0) };
	unsigned long long *gpr[] = {
		&regs->rax, &regs->rcx, &regs->rdx, &regs->rbp, &regs->rsi,
		&regs->rdi, &regs->r8, &regs->r9, &regs->r10, &regs->r11,
		&regs->r12, &regs->r13, &regs->r15,
	};
	uint8_t *data = (uint8_t *)FZ_DATA;
	unsigned int i;

	*regs = t->regs0;
	for (i = 0; i < ARRAY_SIZE(gpr); i++)
		*gpr[i] = fz_below(&g, 4) ? fz_rand(&g) : fz_below(&g, 8);
	regs->rbx = FZ_DATA;
	regs->r14 = FZ_CODE;
	regs->rsp = FZ_STACK_TOP;
	regs->rip = FZ_CODE;
	regs->eflags = 0x202 | (fz_rand(&g) & FZ_ARITH_FLAGS);
	regs->cs = FZ_USER_CS;
	regs->ss = FZ_USER_DS;

	*fp = t->fp0;
	fp->mxcsr = 0x1f80;
	for (i = 0; i < ARRAY_SIZE(fp->xmm_space); i++)
		fp->xmm_space[i] = fz_rand(&g);

	for (i = 0; i < FZ_DATA_SIZE; i++)
		data[i] = fz_rand(&g);
	memset((void *)FZ_LOG, 0, sizeof(struct fz_log));
}

static void fz_read_end(const struct fz_tracee *t, struct fz_state *s)
{
	uint8_t xsave[8192];
	struct iovec iov = { .iov_base = xsave, .iov_len = sizeof(xsave) };
	uint64_t xstate_bv;

	if (sys_ptrace(PTRACE_GETREGS, t->pid, NULL, (unsigned long)&s->regs) ||
	    sys_ptrace(PTRACE_GETFPREGS, t->pid, NULL, (unsigned long)&s->fp)) {
		snprintf(s->fail, sizeof(s->fail), "cannot read registers: %m");
		return;
	}
	memset(s->ymmh, 0, sizeof(s->ymmh));
	/* AVX's upper halves: offset 576 of the standard XSAVE layout */
	if (fz_has_avx &&
	    !sys_ptrace(PTRACE_GETREGSET, t->pid, (void *)NT_X86_XSTATE,
			(unsigned long)&iov) && iov.iov_len >= 576 + 256) {
		memcpy(&xstate_bv, xsave + 512, sizeof(xstate_bv));
		if (xstate_bv & 4)
			memcpy(s->ymmh, xsave + 576, sizeof(s->ymmh));
	}
	memcpy(s->data, (void *)FZ_DATA, FZ_DATA_SIZE);
	s->nrec = 0;
	if (t->backend < 0)
		return;
	s->nrec = sys_ptrace(PTRACE_BTS_SIZE, t->pid, NULL, 0);
	if (s->nrec < 0 || s->nrec >= FZ_RECORDS ||
	    sys_ptrace(PTRACE_BTS_DRAIN, t->pid, s->rec,
		       sizeof(s->rec)) != s->nrec)
		snprintf(s->fail, sizeof(s->fail),
			 "%ld records: none read or the buffer wrapped",
			 s->nrec);
}

/*
 * Run the block at FZ_CODE in @t until its final int3 at @end; every other
 * signal goes to the tracee's handler. Returns false when the tracee is
 * gone (and says why in s->fail).
 */
static bool fz_run(struct fz_tracee *t, uint64_t seed, uint32_t end,
		   struct fz_state *s)
{
	struct user_regs_struct regs;
	struct user_fpregs_struct fp;
	unsigned int stops = 0;
	int status, sig = 0;

	s->fail[0] = '\0';
	fz_setup(t, seed, &regs, &fp);
	if (sys_ptrace(PTRACE_SETREGS, t->pid, NULL, (unsigned long)&regs) ||
	    sys_ptrace(PTRACE_SETFPREGS, t->pid, NULL, (unsigned long)&fp)) {
		snprintf(s->fail, sizeof(s->fail), "cannot set registers: %m");
		return false;
	}
	alarm(FZ_HANG_SECONDS);
	for (;;) {
		if (sys_ptrace(PTRACE_CONT, t->pid, NULL, sig)) {
			snprintf(s->fail, sizeof(s->fail), "lost the tracee");
			break;
		}
		if (waitpid(t->pid, &status, 0) != t->pid) {
			snprintf(s->fail, sizeof(s->fail), "%s",
				 errno == EINTR ? "hangs" : "lost the tracee");
			break;
		}
		if (!WIFSTOPPED(status)) {
			snprintf(s->fail, sizeof(s->fail),
				 "the tracee ended: status %#x", status);
			break;
		}
		sig = WSTOPSIG(status);
		if (sys_ptrace(PTRACE_GETREGS, t->pid, NULL,
			       (unsigned long)&regs))
			regs.rip = 0;
		if (sig == SIGTRAP && regs.rip == end + 1UL) {
			alarm(0);
			fz_read_end(t, s);
			return true;
		}
		if (++stops > FZ_MAX_STOPS) {
			siginfo_t si = { 0 };

			sys_ptrace(PTRACE_GETSIGINFO, t->pid, NULL,
				   (unsigned long)&si);
			snprintf(s->fail, sizeof(s->fail),
				 "%u stops, the last: signal %d code %d at %#llx",
				 stops, sig, si.si_code, regs.rip);
			break;
		}
	}
	alarm(0);
	fz_tracee_stop(t);
	return false;
}

static const char *fz_name(int backend)
{
	switch (backend) {
	case PTRACE_BTS_BACKEND_HARDWARE:
		return "hardware";
	case PTRACE_BTS_BACKEND_EMULATED:
		return "emulated";
	case PTRACE_BTS_BACKEND_ANY:
		return "traced";
	default:
		return "untraced";
	}
}

static bool fz_same_regs(const struct fz_state *a, const struct fz_state *b,
			 char *why, size_t len)
{
	static const char *const names[] = {
		"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9",
		"r8", "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip",
		"cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es",
		"fs", "gs",
	};
	const unsigned long long *x = (const void *)&a->regs;
	const unsigned long long *y = (const void *)&b->regs;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (x[i] != y[i]) {
			snprintf(why, len, "%s %#llx and %#llx", names[i],
				 x[i], y[i]);
			return false;
		}
	if (a->fp.mxcsr != b->fp.mxcsr ||
	    memcmp(a->fp.xmm_space, b->fp.xmm_space, sizeof(a->fp.xmm_space)) ||
	    memcmp(a->fp.st_space, b->fp.st_space, sizeof(a->fp.st_space)) ||
	    a->fp.swd != b->fp.swd) {
		snprintf(why, len, "the x87/SSE state");
		return false;
	}
	if (memcmp(a->ymmh, b->ymmh, sizeof(a->ymmh))) {
		snprintf(why, len, "the upper halves of the YMM registers");
		return false;
	}
	return true;
}

static bool fz_same(const struct fz_state *a, const struct fz_state *b,
		    char *why, size_t len)
{
	const struct fz_log *la = (const void *)(a->data + (FZ_LOG - FZ_DATA));
	const struct fz_log *lb = (const void *)(b->data + (FZ_LOG - FZ_DATA));
	size_t i;

	if (!fz_same_regs(a, b, why, len))
		return false;
	if (la->signals != lb->signals || la->digest != lb->digest) {
		snprintf(why, len, "signals: %llu and %llu, digests differ",
			 (unsigned long long)la->signals,
			 (unsigned long long)lb->signals);
		return false;
	}
	for (i = 0; i < FZ_DATA_SIZE; i++)
		if (a->data[i] != b->data[i]) {
			snprintf(why, len, "memory at %#lx: %#x and %#x",
				 FZ_DATA + i, a->data[i], b->data[i]);
			return false;
		}
	return true;
}

static bool fz_same_records(const struct fz_state *a, const struct fz_state *b,
			    char *why, size_t len)
{
	long i;

	for (i = 0; i < a->nrec && i < b->nrec; i++)
		if (memcmp(&a->rec[i], &b->rec[i], sizeof(a->rec[i])))
			break;
	if (i == a->nrec && i == b->nrec)
		return true;
	snprintf(why, len,
		 "%ld and %ld records, first divergence at %ld: %#llx -> %#llx and %#llx -> %#llx",
		 a->nrec, b->nrec, i,
		 i < a->nrec ? (unsigned long long)a->rec[i].variant.lbr.from : 0,
		 i < a->nrec ? (unsigned long long)a->rec[i].variant.lbr.to : 0,
		 i < b->nrec ? (unsigned long long)b->rec[i].variant.lbr.from : 0,
		 i < b->nrec ? (unsigned long long)b->rec[i].variant.lbr.to : 0);
	return false;
}

static int fz_start(struct fz_ctx *c, unsigned int i)
{
	if (c->tracee[i].pid)
		return 0;
	return fz_tracee_start(&c->tracee[i], c->tracee[i].backend);
}

/*
 * Run @b on every tracee. Returns true if all agree; else @why says how
 * they differ.
 */
static bool fz_agree(struct fz_ctx *c, struct fz_block *b, char *why,
		     size_t len)
{
	uint32_t end = fz_block_code(b, &c->gen);
	char diff[256];
	unsigned int i;

	memcpy((void *)FZ_CODE, c->gen.buf, c->gen.len);
	for (i = 0; i < c->nr_tracees; i++) {
		if (fz_start(c, i)) {
			snprintf(why, len, "cannot start the %s tracee: %m",
				 fz_name(c->tracee[i].backend));
			return false;
		}
		c->runs++;
		if (!fz_run(&c->tracee[i], b->seed, end, c->state[i]) ||
		    c->state[i]->fail[0]) {
			snprintf(why, len, "%s: %s",
				 fz_name(c->tracee[i].backend),
				 c->state[i]->fail);
			return false;
		}
		c->records += c->state[i]->nrec;
	}
	for (i = 1; i < c->nr_tracees; i++)
		if (!fz_same(c->state[0], c->state[i], diff, sizeof(diff))) {
			snprintf(why, len, "untraced and %s differ: %s",
				 fz_name(c->tracee[i].backend), diff);
			return false;
		}
	for (i = 2; i < c->nr_tracees; i++)
		if (!fz_same_records(c->state[1], c->state[i], diff,
				     sizeof(diff))) {
			snprintf(why, len, "%s and %s records differ: %s",
				 fz_name(c->tracee[1].backend),
				 fz_name(c->tracee[i].backend), diff);
			return false;
		}
	return true;
}

void fz_dump(struct fz_ctx *c, struct fz_block *b)
{
	unsigned int i;
	size_t j;

	fz_block_code(b, &c->gen);
	for (i = 0; i < b->nr; i++) {
		if (!b->in[i])
			continue;
		printf("#   item %u %s at %#lx:", i, fz_items[b->kind[i]].name,
		       FZ_CODE + b->start[i]);
		for (j = b->start[i]; j < b->start[i + 1]; j++)
			printf(" %02x", c->gen.buf[j]);
		printf("\n");
	}
}

/*
 * Shrink a diverging block: leave out each item in turn, and keep it out
 * if the block still diverges (in any way).
 */
static void fz_shrink(struct fz_ctx *c, struct fz_block *b)
{
	char why[512];
	unsigned int i;

	for (i = 0; i < b->nr; i++) {
		b->in[i] = false;
		if (fz_agree(c, b, why, sizeof(why)))
			b->in[i] = true;
	}
	fz_agree(c, b, why, sizeof(why));
	printf("# smallest block that diverges: %s\n", why);
	fz_dump(c, b);
}

int fz_init(struct fz_ctx *c, int backend)
{
	struct sigaction alarm_action = { .sa_handler = fz_on_alarm };
	unsigned int eax, ebx, ecx, edx, i;
	void *code, *data;

	memset(c, 0, sizeof(*c));
	if (__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		fz_has_avx = (ecx & bit_AVX) && (ecx & bit_OSXSAVE);
	if (__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx))
		fz_has_xop = fz_has_avx && (ecx & bit_XOP);
	/* "AuthenticAMD" (or Hygon's, which reads branches as AMD does) */
	if (__get_cpuid(0, &eax, &ebx, &ecx, &edx))
		fz_amd = (ebx == 0x68747541 && ecx == 0x444d4163 &&
			  edx == 0x69746e65) ||
			 (ebx == 0x6f677948 && ecx == 0x656e6975 &&
			  edx == 0x6e65476e);
	code = mmap((void *)FZ_CODE, FZ_CODE_SIZE,
		    PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	data = mmap((void *)FZ_DATA, FZ_DATA_SIZE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (code != (void *)FZ_CODE || data != (void *)FZ_DATA)
		return -1;
	c->tracee[0].backend = -1;
	c->tracee[1].backend = backend;
	c->nr_tracees = 2;
	if (backend == PTRACE_BTS_BACKEND_HARDWARE) {
		c->tracee[2].backend = PTRACE_BTS_BACKEND_EMULATED;
		c->nr_tracees = 3;
	}
	for (i = 0; i < c->nr_tracees; i++) {
		c->state[i] = malloc(sizeof(*c->state[i]));
		if (!c->state[i])
			return -1;
	}
	/* no SA_RESTART: the alarm interrupts the tracer's waitpid() */
	sigaction(SIGALRM, &alarm_action, NULL);
	return 0;
}

void fz_fini(struct fz_ctx *c)
{
	unsigned int i;

	for (i = 0; i < c->nr_tracees; i++) {
		fz_tracee_stop(&c->tracee[i]);
		free(c->state[i]);
	}
	munmap((void *)FZ_CODE, FZ_CODE_SIZE);
	munmap((void *)FZ_DATA, FZ_DATA_SIZE);
}

/*
 * Block @n of @seed. Worker @w of @workers takes every @workers-th block,
 * so the blocks of a seed are the same however many workers run them.
 */
static uint64_t fz_block_seed(uint64_t seed, unsigned long n)
{
	return fz_mix(seed, n);
}

/* Run @b; on a divergence print it, shrink it and return 1. */
int fz_one(struct fz_ctx *c, struct fz_block *b, const char *where)
{
	char why[512];

	c->blocks++;
	if (fz_agree(c, b, why, sizeof(why)))
		return 0;
	printf("# %s (--block-seed %#llx): %s\n", where,
	       (unsigned long long)b->seed, why);
	fz_shrink(c, b);
	return 1;
}

/*
 * Worker @w of @workers: the blocks below @blocks that are its own, up to
 * the first divergence. Returns the number of divergences (0 or 1).
 */
static int fz_fuzz(struct fz_ctx *c, uint64_t seed, unsigned long blocks,
		   unsigned int w, unsigned int workers)
{
	struct fz_block b;
	char where[64];
	unsigned long n;

	for (n = w; n < blocks; n += workers) {
		fz_block_init(&b, fz_block_seed(seed, n));
		snprintf(where, sizeof(where), "seed %#llx block %lu",
			 (unsigned long long)seed, n);
		if (fz_one(c, &b, where))
			return 1;
	}
	return 0;
}

/*
 * Run the blocks in @workers processes at once (one per CPU: TCG runs
 * vCPUs in parallel), each with its own tracees and mappings. Returns the
 * number of divergences, or -1 when a worker could not run.
 */
int fz_parallel(uint64_t seed, unsigned long blocks, int backend,
		unsigned int workers, struct fz_tally *sum)
{
	int fds[2], status, bad = 0;
	struct fz_tally t;
	struct fz_ctx c;
	unsigned int w;
	pid_t pid;

	memset(sum, 0, sizeof(*sum));
	if (pipe(fds))
		return -1;
	for (w = 0; w < workers; w++) {
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid)
			continue;
		close(fds[0]);
		memset(&t, 0, sizeof(t));
		if (fz_init(&c, backend)) {
			perror("ptrace_bts_fuzz: mapping the blocks");
			_exit(2);
		}
		t.bad = fz_fuzz(&c, seed, blocks, w, workers);
		t.blocks = c.blocks;
		t.runs = c.runs;
		t.records = c.records;
		fflush(stdout);
		fz_fini(&c);
		if (write(fds[1], &t, sizeof(t)) != sizeof(t))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	for (w = 0; w < workers; w++) {
		if (read(fds[0], &t, sizeof(t)) != sizeof(t)) {
			bad = -1;
			break;
		}
		sum->blocks += t.blocks;
		sum->runs += t.runs;
		sum->records += t.records;
		sum->bad += t.bad;
	}
	close(fds[0]);
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad = -1;
	return bad < 0 ? bad : sum->bad;
}

unsigned int fz_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n >= 2 ? 2 : 1;
}
