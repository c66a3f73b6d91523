// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, the exact branches of each kind, as each
 * backend records them, and code that rewrites itself or pushes the flags
 * over itself.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* ---- Exact branches of the emulated backend ---- */

/* Short, near and backward jmp. */
TEST_F(bts, branch_jmp)
{
	TRACE_ROUTINE(bts_jmp, jmp_s, jmp_e, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* AVX and FMA, and the kernel saving their state: VEX code can run. */
static bool cpu_runs_vex(void)
{
	unsigned int eax, ebx, ecx, edx;

	unsigned int xcr0_lo, xcr0_hi;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
		return false;
	if (!(ecx & bit_AVX) || !(ecx & bit_FMA) || !(ecx & bit_OSXSAVE))
		return false;
	/* XCR0: the kernel saves the SSE and AVX state */
	asm volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	return (xcr0_lo & 6) == 6;
}

/*
 * VEX instructions are neither branches nor PUSHF/POPF to the trace, and
 * tracing them leaves the stack alone (bts_vex).
 */
TEST_F(bts, vex_not_branches)
{
	static const struct branch exp[] = { { vex_f0, vex_t0 } };

	if (!cpu_runs_vex())
		SKIP(return, "no AVX and FMA");
	TRACE_ROUTINE(bts_vex, vex_s, vex_e, exp, ARRAY_SIZE(exp));
}

#ifdef __x86_64__
/*
 * Only SYSCALL copies the flags into R11: after any other entry, such as
 * the emulated backend's single steps, R11 is the program's, even when it
 * holds the flags with TF (bts_r11).
 */
TEST_F(bts, r11_kept)
{
	struct user_regs_struct regs;

	self->pid = start_traced(_metadata, bts_r11, r11_s, 16);
	cont_to(_metadata, self->pid, 0, r11_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0x246 | X86_EFLAGS_TF, regs.r11);
}

/* SYSCALL's copy of the flags in R11 does not show a forced TF. */
TEST_F(bts, r11_syscall)
{
	struct user_regs_struct regs;

	self->pid = start_traced(_metadata, bts_syscall_r11, r11sys_s, 16);
	cont_to(_metadata, self->pid, 0, r11sys_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ(0, regs.r11 & X86_EFLAGS_TF);
	/* and otherwise the flags SYSCALL saved: IF, at least */
	EXPECT_NE(0, regs.r11 & X86_EFLAGS_IF);
}
#endif

/*
 * After MOV SS the single-step trap comes one instruction late: the branch
 * and the PUSHF it covers are traced as without it (bts_movss).
 */
TEST_F(bts, mov_ss_shadow)
{
	static const struct branch exp[] = {
		{ movss_f0, movss_t0 }, { movss_f1, movss_t1 },
	};

	TRACE_ROUTINE(bts_movss, movss_s, movss_e, exp, ARRAY_SIZE(exp));
}

#ifndef __x86_64__
/*
 * The stack segment of bts_ldt_ss: an LDT data segment based at
 * ldt_stack, whose ESP is in the middle of it. Its linear address as a
 * flat one is in the first page, which nothing maps.
 */
static unsigned char ldt_stack[4096];
#define LDT_SS_ENTRY		0
#define LDT_SS_SEL		((LDT_SS_ENTRY << 3) | 4 | 3)	/* LDT, RPL 3 */
#define LDT_SS_ESP		0x800

static void ldt_ss_routine(unsigned long unused)
{
	struct user_desc desc = {
		.entry_number	= LDT_SS_ENTRY,
		.base_addr	= (unsigned long)ldt_stack,
		.limit		= sizeof(ldt_stack) - 1,
		.seg_32bit	= 1,
	};

	if (syscall(SYS_modify_ldt, 1, &desc, sizeof(desc)))
		_exit(92);
	bts_ldt_ss(LDT_SS_SEL, LDT_SS_ESP);
	_exit(0);
}

/*
 * Run bts_ldt_ss in a new tracee, traced or not; returns the flags its
 * PUSHF left on the LDT stack. The records go to @rec.
 */
static unsigned long run_ldt_ss(struct __test_metadata *_metadata, pid_t *pid,
				bool traced, struct bts_struct *rec, long *n)
{
	unsigned long word;

	*pid = spawn(_metadata, ldt_ss_routine, 0, 0);
	cont_to(_metadata, *pid, 0, ldtss_s);
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, ldtss_e);
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKDATA, *pid,
				ldt_stack + LDT_SS_ESP - sizeof(word),
				(unsigned long)&word));
	if (traced) {
		*n = sys_ptrace(PTRACE_BTS_DRAIN, *pid, rec, 16 * BTS_REC);
		ASSERT_LE(0, *n);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
	return word;
}

/*
 * 32-bit code with a stack segment of the LDT, based elsewhere than 0: the
 * program computes the same traced and untraced, and its PUSHF stores no
 * forced TF. The hardware records every branch; the emulated backend does
 * not step while SS is not the flat one, and goes on at the next return to
 * user mode with flat segments (here: the system call's).
 */
TEST_F(bts, ldt_stack_segment)
{
	static const struct branch all[] = {
		{ ldtss_f0, ldtss_t0 }, { ldtss_f1, ldtss_t1 },
	};
	unsigned long plain, traced;
	struct bts_struct rec[16];
	bool emulated;
	long n = 0;

	plain = run_ldt_ss(_metadata, &self->pid, false, rec, &n);
	EXPECT_EQ(0, plain & X86_EFLAGS_TF);
	EXPECT_NE(0, plain & X86_EFLAGS_IF);
	/* the backend: that of a tracee configured like the one below */
	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	emulated = bts_backend(self->pid) == PTRACE_BTS_BACKEND_EMULATED;
	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, __WALL);

	traced = run_ldt_ss(_metadata, &self->pid, true, rec, &n);
	EXPECT_EQ(plain, traced);
	if (emulated)
		check_records(_metadata, rec, n, all + 1, 1);
	else
		check_records(_metadata, rec, n, all, ARRAY_SIZE(all));
}
#endif

/* Taken jcc are branches, not-taken ones are not. */
TEST_F(bts, branch_jcc)
{
	static const struct branch exp[] = {
		{ jcc_f0, jcc_t0 }, { jcc_f1, jcc_t1 }, { jcc_f2, jcc_t2 },
	};

	TRACE_ROUTINE(bts_jcc, jcc_s, jcc_e, exp, ARRAY_SIZE(exp));
}

/* Nested call and ret. */
TEST_F(bts, branch_call_ret)
{
	static const struct branch exp[] = {
		{ call_f0, call_fn1 }, { call_f1, call_fn2 },
		{ call_f3, call_r1 }, { call_f2, call_r0 },
	};

	TRACE_ROUTINE(bts_call, call_s, call_e, exp, ARRAY_SIZE(exp));
}

/* Indirect jmp and call through a register and memory; ret imm16. */
TEST_F(bts, branch_indirect)
{
	static const struct branch exp[] = {
		{ ind_f0, ind_t0 }, { ind_f1, ind_fn }, { ind_f1r, ind_r1 },
		{ ind_f2, ind_t2 }, { ind_f3, ind_fn2 }, { ind_f3r, ind_r3 },
	};

	TRACE_ROUTINE(bts_ind, ind_s, ind_e, exp, ARRAY_SIZE(exp));
}

/* loop/loope/loopne and jcxz, taken and not; a loop to itself. */
TEST_F(bts, branch_loop)
{
	static const struct branch exp[] = {
		{ loop_f0, loop_t0 }, { loop_f0, loop_t0 },
		{ loop_f1, loop_t1 }, { loop_f2, loop_f2 },
		{ loop_f3, loop_t3 },
	};

	TRACE_ROUTINE(bts_loop, loop_s, loop_e, exp, ARRAY_SIZE(exp));
}

/* Far return, far indirect jmp and call, far return from the call. */
TEST_F(bts, branch_far)
{
	static const struct branch exp[] = {
		{ far_f0, far_t0 }, { far_f1, far_t1 },
		{ far_f2, far_fn }, { far_f3, far_r2 },
	};

#ifdef __x86_64__
	bts_low_stack = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	ASSERT_TRUE(bts_low_stack != MAP_FAILED);
	bts_low_stack += 4096;
#endif
	TRACE_ROUTINE(bts_far, far_s, far_e, exp, ARRAY_SIZE(exp));
}

/* rep stos/movs/cmps iterations are not branches. */
TEST_F(bts, branch_rep)
{
	static const struct branch exp[] = { { rep_f0, rep_t0 } };

	TRACE_ROUTINE(bts_rep, rep_s, rep_e, exp, ARRAY_SIZE(exp));
}

/* A branch to the next instruction is recorded if and only if taken. */
TEST_F(bts, branch_to_next)
{
	static const struct branch exp[] = {
		{ next_f0, next_t0 }, { next_f2, next_t2 },
		{ next_f3, next_t3 },
	};

	TRACE_ROUTINE(bts_next, next_s, next_e, exp, ARRAY_SIZE(exp));
}

/* System calls, int $0x80 and a page fault leave no record. */
TEST_F(bts, kernel_entries)
{
	static const struct branch exp[] = {
		{ kentry_f0, kentry_t0 }, { kentry_f1, kentry_t1 },
		{ kentry_f2, kentry_t2 }, { kentry_f3, kentry_t3 },
	};

	/* bts_kentry writes first to this page: a fault at that point */
	bts_fault_addr = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(bts_fault_addr != MAP_FAILED);
	TRACE_ROUTINE(bts_kentry, kentry_s, kentry_e, exp, ARRAY_SIZE(exp));
}

/* Install bts_sig_handler for SIGUSR1, then run bts_sig. */
static void sig_routine(unsigned long unused)
{
	install_asm_handler(SIGUSR1, (void *)bts_sig_handler);
	bts_sig();
}

/*
 * Signal delivery and sigreturn leave no record; the handler's branches
 * are recorded between the routine's.
 */
TEST_F(bts, signal_delivery)
{
	static const struct branch exp[] = {
		{ sig_f0, sig_t0 }, { sigh_f0, sigh_t0 },
		{ sigh_f1, bts_sig_restorer }, { sig_f1, sig_t1 },
	};

	self->pid = spawn(_metadata, sig_routine, 0, 0);
	cont_to(_metadata, self->pid, 0, sig_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 64 * BTS_REC, BTS_TRACE_ALLOC, 0));
	cont_to_signal(_metadata, self->pid, 0, SIGUSR1);
	cont_to(_metadata, self->pid, SIGUSR1, sig_e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/*
 * A jcc to itself, taken until the tracer clears CF at a stop, then not
 * taken. Also checks that the forced trap flag is hidden from every view
 * of the registers and survives the tracer writing them.
 */
TEST_F(bts, branch_to_itself)
{
	static const struct branch exp[] = { { self_f1, self_t1 } };
	struct bts_struct rec[32];
	struct user_regs_struct regs;
	struct iovec iov = { &regs, sizeof(regs) };
	unsigned long flags;
	long n, i;

	self->pid = start_traced(_metadata, bts_self, self_s, 32);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(32, stop_when_recorded(self->pid, 32));

	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, self->pid, NULL,
				(unsigned long)&regs));
	EXPECT_EQ((unsigned long)self_f0, REGS_IP(regs));
	EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	EXPECT_NE(0, regs.eflags & X86_EFLAGS_CF);
	memset(&regs, 0, sizeof(regs));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGSET, self->pid,
				(void *)NT_PRSTATUS, (unsigned long)&iov));
	EXPECT_EQ(0, regs.eflags & X86_EFLAGS_TF);
	/* The raw PEEKUSR stores the word at data. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKUSR, self->pid,
				(void *)offsetof(struct user_regs_struct, eflags),
				(unsigned long)&flags));
	EXPECT_EQ(0, flags & X86_EFLAGS_TF);
	EXPECT_NE(0, flags & X86_EFLAGS_CF);

	/* the buffer wrapped, full of the jump to itself */
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(32, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ((unsigned long)self_f0, rec[i].variant.lbr.from);
		EXPECT_EQ((unsigned long)self_f0, rec[i].variant.lbr.to);
	}

	/* the tracer's flags, without TF, must not end the tracing */
	regs.eflags &= ~X86_EFLAGS_CF;
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETREGSET, self->pid,
				(void *)NT_PRSTATUS, (unsigned long)&iov));
	/* SIGSTOP is suppressed; the jcc is not taken any more */
	cont_to(_metadata, self->pid, 0, self_e);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/*
 * A routine in a writable page that the tracee rewrites between runs:
 * "int3; jmp <rel8>; nop; int3; ret". The rewritten bytes are the jmp's.
 */
static const unsigned char smc_code[] = { 0xcc, 0xeb, 0x01, 0x90, 0xcc, 0xc3 };
#define SMC_JMP		1
#define SMC_END		5
#define SMC_NOP		3
#define SMC_INT3	4

static const unsigned char smc_jmps[][2] = {
	{ 0xeb, 0x01 },		/* over the nop, to the int3 */
	{ 0xeb, 0x00 },		/* to the next instruction, the nop */
	{ 0x90, 0x90 },		/* no branch at all */
};

static void smc_routine(unsigned long code)
{
	unsigned char *page = (unsigned char *)code;
	int i;

	for (i = 0; i < ARRAY_SIZE(smc_jmps); i++) {
		memcpy(page + SMC_JMP, smc_jmps[i], sizeof(smc_jmps[i]));
		((void (*)(void))page)();
	}
	_exit(0);
}

/*
 * Code rewritten at the same address gives the records of the new code:
 * the emulated backend must not answer from its decode cache.
 */
TEST_F(bts, self_modifying_code)
{
	struct branch exp[ARRAY_SIZE(smc_jmps)] = {};
	char *code;
	int i;

	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(code != MAP_FAILED);
	memcpy(code, smc_code, sizeof(smc_code));
	exp[0] = (struct branch){ code + SMC_JMP, code + SMC_INT3 };
	exp[1] = (struct branch){ code + SMC_JMP, code + SMC_NOP };
	self->pid = spawn(_metadata, smc_routine, (unsigned long)code, 0);
	for (i = 0; i < ARRAY_SIZE(smc_jmps); i++) {
		cont_to(_metadata, self->pid, 0, code + SMC_JMP);
		if (!i)
			ASSERT_EQ(0, bts_config(_metadata, self->pid,
						16 * BTS_REC, BTS_TRACE_ALLOC,
						0));
		/* forget the branches of the rewriting */
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
		cont_to(_metadata, self->pid, 0, code + SMC_END);
		/* the nops of the last version are no branch */
		check_trace(_metadata, self->pid, &exp[i], i < 2);
	}
	munmap(code, 4096);
}

/*
 * A PUSHF that overwrites itself, built in a writable code page: with the
 * stack pointer just past it, the 16-bit "pushw" (66 9c) stores the flags
 * on its own two bytes, their high byte, which holds TF, on the opcode.
 *
 *	int3				<- start
 *	xor %eax, %eax			known flags
 *	mov %rsp, %rcx
 *	mov $pushf + 2, %rsp
 * pushf:
 *	pushw				its bytes become the flags
 *	mov %rcx, %rsp
 * jmp:
 *	jmp .+2				a branch to show the trace
 *	int3				<- end
 *	ret
 */
struct pushf_code {
	unsigned char *code;
	unsigned long start;	/* offsets in @code, after the int3s */
	unsigned long pushf;
	unsigned long jmp;
	unsigned long end;
};

#ifdef __x86_64__
# define REX_W		0x48,
#else
# define REX_W
#endif

static void pushf_emit(struct pushf_code *c, unsigned long *at,
		       const unsigned char *bytes, size_t len)
{
	memcpy(c->code + *at, bytes, len);
	*at += len;
}

static void pushf_build(struct pushf_code *c)
{
	static const unsigned char int3[] = { 0xcc };
	static const unsigned char head[] = {
		0x31, 0xc0,		/* xor %eax, %eax */
		REX_W 0x89, 0xe1,	/* mov %rsp, %rcx */
		REX_W 0xbc,		/* mov $imm, %rsp */
	};
	static const unsigned char pushw[] = { 0x66, 0x9c };
	static const unsigned char restore[] = { REX_W 0x89, 0xcc };
	static const unsigned char jmp[] = { 0xeb, 0x00 };
	static const unsigned char tail[] = { 0xcc, 0xc3 };
	unsigned long at = 0, sp;

	pushf_emit(c, &at, int3, sizeof(int3));
	c->start = at;
	pushf_emit(c, &at, head, sizeof(head));
	c->pushf = at + sizeof(sp);
	sp = (unsigned long)c->code + c->pushf + sizeof(pushw);
	pushf_emit(c, &at, (unsigned char *)&sp, sizeof(sp));
	pushf_emit(c, &at, pushw, sizeof(pushw));
	pushf_emit(c, &at, restore, sizeof(restore));
	c->jmp = at;
	pushf_emit(c, &at, jmp, sizeof(jmp));
	pushf_emit(c, &at, tail, sizeof(tail));
	c->end = at - 1;
}

/*
 * Run the code of @c in a new tracee, traced or not; the word the pushw
 * left on its own bytes goes to @pushed, the flags at the end to @flags.
 */
static void pushf_run(struct __test_metadata *_metadata, pid_t *pid,
		      const struct pushf_code *c, bool traced,
		      unsigned long *pushed, unsigned long *flags)
{
	const struct branch exp = {
		(char *)c->code + c->jmp, (char *)c->code + c->jmp + 2,
	};
	struct user_regs_struct regs;
	unsigned long word;

	*pid = spawn(_metadata, run_routine, (unsigned long)c->code, 0);
	cont_to(_metadata, *pid, 0, (char *)c->code + c->start);
	if (traced)
		ASSERT_EQ(0, bts_config(_metadata, *pid, 16 * BTS_REC,
					BTS_TRACE_ALLOC, 0));
	cont_to(_metadata, *pid, 0, (char *)c->code + c->end);
	ASSERT_EQ(0, sys_ptrace(PTRACE_PEEKDATA, *pid, c->code + c->pushf,
				(unsigned long)&word));
	*pushed = word & 0xffff;
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, *pid, NULL,
				(unsigned long)&regs));
	*flags = regs.eflags;
	if (traced)
		check_trace(_metadata, *pid, &exp, 1);
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, __WALL);
	*pid = 0;
}

/*
 * An instruction that overwrites its own bytes is traced as it ran: the
 * forced TF in the flags a PUSHF stored is corrected even though the PUSHF
 * is gone by the time its single-step trap comes. Traced, the program
 * finds in memory and in its flags what it finds untraced.
 */
TEST_F(bts, pushf_over_itself)
{
	unsigned long plain, traced, plain_flags, traced_flags;
	struct pushf_code c;

	c.code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(c.code != MAP_FAILED);
	pushf_build(&c);
	pushf_run(_metadata, &self->pid, &c, false, &plain, &plain_flags);
	pushf_run(_metadata, &self->pid, &c, true, &traced, &traced_flags);
	/* the high byte of the pushed flags: IF, not TF */
	EXPECT_EQ(0, plain & X86_EFLAGS_TF);
	EXPECT_NE(0, plain & X86_EFLAGS_IF);
	EXPECT_EQ(plain, traced) {
		TH_LOG("pushed %#lx traced, %#lx untraced", traced, plain);
	}
	EXPECT_EQ(plain_flags, traced_flags);
	munmap(c.code, 4096);
}

TEST_HARNESS_MAIN
