// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, code the tracer cannot simply read:
 * execute-only pages, pages the program never runs, and the out-of-line
 * steps of uprobes.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

#ifdef __x86_64__
/*
 * Execute-only code: a protection key that denies data access keeps the
 * tracee, and the kernel acting for it (copy_from_user()), from reading
 * the page it runs. The emulated backend must still decode each step
 * there, to record the branches and to take the forced TF out of what
 * PUSHF stores.
 *
 *	int3				<- start
 *	xor %eax, %eax
 *	mov $5, %ecx
 * loop:
 *	add %ecx, %eax
 *	dec %ecx
 * jnz:
 *	jnz loop			taken 4 times
 * call:
 *	call sub
 * back:
 *	pushf				the flags the program sees
 *	pop %rdx
 * jmp:
 *	jmp end
 *	nop
 * end:
 *	int3				<- end
 *	ret
 * sub:
 *	add $100, %eax
 * ret:
 *	ret
 */
static const unsigned char xonly_code[] = {
	0xcc,				/* 0: int3 */
	0x31, 0xc0,			/* 1: xor %eax, %eax */
	0xb9, 0x05, 0x00, 0x00, 0x00,	/* 3: mov $5, %ecx */
	0x01, 0xc8,			/* 8: add %ecx, %eax */
	0xff, 0xc9,			/* 10: dec %ecx */
	0x75, 0xfa,			/* 12: jnz 8 */
	0xe8, 0x0b, 0x00, 0x00, 0x00,	/* 14: call 30 */
	0x9c,				/* 19: pushf */
	0x5a,				/* 20: pop %rdx */
	0xeb, 0x01,			/* 21: jmp 24 */
	0x90,				/* 23: nop */
	0xcc,				/* 24: int3 */
	0xc3,				/* 25: ret */
	0x90, 0x90, 0x90, 0x90,		/* 26: padding */
	0x83, 0xc0, 0x64,		/* 30: add $100, %eax */
	0xc3,				/* 33: ret */
};

#define XONLY_START	1
#define XONLY_LOOP	8
#define XONLY_JNZ	12
#define XONLY_CALL	14
#define XONLY_BACK	19
#define XONLY_JMP	21
#define XONLY_END	25
#define XONLY_SUB	30
#define XONLY_RET	33
/* The branches, as offsets: the loop's jnz is taken for ecx = 4, 3, 2, 1. */
static const unsigned int xonly_branches[][2] = {
	{ XONLY_JNZ, XONLY_LOOP }, { XONLY_JNZ, XONLY_LOOP },
	{ XONLY_JNZ, XONLY_LOOP }, { XONLY_JNZ, XONLY_LOOP },
	{ XONLY_CALL, XONLY_SUB }, { XONLY_RET, XONLY_BACK },
	{ XONLY_JMP, XONLY_END - 1 },
};

/* 5 + 4 + 3 + 2 + 1 in the loop, 100 in sub. */
#define XONLY_SUM	115

/* Exit statuses of xonly_routine when the page cannot be made exec-only. */
#define XONLY_NO_PKEY		92
#define XONLY_NO_MPROTECT	93
#define XONLY_STILL_READABLE	94

/* Is there PKU in CPUID (whether or not the kernel turned it on)? */
static bool cpu_has_pku(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		return false;
	return ecx & bit_PKU;
}

/*
 * Make the page at @code execute-only for this thread, prove that the
 * kernel cannot read it for us either, then run it.
 */
static void xonly_routine(unsigned long code)
{
	int pkey, fds[2];

	pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS);
	if (pkey < 0)
		_exit(XONLY_NO_PKEY);
	if (pkey_mprotect((void *)code, getpagesize(), PROT_EXEC, pkey))
		_exit(XONLY_NO_MPROTECT);
	/* write() copies from the page with copy_from_user(), as the trap would */
	if (pipe(fds) || write(fds[1], (void *)code, 1) != -1 ||
	    errno != EFAULT)
		_exit(XONLY_STILL_READABLE);
	((void (*)(void))code)();
	_exit(0);
}

/*
 * Run the code at @code in a new tracee, traced or not, from its first
 * int3 to its last; the registers there go to @regs, and when traced the
 * records (at most 16) to @rec, their count to *@n.
 */
static void xonly_run(struct __test_metadata *_metadata, pid_t *pid,
		      unsigned char *code, bool traced,
		      struct user_regs_struct *regs, struct bts_struct *rec,
		      long *n)
{
	int status;

	*pid = spawn(_metadata, xonly_routine, (unsigned long)code, 0);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, 0));
	ASSERT_EQ(*pid, waitpid(*pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("tracee exited with %d: no execute-only page",
		       WEXITSTATUS(status));
	}
	ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
	ASSERT_EQ((unsigned long)code + XONLY_START, get_ip(_metadata, *pid));
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, (char *)code + XONLY_END);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)regs));
	if (traced) {
		*n = sys_ptrace(PTRACE_BTS_DRAIN, *pid, rec, 16 * BTS_REC);
		ASSERT_LE(0, *n);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
}

/*
 * Code the program cannot read (a protection key denies access, the page
 * is PROT_EXEC only) is traced as any other: every branch recorded, and
 * the program computes what it computes untraced, the flags PUSHF stored
 * included. The kernel reads the instructions through the page tables,
 * as ptrace does.
 */
TEST_F(bts, exec_only_code)
{
	struct branch exp[ARRAY_SIZE(xonly_branches)];
	struct user_regs_struct plain, traced;
	struct bts_struct rec[16];
	unsigned char *code;
	long n = 0, i;

	if (!cpu_has_pku())
		SKIP(return, "no protection keys (PKU) on this CPU");
	code = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(code != MAP_FAILED);
	memcpy(code, xonly_code, sizeof(xonly_code));
	for (i = 0; i < ARRAY_SIZE(exp); i++) {
		exp[i].from = (char *)code + xonly_branches[i][0];
		exp[i].to = (char *)code + xonly_branches[i][1];
	}
	xonly_run(_metadata, &self->pid, code, false, &plain, NULL, NULL);
	xonly_run(_metadata, &self->pid, code, true, &traced, rec, &n);
	munmap(code, getpagesize());
	EXPECT_EQ(XONLY_SUM, plain.rax);
	EXPECT_EQ(plain.rax, traced.rax);
	EXPECT_EQ(plain.rcx, traced.rcx);
	/* the pushed flags: the forced TF must not show */
	EXPECT_EQ(0, traced.rdx & X86_EFLAGS_TF);
	EXPECT_EQ(plain.rdx, traced.rdx) {
		TH_LOG("pushed flags %#llx traced, %#llx untraced",
		       traced.rdx, plain.rdx);
	}
	EXPECT_EQ(plain.eflags, traced.eflags);
	EXPECT_EQ(plain.rsp, traced.rsp);
	check_records(_metadata, rec, n, exp, ARRAY_SIZE(exp));
}
#endif

/* ---- pages the program never runs ---- */

/* Exit statuses of nofetch_routine. */
#define NOFETCH_RESIDENT	95	/* the page is mapped now */
#define NOFETCH_EVENT		96	/* userfaultfd reported a fault */
#define NOFETCH_NO_UFFD		97
#define NOFETCH_NO_MINCORE	98

static int nofetch_events;

/* The userfaultfd monitor: counts faults, and serves each with zeros. */
static void *nofetch_monitor(void *arg)
{
	int uffd = (long)arg;
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffdio_zeropage zp = { .range.len = getpagesize() };
	struct uffd_msg msg;

	while (poll(&pfd, 1, 500) > 0) {
		if (!(pfd.revents & POLLIN))
			break;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
		    msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		__atomic_add_fetch(&nofetch_events, 1, __ATOMIC_SEQ_CST);
		zp.range.start = msg.arg.pagefault.address &
				 ~(unsigned long long)(getpagesize() - 1);
		ioctl(uffd, UFFDIO_ZEROPAGE, &zp);
	}
	return NULL;
}

/*
 * Stop at an int3 right before a jump into an untouched code page, for the
 * tracer to single-step the jump and move the IP elsewhere: the program
 * never fetches from the page. With @with_uffd, the page is registered with
 * userfaultfd and a monitor thread counts the faults it is shown. Exits 0
 * if the page is still unmapped and nobody saw a fault.
 */
static void nofetch_routine(unsigned long with_uffd)
{
	long page_size = getpagesize();
	pthread_t monitor;
	unsigned char vec;
	void *page;
	int uffd;

	page = mmap(NULL, page_size, PROT_READ | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		_exit(NOFETCH_NO_MINCORE);
	if (with_uffd) {
		struct uffdio_api api = { .api = UFFD_API };
		struct uffdio_register reg = {
			.range = { .start = (unsigned long)page,
				   .len = page_size },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		/* poll() on a blocking userfaultfd is EPOLLERR at once */
		uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) ||
		    ioctl(uffd, UFFDIO_REGISTER, &reg) ||
		    pthread_create(&monitor, NULL, nofetch_monitor,
				   (void *)(long)uffd))
			_exit(NOFETCH_NO_UFFD);
	}
	nofetch_jump(page);
	if (with_uffd)
		pthread_join(monitor, NULL);
	if (mincore(page, page_size, &vec))
		_exit(NOFETCH_NO_MINCORE);
	if (vec & 1)
		_exit(NOFETCH_RESIDENT);
	_exit(nofetch_events ? NOFETCH_EVENT : 0);
}

/*
 * Single-step the jump, as a debugger does, and take the IP from the
 * page's first byte to nofetch_jump's end; the exit status of
 * nofetch_routine, traced or not.
 */
static int nofetch_run(struct __test_metadata *_metadata, pid_t *pid,
		       bool traced, bool with_uffd)
{
	struct user_regs_struct regs;
	int status = 0;

	*pid = spawn(_metadata, nofetch_routine, with_uffd, 0);
	if (traced)
		EXPECT_EQ(0, bts_config(_metadata, *pid, 64 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, nofetch_jmp);
	EXPECT_EQ(0, sys_ptrace(PTRACE_SINGLESTEP, *pid, NULL, 0));
	EXPECT_EQ(*pid, waitpid(*pid, &status, __WALL));
	EXPECT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	EXPECT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)&regs));
	EXPECT_NE((unsigned long)nofetch_e, get_ip(_metadata, *pid));
#ifdef __x86_64__
	regs.rip = (unsigned long)nofetch_e;
#else
	regs.eip = (unsigned long)nofetch_e;
#endif
	EXPECT_EQ(0, sys_ptrace(PTRACE_SETREGS, *pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0, sys_ptrace(PTRACE_CONT, *pid, NULL, 0));
	EXPECT_EQ(*pid, waitpid(*pid, &status, __WALL));
	*pid = 0;
	EXPECT_TRUE(WIFEXITED(status)) {
		TH_LOG("status %#x", status);
	}
	return WEXITSTATUS(status);
}

/*
 * The emulated backend decodes ahead, at each trap, the instruction the
 * task returns to. Where the task never gets there (a debugger moves it
 * on, a signal takes it elsewhere), that read must not have mapped the
 * page (mincore() shows it) nor shown a userfaultfd monitor a fault, nor
 * left the thread waiting for one inside the trap.
 */
TEST_F(bts, nofetch_page_untouched)
{
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, false, false));
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, true, false));
}

TEST_F(bts, nofetch_page_userfaultfd)
{
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, false, true));
	EXPECT_EQ(0, nofetch_run(_metadata, &self->pid, true, true));
}

/* ---- uprobes ---- */

#define TRACEFS		"/sys/kernel/tracing"
#define UPROBE_EVENTS	TRACEFS "/uprobe_events"
#define UPROBE_GROUP	"ptrace_bts"
#define UPROBE_ENABLE	TRACEFS "/events/" UPROBE_GROUP "/enable"

/* The uprobes on bts_uprobe, and how the kernel runs each instruction. */
static const struct {
	const char *name;
	const char *addr;
} bts_uprobes[] = {
	{ "jmp_rel", uprobe_f0 },	/* emulated */
	{ "mov", uprobe_n0 },		/* out of line */
	{ "jmp_ind", uprobe_f1 },	/* out of line */
	{ "call_rel", uprobe_f2 },	/* emulated */
	{ "ret", uprobe_f4 },		/* out of line */
};

/* Write @text to the tracefs file @path; 0 or -errno. */
static int tracefs_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0)
		n = -errno;
	close(fd);
	return n < 0 ? n : 0;
}

/*
 * The file and file offset of our own code at @addr, from
 * /proc/self/maps, as uprobe_events wants them; false if not found.
 */
static bool file_offset(const void *addr, char *path, size_t size,
			unsigned long *offset)
{
	unsigned long start, end, pgoff, a = (unsigned long)addr;
	char line[512], file[256];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/maps", "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %255s", &start, &end,
			   &pgoff, file) != 4 || a < start || a >= end)
			continue;
		*offset = a - start + pgoff;
		snprintf(path, size, "%s", file);
		found = true;
	}
	fclose(f);
	return found;
}

/* Disable and delete the probes, also those a failed run left behind. */
static void uprobes_del(void)
{
	char cmd[128];
	int i;

	tracefs_write(UPROBE_ENABLE, "0");
	for (i = 0; i < ARRAY_SIZE(bts_uprobes); i++) {
		snprintf(cmd, sizeof(cmd), "-:%s/%s\n", UPROBE_GROUP,
			 bts_uprobes[i].name);
		tracefs_write(UPROBE_EVENTS, cmd);
	}
}

/*
 * Put the uprobes of bts_uprobes on our own binary, mounting tracefs
 * first if need be; 0, or -ENOENT where the kernel has no uprobe_events.
 */
static int uprobes_add(struct __test_metadata *_metadata)
{
	char path[256], cmd[512];
	unsigned long off;
	int i;

	if (access(UPROBE_EVENTS, F_OK))
		mount("tracefs", TRACEFS, "tracefs", 0, NULL);
	if (access(UPROBE_EVENTS, W_OK))
		return -ENOENT;
	uprobes_del();
	for (i = 0; i < ARRAY_SIZE(bts_uprobes); i++) {
		ASSERT_TRUE(file_offset(bts_uprobes[i].addr, path, sizeof(path),
					&off));
		snprintf(cmd, sizeof(cmd), "p:%s/%s %s:%#lx\n", UPROBE_GROUP,
			 bts_uprobes[i].name, path, off);
		ASSERT_EQ(0, tracefs_write(UPROBE_EVENTS, cmd)) {
			TH_LOG("%s: %s", UPROBE_EVENTS, cmd);
		}
	}
	ASSERT_EQ(0, tracefs_write(UPROBE_ENABLE, "1"));
	return 0;
}

/* The [uprobes] mapping of @pid, where instructions run out of line. */
static bool xol_area(pid_t pid, unsigned long *start, unsigned long *end)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "[uprobes]") &&
			sscanf(line, "%lx-%lx", start, end) == 2;
	fclose(f);
	return found;
}

/* Run bts_uprobe traced from its start to its end; the registers there. */
static void uprobe_run(struct __test_metadata *_metadata, pid_t *pid,
		       struct user_regs_struct *regs)
{
	*pid = start_traced(_metadata, bts_uprobe, uprobe_s, 64);
	/* any SIGTRAP of the probes' steps would stop the tracee early */
	cont_to(_metadata, *pid, 0, uprobe_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)regs));
}

/*
 * Branches at uprobes. The kernel emulates a probed direct jmp, call or
 * jcc: the program never runs it, and neither backend records it. It
 * runs other probed instructions out of line, in the [uprobes] page, as
 * a single step of its own: the hardware records a branch there from
 * the out-of-line copy, the emulated backend records nothing (uprobes
 * takes the step's #DB first). A probed instruction that is no branch
 * leaves no record on either. Probed or not, the program runs alike.
 * Documentation/arch/x86/ptrace-bts.rst, "uprobes".
 */
TEST_F(bts, uprobe_steps)
{
	static const struct branch plain[] = {
		{ uprobe_f0, uprobe_t0 }, { uprobe_f1, uprobe_t1 },
		{ uprobe_f2, uprobe_fn }, { uprobe_f4, uprobe_r2 },
		{ uprobe_f3, uprobe_t3 },
	};
	struct branch exp[3] = {
		{ NULL, uprobe_t1 }, { NULL, uprobe_r2 },
		{ uprobe_f3, uprobe_t3 },
	};
	struct user_regs_struct unprobed, probed;
	unsigned long xol_start, xol_end;
	struct bts_struct rec[16];
	long n, n_exp = 1, i;
	int err;

	/* unprobed: every branch */
	uprobe_run(_metadata, &self->pid, &unprobed);
	check_trace(_metadata, self->pid, plain, ARRAY_SIZE(plain));
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);
	self->pid = 0;

	err = uprobes_add(_metadata);
	if (err == -ENOENT)
		SKIP(return, "no uprobe_events in tracefs");
	uprobe_run(_metadata, &self->pid, &probed);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	uprobes_del();
	ASSERT_LE(0, n);
	if (bts_backend(self->pid) == PTRACE_BTS_BACKEND_HARDWARE) {
		/* the out-of-line jmp and ret, from the [uprobes] page */
		n_exp = ARRAY_SIZE(exp);
		ASSERT_TRUE(xol_area(self->pid, &xol_start, &xol_end));
		for (i = 0; i < 2 && i < n; i++) {
			EXPECT_LE(xol_start, rec[i].variant.lbr.from);
			EXPECT_GT(xol_end, rec[i].variant.lbr.from);
			exp[i].from = (const char *)(unsigned long)
				      rec[i].variant.lbr.from;
		}
	}
	check_records(_metadata, rec, n, exp + ARRAY_SIZE(exp) - n_exp,
		      n_exp);
	EXPECT_EQ(unprobed.REG_AX, probed.REG_AX);
	EXPECT_EQ(unprobed.REG_CX, probed.REG_CX);
	EXPECT_EQ(unprobed.REG_SP, probed.REG_SP);
}

TEST_HARNESS_MAIN
