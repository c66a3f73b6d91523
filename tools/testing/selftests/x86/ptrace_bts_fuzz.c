// SPDX-License-Identifier: GPL-2.0
/*
 * Random differential testing of ptrace branch tracing.
 *
 * A seeded generator writes blocks of x86-64 machine code: every kind of
 * branch (short and near jcc, loop and jcxz, direct, indirect and far
 * jumps and calls, rets, iret, a trip through 32-bit compat code),
 * prefixes before branches and other instructions, VEX, EVEX and XOP
 * encodings, PUSHF/POPF/IRET games with the program's own TF, MOV SS,
 * syscalls, int1 and int3, and faults that a signal handler resumes.
 *
 * Each block runs in three long-lived tracees: one that is ptraced but not
 * branch traced, and one per backend under test (the emulated one; on
 * BTS hardware, the hardware one too). All must end the block in the same
 * state: general, x87/SSE and AVX registers, flags, the block's memory
 * (data and stack) and a digest of every signal the handler saw, with the
 * flags of its signal frame. Where two backends trace, their records must
 * be the same, record for record.
 *
 * A divergence prints the seed, then shrinks the block, one item at a
 * time, to the smallest one that still diverges, and dumps it.
 *
 * The test cases run a fixed number of blocks, in one worker process per
 * CPU (up to two), on the backend the kernel says the machine has (see
 * expected_backend()). A long run, the rerun of one block, and the test
 * cases with another number of blocks each:
 *	ptrace_bts_fuzz [--backend B] --seed S --blocks N
 *	ptrace_bts_fuzz [--backend B] --block-seed X
 *	ptrace_bts_fuzz [--backend B] [--case-blocks N] [harness options]
 * (or --name=value). B is hardware, emulated or any; "none" runs each block untraced twice,
 * a check of the test.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cpuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_util.h"

/*
 * Fixed addresses below 4 GiB, the same in every tracee: far transfers
 * and compat code take 32-bit addresses, and records compare as numbers.
 * Both areas are shared with the tracer, which writes the code and reads
 * the data without a ptrace call.
 */
#define FZ_CODE			0x20000000UL
#define FZ_CODE_SIZE		(64UL << 10)
#define FZ_DATA			0x20100000UL
#define FZ_DATA_SIZE		(16UL << 10)
#define FZ_SCRATCH_SIZE		256	/* the block's memory operands, %rbx */
/* 8-byte slots a positive disp8 reaches from %rbx */
#define FZ_DISP8_SLOTS		16
#define FZ_LOG			(FZ_DATA + 512)	/* struct fz_log */
#define FZ_STACK_TOP		(FZ_DATA + FZ_DATA_SIZE - 128)

#define FZ_USER_CS		0x33	/* __USER_CS */
#define FZ_USER32_CS		0x23	/* __USER32_CS */
#define FZ_USER_DS		0x2b	/* __USER_DS */
#define FZ_TF			0x100
#define FZ_ARITH_FLAGS		0x8d5	/* CF PF AF ZF SF OF */

#define FZ_MAX_ITEMS		24
#define FZ_MAX_STOPS		5000	/* signals and traps within one block */
#define FZ_RECORDS		16384
#define FZ_HANG_SECONDS		20

/* Registers by their encoding. */
enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13,
	R14, R15 };

/*
 * What the block may write: all but %rbx (the scratch memory), %rsp and
 * %r14 (where the handler resumes a faulting instruction).
 */
static const uint8_t fz_free_regs[] = {
	RAX, RCX, RDX, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R15,
};

/* What the signal handler saw, in the shared data. */
struct fz_log {
	uint64_t signals;
	uint64_t digest;
};

/* A digest step; also derives the seeds of blocks and items (splitmix64). */
static uint64_t fz_mix(uint64_t h, uint64_t v)
{
	uint64_t z = h + 0x9e3779b97f4a7c15ULL * (v + 1);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

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

/* --- the generator --- */

struct fz_gen {
	uint8_t buf[FZ_CODE_SIZE];
	size_t len;
	uint64_t rng;
	bool compat;		/* emitting 32-bit code */
	bool tf;		/* the program's TF is on: every flag is seen */
};

/* The CPU's features the generator asks for; absent ones still run (#UD). */
static bool fz_has_avx, fz_has_xop, fz_amd;

static uint64_t fz_rand(struct fz_gen *g)
{
	/* splitmix64 */
	uint64_t z = (g->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned int fz_below(struct fz_gen *g, unsigned int n)
{
	return fz_rand(g) % n;
}

static void e8(struct fz_gen *g, uint8_t b)
{
	g->buf[g->len++] = b;
}

static void e16(struct fz_gen *g, uint16_t v)
{
	memcpy(g->buf + g->len, &v, sizeof(v));
	g->len += sizeof(v);
}

static void e32(struct fz_gen *g, uint32_t v)
{
	memcpy(g->buf + g->len, &v, sizeof(v));
	g->len += sizeof(v);
}

static void emit(struct fz_gen *g, const char *bytes, size_t n)
{
	memcpy(g->buf + g->len, bytes, n);
	g->len += n;
}

#define EMIT(g, s)	emit(g, s, sizeof(s) - 1)

/* The address the next byte runs at. */
static uint32_t fz_here(struct fz_gen *g)
{
	return FZ_CODE + g->len;
}

/* A forward rel8/rel32 field at @at now points here. */
static void fz_land8(struct fz_gen *g, size_t at)
{
	long rel = (long)g->len - (long)(at + 1);

	if (rel > 127)
		abort();	/* the items keep short jumps short */
	g->buf[at] = rel;
}

static void fz_land32(struct fz_gen *g, size_t at)
{
	int32_t rel = g->len - (at + 4);

	memcpy(g->buf + at, &rel, sizeof(rel));
}

/* A rel8 field that jumps back to @target. */
static void fz_back8(struct fz_gen *g, size_t target)
{
	long rel = (long)target - (long)(g->len + 1);

	if (rel < -128)
		abort();
	e8(g, (uint8_t)rel);
}

static uint8_t fz_modrm(int mod, int reg, int rm)
{
	return mod << 6 | (reg & 7) << 3 | (rm & 7);
}

/* A REX prefix for 64-bit code, when one is needed or wanted. */
static void fz_rex(struct fz_gen *g, bool w, int reg, int rm, bool force)
{
	uint8_t rex = 0x40 | w << 3 | (reg >> 3) << 2 | (rm >> 3);

	if (g->compat)
		return;
	if (rex != 0x40 || force)
		e8(g, rex);
}

static int fz_reg(struct fz_gen *g, unsigned int avoid)
{
	int r;

	do {
		r = fz_free_regs[fz_below(g, sizeof(fz_free_regs))];
	} while ((avoid & 1U << r) || (g->compat && r >= R8));
	return r;
}

/*
 * Prefixes that mean nothing to the instruction after them: up to six
 * segment overrides and F2/F3 (more distinct ones than the kernel's decoder
 * keeps), maybe after a REX, which the CPU ignores when a prefix follows.
 */
static void fz_noise_prefix(struct fz_gen *g)
{
	static const uint8_t prefixes[] = { 0x2e, 0x3e, 0x26, 0x36, 0xf2, 0xf3 };
	unsigned int n;

	if (fz_below(g, 3))
		return;
	if (!g->compat && !fz_below(g, 3))
		e8(g, 0x40 + fz_below(g, 16));
	for (n = 1 + fz_below(g, 6); n; n--)
		e8(g, prefixes[fz_below(g, sizeof(prefixes))]);
}

/*
 * One ALU instruction that writes none of @avoid. Returns true when it
 * leaves flags undefined (AF after logic, OF after multi-bit shifts...):
 * TCG computes those lazily, and what it computes depends on where its
 * translation blocks end, which single-stepping changes.
 */
static bool fz_alu_one(struct fz_gen *g, unsigned int avoid)
{
	static const uint8_t rr_ops[] = {
		0x01, 0x09, 0x11, 0x19, 0x21, 0x29, 0x31, 0x39, 0x85, 0x89, 0x87,
	};
	int dst = fz_reg(g, avoid), src = fz_reg(g, 0);
	bool w = !g->compat && fz_below(g, 2);
	unsigned int n;
	uint8_t op;

	switch (fz_below(g, 11)) {
	case 0 ... 2:
		op = rr_ops[fz_below(g, sizeof(rr_ops))];
		/* xchg writes both */
		if (op == 0x87)
			src = fz_reg(g, avoid);
		if (!fz_below(g, 6))
			e8(g, 0x66);
		fz_rex(g, w, src, dst, false);
		e8(g, op);
		e8(g, fz_modrm(3, src, dst));
		return op == 0x09 || op == 0x21 || op == 0x31 || op == 0x85;
	case 3:
		n = fz_below(g, 8);
		fz_rex(g, w, 0, dst, false);
		e8(g, 0x83);
		e8(g, fz_modrm(3, n, dst));
		e8(g, fz_rand(g));
		return n == 1 || n == 4 || n == 6;	/* or and xor */
	case 4:	/* rol ror shl shr sar */
		fz_rex(g, w, 0, dst, false);
		e8(g, 0xc1);
		e8(g, fz_modrm(3, "\x00\x01\x04\x05\x07"[fz_below(g, 5)], dst));
		e8(g, fz_below(g, 64));
		return true;
	case 5:	/* inc dec not neg */
		fz_rex(g, w, 0, dst, false);
		if (fz_below(g, 2)) {
			e8(g, 0xff);
			e8(g, fz_modrm(3, fz_below(g, 2), dst));
		} else {
			e8(g, 0xf7);
			e8(g, fz_modrm(3, 2 + fz_below(g, 2), dst));
		}
		break;
	case 6:	/* imul, cmovcc */
		op = fz_below(g, 2) ? 0xaf : 0x40 + fz_below(g, 16);
		fz_rex(g, w, dst, src, false);
		e8(g, 0x0f);
		e8(g, op);
		e8(g, fz_modrm(3, dst, src));
		return op == 0xaf;
	case 7:	/* setcc */
		fz_rex(g, false, 0, dst, !g->compat);
		if (g->compat && dst >= RSP)
			dst = RAX;	/* no %spl in compat code */
		e8(g, 0x0f);
		e8(g, 0x90 + fz_below(g, 16));
		e8(g, fz_modrm(3, 0, dst));
		break;
	case 8:	/* mov $imm32 */
		fz_rex(g, false, 0, dst, false);
		e8(g, 0xb8 + (dst & 7));
		e32(g, fz_rand(g));
		break;
	case 9:	/* to or from the scratch memory */
		if (g->compat) {
			EMIT(g, "\x01\xc8");	/* add %ecx,%eax */
			return false;
		}
		if (!fz_below(g, 4)) {
			e8(g, 0xf0);	/* lock: to memory only */
			op = "\x01\x09\x21\x29\x31"[fz_below(g, 5)];
		} else {
			op = "\x01\x03\x2b\x33\x8b\x89"[fz_below(g, 6)];
		}
		if (op == 0x03 || op == 0x2b || op == 0x33 || op == 0x8b)
			src = dst;	/* the register is written */
		fz_rex(g, w, src, RBX, false);
		e8(g, op);
		e8(g, fz_modrm(1, src, RBX));
		e8(g, fz_below(g, FZ_DISP8_SLOTS) * 8);
		return op == 0x09 || op == 0x21 || op == 0x31 || op == 0x33;
	default:	/* bt, bswap */
		fz_rex(g, w, src, dst, false);
		e8(g, 0x0f);
		if (fz_below(g, 2)) {
			e8(g, 0xa3);
			e8(g, fz_modrm(3, src, dst));
			return true;
		}
		e8(g, 0xc8 + (dst & 7));
		return false;
	}
	return false;
}

/*
 * One ALU instruction, and a cmp after it if it left flags undefined: the
 * flags a program sees (jcc, pushf, the end state) are then all defined.
 */
static void fz_alu(struct fz_gen *g, unsigned int avoid)
{
	size_t at = g->len;
	bool undef;
	int a, b;

	/* Under TF each instruction's flags go to a signal frame. */
	for (;;) {
		undef = fz_alu_one(g, avoid);
		if (!undef || !g->tf)
			break;
		g->len = at;
	}
	if (!undef)
		return;
	a = fz_reg(g, 0);
	b = fz_reg(g, 0);
	fz_rex(g, !g->compat && fz_below(g, 2), a, b, false);
	e8(g, 0x39);
	e8(g, fz_modrm(3, a, b));
}

/*
 * The program's own TF on and off. Off subtracts it: an AND would leave AF
 * undefined in the flags the trap after it shows.
 */
static void fz_tf_on(struct fz_gen *g)
{
	EMIT(g, "\x9c\x66\x81\x0c\x24\x00\x01\x9d"); /* pushf; orw; popf */
	g->tf = true;
}

static void fz_tf_off(struct fz_gen *g)
{
	EMIT(g, "\x9c\x66\x81\x2c\x24\x00\x01\x9d"); /* pushf; subw; popf */
	g->tf = false;
}

static void fz_filler(struct fz_gen *g, unsigned int avoid, unsigned int max)
{
	unsigned int n = fz_below(g, max + 1);

	while (n--)
		fz_alu(g, avoid);
}

/* Bytes that never run, for the decoder to get wrong. */
static void fz_junk(struct fz_gen *g)
{
	unsigned int n = fz_below(g, 8);

	while (n--)
		e8(g, fz_rand(g));
}

/* lea target(%rip),%reg with the rel32 left to fz_land32(); its offset. */
static size_t fz_lea_rip(struct fz_gen *g, int reg, bool w)
{
	fz_rex(g, w, reg, 0, false);
	e8(g, 0x8d);
	e8(g, fz_modrm(0, reg, 5));
	e32(g, 0);
	return g->len - 4;
}

/* Arm the handler's resume address: the end of the current item. */
static size_t fz_arm_resume(struct fz_gen *g)
{
	return fz_lea_rip(g, R14, true);
}

/* --- the items: each is self-contained and leaves TF off --- */

static void item_alu(struct fz_gen *g)
{
	fz_filler(g, 0, 6);
}

/*
 * 0x66 before a short branch in 64-bit code: Intel ignores it, AMD cuts the
 * target to 16 bits (a fault, resumed at the item's end). TCG cuts it on
 * every vendor, so the blocks have them only where the CPU says it is an
 * AMD one: there the trace must decode them as TCG runs them. The near
 * forms (a rel16 where Intel reads a rel32) are left out: under TCG a
 * block with them did not end.
 */
static bool fz_data16(struct fz_gen *g, size_t *resume)
{
	if (!fz_amd || g->compat || fz_below(g, 5))
		return false;
	*resume = fz_arm_resume(g);
	return true;
}

static void item_jcc(struct fz_gen *g)
{
	unsigned int cc = fz_below(g, 16), kind = fz_below(g, 3);
	bool data16 = false;
	size_t at, resume;

	if (kind == 1)
		data16 = fz_data16(g, &resume);
	fz_alu(g, 0);
	fz_noise_prefix(g);
	if (kind == 0) {
		e8(g, 0x70 + cc);
		e8(g, 0);	/* to the next instruction: taken or not */
		return;
	}
	if (kind == 1) {
		if (data16)
			e8(g, 0x66);
		e8(g, 0x70 + cc);
		at = g->len;
		e8(g, 0);
	} else {
		e8(g, 0x0f);
		e8(g, 0x80 + cc);
		at = g->len;
		e32(g, 0);
	}
	fz_filler(g, 0, 3);
	if (kind == 1)
		fz_land8(g, at);
	else
		fz_land32(g, at);
	if (data16)
		fz_land32(g, resume);
}

/* A counted loop closed by dec/jnz, short or near. */
static void item_jcc_loop(struct fz_gen *g)
{
	size_t top;
	int32_t rel;

	EMIT(g, "\x41\xbf");	/* mov $n,%r15d */
	e32(g, 1 + fz_below(g, 5));
	top = g->len;
	fz_filler(g, 1U << R15, 3);
	EMIT(g, "\x41\xff\xcf");	/* dec %r15d */
	if (fz_below(g, 2)) {
		e8(g, 0x75);
		fz_back8(g, top);
	} else {
		EMIT(g, "\x0f\x85");
		rel = (int32_t)top - (int32_t)(g->len + 4);
		e32(g, rel);
	}
}

/* loop, loope, loopne, with a 64- or 32-bit count. */
static void item_loop(struct fz_gen *g)
{
	size_t top;

	e8(g, 0xb9);	/* mov $n,%ecx */
	e32(g, 1 + fz_below(g, 5));
	top = g->len;
	fz_filler(g, 1U << RCX, 3);
	if (fz_below(g, 3) == 0)
		e8(g, 0x67);
	e8(g, 0xe0 + fz_below(g, 3));
	fz_back8(g, top);
}

static void item_jcxz(struct fz_gen *g)
{
	size_t at;

	if (fz_below(g, 2))
		EMIT(g, "\xb9\x00\x00\x00\x00");	/* mov $0,%ecx */
	else
		fz_alu(g, 0);
	if (fz_below(g, 2))
		e8(g, 0x67);
	e8(g, 0xe3);
	at = g->len;
	e8(g, 0);
	fz_filler(g, 0, 3);
	fz_land8(g, at);
}

static void item_jmp(struct fz_gen *g)
{
	bool data16 = false;
	size_t at, resume;

	if (fz_below(g, 2)) {
		data16 = fz_data16(g, &resume);
		fz_noise_prefix(g);
		if (data16)
			e8(g, 0x66);
		e8(g, 0xeb);
		at = g->len;
		e8(g, 0);
		fz_junk(g);
		fz_land8(g, at);
		if (data16)
			fz_land32(g, resume);
	} else {
		fz_noise_prefix(g);
		if (!fz_below(g, 4))
			e8(g, 0x48);	/* REX.W: no effect on a near jump */
		e8(g, 0xe9);
		at = g->len;
		e32(g, 0);
		fz_junk(g);
		fz_land32(g, at);
	}
}

/* jmp or call through a register or the scratch memory. */
static void item_indirect(struct fz_gen *g)
{
	int reg = fz_reg(g, 0), slot = 8 * fz_below(g, 8);
	bool call = fz_below(g, 2), mem = fz_below(g, 2);
	size_t lea, over = 0;

	lea = fz_lea_rip(g, reg, true);
	if (mem) {
		fz_rex(g, true, reg, RBX, false);
		e8(g, 0x89);	/* mov %reg,slot(%rbx) */
		e8(g, fz_modrm(1, reg, RBX));
		e8(g, slot);
	}
	if (fz_below(g, 3) == 0)
		e8(g, 0x3e);	/* notrack */
	if (mem) {
		e8(g, 0xff);
		e8(g, fz_modrm(1, call ? 2 : 4, RBX));
		e8(g, slot);
	} else {
		fz_rex(g, false, 0, reg, false);
		e8(g, 0xff);
		e8(g, fz_modrm(3, call ? 2 : 4, reg));
	}
	if (call) {
		/* the callee is right here: it returns to a jmp over itself */
		e8(g, 0xeb);
		over = g->len;
		e8(g, 0);
	} else {
		fz_junk(g);
	}
	fz_land32(g, lea + 0);
	if (call) {
		fz_filler(g, 0, 2);
		e8(g, 0xc3);
		fz_land8(g, over);
	}
}

/* call rel32 and every form of near ret. */
static void item_call(struct fz_gen *g)
{
	unsigned int kind = fz_below(g, 4);
	size_t call, over;

	if (kind == 3)
		e8(g, 0x50);	/* push %rax: popped by ret $8 */
	fz_noise_prefix(g);
	e8(g, 0xe8);
	call = g->len;
	e32(g, 0);
	e8(g, 0xeb);
	over = g->len;
	e8(g, 0);
	fz_land32(g, call);
	fz_filler(g, 0, 3);
	switch (kind) {
	case 0:
		e8(g, 0xc3);
		break;
	case 1:
		EMIT(g, "\xf3\xc3");	/* rep ret */
		break;
	case 2:
		EMIT(g, "\xf2\xc3");	/* bnd ret */
		break;
	default:
		EMIT(g, "\xc2\x08\x00");
		break;
	}
	fz_land8(g, over);
}

/* A ret to an address pushed by hand. */
static void item_push_ret(struct fz_gen *g)
{
	size_t lea = fz_lea_rip(g, RAX, true);

	e8(g, 0x50);
	e8(g, 0xc3);
	fz_junk(g);
	fz_land32(g, lea);
}

/* Far jumps and calls through an m16:32 in the scratch memory, lretq. */
static void item_far(struct fz_gen *g)
{
	unsigned int kind = fz_below(g, 3), slot = 16 * fz_below(g, 4);
	size_t lea, over = 0;

	if (kind == 2) {
		e8(g, 0x6a);
		e8(g, FZ_USER_CS);	/* push $cs */
		lea = fz_lea_rip(g, RAX, true);
		e8(g, 0x50);
		EMIT(g, "\x48\xcb");	/* lretq */
		fz_junk(g);
		fz_land32(g, lea);
		return;
	}
	lea = fz_lea_rip(g, RAX, false);
	e8(g, 0x89);
	e8(g, fz_modrm(1, RAX, RBX));
	e8(g, slot);
	EMIT(g, "\x66\xc7\x43");	/* movw $cs,slot+4(%rbx) */
	e8(g, slot + 4);
	e16(g, FZ_USER_CS);
	e8(g, 0xff);
	e8(g, fz_modrm(1, kind ? 3 : 5, RBX));
	e8(g, slot);
	if (kind) {
		e8(g, 0xeb);
		over = g->len;
		e8(g, 0);
	} else {
		fz_junk(g);
	}
	fz_land32(g, lea);
	if (kind) {
		fz_filler(g, 0, 2);
		e8(g, 0xcb);	/* lret: pops a 32-bit IP and CS */
		fz_land8(g, over);
	}
}

/* To 32-bit compat code and back. */
static void item_compat(struct fz_gen *g)
{
	size_t lea;
	unsigned int n;

	e8(g, 0x6a);
	e8(g, FZ_USER32_CS);
	lea = fz_lea_rip(g, RAX, true);
	e8(g, 0x50);
	EMIT(g, "\x48\xcb");	/* lretq to compat */
	fz_land32(g, lea);
	g->compat = true;
	for (n = fz_below(g, 4); n; n--) {
		switch (fz_below(g, 4)) {
		case 0:
			item_jcc(g);
			break;
		case 1:
			EMIT(g, "\x9c\x58\x50\x9d");	/* pushf; pop; push; popf */
			break;
		case 2:
			EMIT(g, "\xb8\x18\x00\x00\x00\xcd\x80"); /* getuid */
			break;
		default:
			fz_filler(g, 0, 3);
			break;
		}
	}
	e8(g, 0xea);	/* ljmp $cs,$back */
	e32(g, fz_here(g) + 6);
	e16(g, FZ_USER_CS);
	g->compat = false;
}

/* iretq or iretl to the next instruction, maybe with the program's TF. */
static void item_iret(struct fz_gen *g)
{
	bool q = fz_below(g, 2), tf = !fz_below(g, 3);
	size_t lea;

	/* the frame: ss, rsp, flags, cs, ip; %rax holds the old %rsp */
	EMIT(g, "\x48\x89\xe0");	/* mov %rsp,%rax */
	if (q) {
		e8(g, 0x6a);
		e8(g, FZ_USER_DS);
		e8(g, 0x50);
		e8(g, 0x9c);
		if (tf)
			EMIT(g, "\x66\x81\x0c\x24\x00\x01");
		e8(g, 0x6a);
		e8(g, FZ_USER_CS);
		lea = fz_lea_rip(g, RAX, true);
		e8(g, 0x50);
		EMIT(g, "\x48\xcf");
	} else {
		/* 32-bit slots: ss, esp, eflags, cs, eip */
		EMIT(g, "\x48\x83\xec\x14");	/* sub $20,%rsp */
		EMIT(g, "\xc7\x44\x24\x10");	/* movl $ss,16(%rsp) */
		e32(g, FZ_USER_DS);
		EMIT(g, "\x89\x44\x24\x0c");	/* mov %eax,12(%rsp) */
		EMIT(g, "\x9c\x58");		/* pushf; pop %rax */
		if (tf)
			EMIT(g, "\x0d\x00\x01\x00\x00");	/* or $TF,%eax */
		EMIT(g, "\x89\x44\x24\x08");	/* mov %eax,8(%rsp) */
		EMIT(g, "\xc7\x44\x24\x04");	/* movl $cs,4(%rsp) */
		e32(g, FZ_USER_CS);
		lea = fz_lea_rip(g, RAX, false);
		EMIT(g, "\x89\x04\x24");	/* mov %eax,(%rsp) */
		e8(g, 0xcf);
	}
	fz_land32(g, lea);
	if (tf) {
		g->tf = true;
		fz_filler(g, 0, 2);
		fz_tf_off(g);
	}
}

/* PUSHF/POPF in both sizes, and the program's own TF for a stretch. */
static void item_flags(struct fz_gen *g)
{
	int reg = fz_reg(g, 0);

	switch (fz_below(g, 4)) {
	case 0:	/* a round trip through a register, CF PF AF ZF flipped */
		fz_noise_prefix(g);
		e8(g, 0x9c);
		fz_rex(g, false, 0, reg, false);
		e8(g, 0x58 + (reg & 7));
		fz_alu(g, 1U << reg);
		fz_rex(g, true, 0, reg, false);
		e8(g, 0x83);	/* xor $imm8,%reg */
		e8(g, fz_modrm(3, 6, reg));
		e8(g, fz_rand(g) & 0x55);
		fz_rex(g, false, 0, reg, false);
		e8(g, 0x50 + (reg & 7));
		fz_noise_prefix(g);
		e8(g, 0x9d);
		break;
	case 1:	/* 16-bit */
		e8(g, 0x66);
		fz_noise_prefix(g);
		e8(g, 0x9c);
		fz_alu(g, 0);
		fz_noise_prefix(g);
		EMIT(g, "\x66\x9d");
		break;
	default:	/* TF on, a few instructions, TF off */
		fz_tf_on(g);
		fz_filler(g, 0, 2);
		if (fz_below(g, 2))
			item_jcc(g);
		if (fz_below(g, 2)) {
			fz_noise_prefix(g);
			EMIT(g, "\x9c\x58");	/* the program sees its TF */
		}
		if (fz_below(g, 2))
			item_call(g);
		fz_tf_off(g);
		break;
	}
}

/* MOV SS delays the trap past the next instruction. */
static void item_mov_ss(struct fz_gen *g)
{
	bool tf = fz_below(g, 2);

	if (tf)
		fz_tf_on(g);
	EMIT(g, "\x8c\xd0\x8e\xd0");	/* mov %ss,%eax; mov %eax,%ss */
	switch (fz_below(g, 5)) {
	case 0:
		EMIT(g, "\x9c\x58");	/* pushf; pop %rax */
		break;
	case 1:
		item_jmp(g);
		break;
	case 2:
		item_jcc(g);
		break;
	case 3:
		EMIT(g, "\x8e\xd0");	/* a second mov ss */
		fz_alu(g, 0);
		break;
	default:
		fz_alu(g, 0);
		break;
	}
	if (tf)
		fz_tf_off(g);
}

static void item_syscall(struct fz_gen *g)
{
	bool tf = !fz_below(g, 3);

	if (tf)
		fz_tf_on(g);
	if (fz_below(g, 2))
		EMIT(g, "\xb8\x66\x00\x00\x00\x0f\x05");	/* getuid */
	else
		EMIT(g, "\xb8\x18\x00\x00\x00\xcd\x80");	/* int $0x80 */
	if (tf)
		fz_tf_off(g);
}

/* Traps and faults: the handler sees each and resumes at %r14. */
static void item_signal(struct fz_gen *g)
{
	bool tf = !fz_below(g, 4);
	size_t resume;

	if (tf)
		fz_tf_on(g);
	resume = fz_arm_resume(g);
	switch (fz_below(g, 8)) {
	case 0:
		e8(g, 0xf1);	/* int1 */
		break;
	case 1:
		e8(g, 0xcc);
		break;
	case 2:
		EMIT(g, "\xcd\x03");
		break;
	case 3:
		EMIT(g, "\x0f\x0b");	/* ud2 */
		break;
	case 4:
		EMIT(g, "\x8a\x04\x25\x00\x00\x00\x00");	/* mov 0,%al */
		break;
	case 5:
		EMIT(g, "\xb9\x00\x00\x00\x00\xf7\xf1");	/* div by 0 */
		break;
	case 6:
		e8(g, 0xf4);	/* hlt */
		break;
	default:
		EMIT(g, "\x0f\x01\xf8");	/* swapgs */
		break;
	}
	fz_land32(g, resume);
	if (tf)
		fz_tf_off(g);
}

/* A VEX encoding, reg-reg, of map @map and prefix @pp. */
static void fz_vex(struct fz_gen *g, int map, int pp, bool w, uint8_t op,
		   bool imm)
{
	int dst = fz_below(g, 16), src = fz_below(g, 16), v = fz_below(g, 16);

	e8(g, 0xc4);
	e8(g, (!(dst & 8)) << 7 | 1 << 6 | (!(src & 8)) << 5 | map);
	e8(g, w << 7 | (~v & 15) << 3 | pp);
	e8(g, op);
	e8(g, fz_modrm(3, dst, src));
	if (imm)
		e8(g, fz_below(g, 8));
}

/*
 * VEX encodings whose opcode byte is a branch, PUSHF or POPF in the one-byte
 * map; EVEX ones, which may not run here (#UD, resumed); XOP ones.
 */
static void item_vector(struct fz_gen *g)
{
	size_t resume = fz_arm_resume(g);
	unsigned int n;

	for (n = 1 + fz_below(g, 4); n; n--) {
		switch (fz_below(g, 12)) {
		case 0:
			EMIT(g, "\xc5\xf8\x77");	/* vzeroupper */
			break;
		case 1:
			fz_vex(g, 1, 1, false, 0x74, false);	/* vpcmpeqb */
			break;
		case 2:
			fz_vex(g, 1, 1, false, 0xeb, false);	/* vpor */
			break;
		case 3:
			fz_vex(g, 1, 1, false, 0xe8, false);	/* vpsubsb */
			break;
		case 4:
			fz_vex(g, 2, 1, false, 0x9c, false);	/* vfnmadd132ps */
			break;
		case 5:
			fz_vex(g, 2, 1, true, 0x9d, false);	/* vfnmadd132sd */
			break;
		case 6:
			fz_vex(g, 1, 0, false, 0xc2, true);	/* vcmpps */
			break;
		case 7:
			fz_vex(g, 2, 1, false, 0x00, false);	/* vpshufb */
			break;
		case 8:	/* vmovdqu %xmmN,disp(%rbx) */
			EMIT(g, "\xc5\xfa\x7f");
			e8(g, fz_modrm(1, fz_below(g, 8), RBX));
			e8(g, 16 * fz_below(g, FZ_DISP8_SLOTS / 2));
			break;
		case 9:	/* vpaddd %zmm1,%zmm2,%zmm3 */
			EMIT(g, "\x62\xf1\x6d\x48\xfe\xd9");
			break;
		case 10:
			/*
			 * XOP vphaddbw %xmm0,%xmm1, only where the CPU has
			 * XOP: elsewhere 8F /5 should raise #UD, but TCG runs
			 * it as a POP.
			 */
			if (fz_has_xop)
				EMIT(g, "\x8f\xe9\x78\xc1\xc8");
			break;
		default:
			fz_alu(g, 0);
			break;
		}
	}
	fz_land32(g, resume);
}

/* REP string instructions: iterations are not branches. */
static void item_string(struct fz_gen *g)
{
	EMIT(g, "\x48\x8d\x7b");	/* lea disp(%rbx),%rdi */
	e8(g, 8 * fz_below(g, 8));
	EMIT(g, "\x48\x8d\x73");	/* lea disp(%rbx),%rsi */
	e8(g, 8 * fz_below(g, 8));
	e8(g, 0xb9);
	e32(g, fz_below(g, 64));
	switch (fz_below(g, 3)) {
	case 0:
		EMIT(g, "\xf3\xaa");	/* rep stosb */
		break;
	case 1:
		EMIT(g, "\xf3\xa4");	/* rep movsb */
		break;
	default:
		EMIT(g, "\xf3\xa6");	/* repe cmpsb */
		break;
	}
}

struct fz_item {
	const char *name;
	void (*emit)(struct fz_gen *g);
};

static const struct fz_item fz_items[] = {
	{ "alu", item_alu },
	{ "jcc", item_jcc },
	{ "jcc_loop", item_jcc_loop },
	{ "loop", item_loop },
	{ "jcxz", item_jcxz },
	{ "jmp", item_jmp },
	{ "indirect", item_indirect },
	{ "call", item_call },
	{ "push_ret", item_push_ret },
	{ "far", item_far },
	{ "compat", item_compat },
	{ "iret", item_iret },
	{ "flags", item_flags },
	{ "mov_ss", item_mov_ss },
	{ "syscall", item_syscall },
	{ "signal", item_signal },
	{ "vector", item_vector },
	{ "string", item_string },
};

#define FZ_NR_ITEMS	ARRAY_SIZE(fz_items)

/*
 * A block: its seed and which of its items are in. Item i is drawn from
 * its own generator state, so leaving items out keeps the others as
 * they were.
 */
struct fz_block {
	uint64_t seed;
	unsigned int nr;
	bool in[FZ_MAX_ITEMS];
	uint8_t kind[FZ_MAX_ITEMS];
	size_t start[FZ_MAX_ITEMS + 1];
};

static void fz_block_init(struct fz_block *b, uint64_t seed)
{
	struct fz_gen g = { .rng = seed };
	unsigned int i;

	memset(b, 0, sizeof(*b));
	b->seed = seed;
	b->nr = 3 + fz_below(&g, FZ_MAX_ITEMS / 2);
	for (i = 0; i < b->nr; i++) {
		b->in[i] = true;
		b->kind[i] = fz_below(&g, FZ_NR_ITEMS);
	}
}

/* The code of @b into @g; returns the address of the final int3. */
static uint32_t fz_block_code(struct fz_block *b, struct fz_gen *g)
{
	unsigned int i;

	g->len = 0;
	g->compat = false;
	g->tf = false;
	if (fz_has_avx)
		EMIT(g, "\xc5\xfc\x77");	/* vzeroall: no state from before */
	for (i = 0; i < b->nr; i++) {
		b->start[i] = g->len;
		if (!b->in[i])
			continue;
		g->rng = fz_mix(b->seed, i + 1);
		fz_items[b->kind[i]].emit(g);
	}
	b->start[b->nr] = g->len;
	e8(g, 0xcc);
	return FZ_CODE + g->len - 1;
}

/* --- running a block --- */

struct fz_tracee {
	pid_t pid;
	int backend;	/* PTRACE_BTS_BACKEND_*, -1: not branch traced */
	struct user_regs_struct regs0;
	struct user_fpregs_struct fp0;
};

/* The end state of one run of a block. */
struct fz_state {
	struct user_regs_struct regs;
	struct user_fpregs_struct fp;
	uint8_t ymmh[256];
	uint8_t data[FZ_DATA_SIZE];
	long nrec;
	struct bts_struct rec[FZ_RECORDS];
	char fail[160];
};

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

/* --- comparing --- */

struct fz_ctx {
	struct fz_tracee tracee[3];	/* untraced, then the backends */
	unsigned int nr_tracees;
	struct fz_state *state[3];
	struct fz_gen gen;
	unsigned long blocks, runs, records;
};

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

static void fz_dump(struct fz_ctx *c, struct fz_block *b)
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

static int fz_init(struct fz_ctx *c, int backend)
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

static void fz_fini(struct fz_ctx *c)
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
static int fz_one(struct fz_ctx *c, struct fz_block *b, const char *where)
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

/* What a worker tells the parent. */
struct fz_tally {
	unsigned long blocks, runs, records;
	int bad;
};

/*
 * Run the blocks in @workers processes at once (one per CPU: TCG runs
 * vCPUs in parallel), each with its own tracees and mappings. Returns the
 * number of divergences, or -1 when a worker could not run.
 */
static int fz_parallel(uint64_t seed, unsigned long blocks, int backend,
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

static unsigned int fz_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n >= 2 ? 2 : 1;
}

/* The options of main(): --backend and --case-blocks. */
static const char *fz_opt_backend;
static unsigned long fz_opt_case_blocks;

#define FZ_BACKEND_NONE		(-1)
#define FZ_BACKEND_UNKNOWN	(-2)

/*
 * The backend --backend names, else the one the kernel says the machine
 * has; "none" runs each block untraced twice, a check of the test itself.
 */
static int fz_backend(void)
{
	const char *name = fz_opt_backend;

	if (!name)
		return expected_backend();
	if (!strcmp(name, "none"))
		return FZ_BACKEND_NONE;
	if (!strcmp(name, "any"))
		return PTRACE_BTS_BACKEND_ANY;
	if (!strcmp(name, "hardware"))
		return PTRACE_BTS_BACKEND_HARDWARE;
	if (!strcmp(name, "emulated"))
		return PTRACE_BTS_BACKEND_EMULATED;
	return FZ_BACKEND_UNKNOWN;
}

/* Blocks per test case, unless --case-blocks says otherwise. */
#define FZ_BLOCKS		1500
#define FZ_BLOCKS_HW		1000

static unsigned long fz_blocks(unsigned long dflt)
{
	return fz_opt_case_blocks ?: dflt;
}

/* Each case its own seed. */
FIXTURE(fuzz) {
};

FIXTURE_VARIANT(fuzz) {
	uint64_t seed;
};

FIXTURE_VARIANT_ADD(fuzz, seed_1) { .seed = 0x5eed0001 };
FIXTURE_VARIANT_ADD(fuzz, seed_2) { .seed = 0x5eed0002 };
FIXTURE_VARIANT_ADD(fuzz, seed_3) { .seed = 0x5eed0003 };
FIXTURE_VARIANT_ADD(fuzz, seed_4) { .seed = 0x5eed0004 };

FIXTURE_SETUP(fuzz)
{
}

FIXTURE_TEARDOWN(fuzz)
{
}

/*
 * Every block ends the same untraced and traced, and two backends record
 * the same branches. Where the hardware backend runs too, each block costs
 * a third run: fewer blocks per case.
 */
TEST_F_TIMEOUT(fuzz, blocks_agree, 300)
{
	int backend = fz_backend();
	struct fz_tally sum;

	EXPECT_EQ(0, fz_parallel(variant->seed,
				 fz_blocks(backend == PTRACE_BTS_BACKEND_HARDWARE ?
					   FZ_BLOCKS_HW : FZ_BLOCKS),
				 backend, fz_workers(), &sum));
	ksft_print_msg("%lu blocks, %lu runs, %lu records compared\n",
		       sum.blocks, sum.runs, sum.records);
}

/* --- other threads: code rewritten while the traced thread runs it --- */

/*
 * The traced thread calls a small function in a page of a memfd, mapped
 * executable at XM_CODE and writable at XM_ALIAS. A second thread of the
 * tracee (not traced) stores one of two forms of the word at XM_SITE, as
 * fast as it can, while a third spins on the traced thread's CPU so that
 * it is preempted often. Every call returns a value that shows which form
 * ran and whether a TF that was not the program's got into its data or
 * its flags: a PUSHF that stored the program's TF clear, a word nothing
 * pushed left alone, a POPF that loaded the program's flags without a
 * single-step trap of its own. The jcc forms count the calls that took
 * the branch, which the records from XM_SITE must match. The calls go on
 * past XM_CALLS until both forms ran, for XM_SECONDS at most.
 */
#define XM_CODE			0x30000000UL
#define XM_ALIAS		0x30100000UL
#define XM_SITE_OFF		0x40		/* even: one 16-bit store */
#define XM_SITE			(XM_CODE + XM_SITE_OFF)
#define XM_CALLS		1000
#define XM_SECONDS		10	/* at most, to see both forms */
#define XM_BUF_SIZE		(4UL << 20)	/* the largest trace buffer */
#define XM_MARK			0x5a5a0100UL	/* TF's bit, no flags' bit 1 */
#define XM_FLAGS_FIXED		0x2

/**
 * struct xm_form - a function whose word at XM_SITE_OFF is rewritten
 * @head:   its bytes up to the site
 * @site:   the two bytes at the site, as the code starts
 * @alt:    the other form of those two bytes
 * @tail:   its bytes after the site
 * @stub:   bytes at XM_SITE + @target, if any
 * @check:  what a call's result says: 0 or 1 for the form that ran, -1 for
 *	    a result no form gives
 * @jcc:    the forms are a jcc to @target and what it is rewritten to
 * @target: the jcc's target, from XM_SITE
 * @int3:   no rewriter thread: the tracer inserts and removes an int3 at
 *	    the site through /proc/PID/mem, as a debugger in non-stop mode
 *	    does, and the code is a private mapping, as a program's is
 * @uprobe: no rewriter thread: the tracer registers and removes a uprobe
 *	    right before the site, in a private mapping as @int3
 *
 * Only the site's first byte differs between the forms: a CPU may fetch
 * the bytes of an instruction another CPU writes one at a time.
 */
struct xm_form {
	const uint8_t *head, *tail, *stub;
	uint8_t head_len, tail_len, stub_len;
	uint8_t site[2], alt[2];
	int (*check)(long r, long arg);
	bool jcc;
	unsigned int target;
	bool int3, uprobe;
};

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
static int xm_check_jcc(long r, long arg)
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

static const struct xm_form xm_forms[] = {
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
static bool xm_by_tracer(const struct xm_form *form)
{
	return form->int3 || form->uprobe;
}

/* What a run found, in memory the tracee shares with the tracer. */
struct xm_result {
	unsigned long calls, rewrites, seen[2], bad, taken, preempted, hits;
	int memfd;
	long first_bad, first_arg;
	int stop, done;
	/* the tracer's */
	unsigned long stops, records, from_site, stray;
	char fail[160];
};

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
static int xm_run(const struct xm_form *form, int backend,
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

static void xm_print(const char *how, const struct xm_result *r)
{
	ksft_print_msg("%s: %lu calls (%lu, %lu by form, %lu bad, first %#lx for %ld)\n",
		       how, r->calls, r->seen[0], r->seen[1], r->bad,
		       r->first_bad, r->first_arg);
	ksft_print_msg("%s: %lu rewrites, %lu hits, %lu preempted\n",
		       how, r->rewrites, r->hits, r->preempted);
	ksft_print_msg("%s: %lu taken, %lu records, %lu from site, %lu stray\n",
		       how, r->taken, r->records, r->from_site, r->stray);
}

FIXTURE(xmod) {
	struct xm_result *res;
};

FIXTURE_VARIANT(xmod) {
	unsigned int form;
};

FIXTURE_VARIANT_ADD(xmod, pushf) { .form = 0 };
FIXTURE_VARIANT_ADD(xmod, pushf_len) { .form = 1 };
FIXTURE_VARIANT_ADD(xmod, popf) { .form = 2 };
FIXTURE_VARIANT_ADD(xmod, popf_len) { .form = 3 };
FIXTURE_VARIANT_ADD(xmod, jcc) { .form = 4 };
FIXTURE_VARIANT_ADD(xmod, jcc_len) { .form = 5 };
FIXTURE_VARIANT_ADD(xmod, int3) { .form = 6 };
FIXTURE_VARIANT_ADD(xmod, uprobe) { .form = 7 };

FIXTURE_SETUP(xmod)
{
	self->res = mmap(NULL, sizeof(*self->res), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->res);
}

FIXTURE_TEARDOWN(xmod)
{
	munmap(self->res, sizeof(*self->res));
}

/*
 * Untraced first: every call's result is one that a form gives, and both
 * forms ran (the rewrites landed while the calls ran). Then traced: the
 * same, no signal of its own, and the jcc forms' records from the site
 * are exactly the taken calls (never more: a record is a branch the CPU
 * took; the jz/jnz forms, which the trace always decodes as one of them,
 * lose none).
 */
TEST_F_TIMEOUT(xmod, results_hold, 240)
{
	const struct xm_form *form = &xm_forms[variant->form];
	int backend = fz_backend();
	struct xm_result *r = self->res;

	ASSERT_EQ(0, xm_run(form, -1, r)) TH_LOG("untraced: %s", r->fail);
	xm_print("untraced", r);
	ASSERT_EQ(0, r->bad);
	ASSERT_NE(0, xm_by_tracer(form) ? r->hits : r->seen[0]);
	ASSERT_NE(0, r->seen[1]);
	if (backend < 0)
		return;
	EXPECT_EQ(0, xm_run(form, backend, r)) TH_LOG("traced: %s", r->fail);
	xm_print("traced", r);
	EXPECT_EQ(0, r->bad);
	EXPECT_NE(0, xm_by_tracer(form) ? r->hits : r->seen[0]);
	EXPECT_NE(0, r->seen[1]);
	if (!form->jcc)
		return;
	EXPECT_EQ(0, r->stray);
	/* where the forms differ in shape, a record may be lost, not made */
	EXPECT_GE(r->taken, r->from_site);
	if (form->check == xm_check_jcc)
		EXPECT_EQ(r->taken, r->from_site);
}

static void fz_usage(void)
{
	fprintf(stderr,
		"usage: ptrace_bts_fuzz [--backend B] --seed S --blocks N\n"
		"       ptrace_bts_fuzz [--backend B] --block-seed X\n"
		"       ptrace_bts_fuzz [--backend B] [--case-blocks N] [harness options]\n"
		"B: hardware, emulated, any or none (untraced twice)\n");
}

int main(int argc, char **argv)
{
	unsigned long long seed = 1, block_seed = 0;
	unsigned long blocks = 0;
	struct fz_tally sum;
	struct fz_block b;
	struct fz_ctx c;
	int i, bad;

	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
		char *name = argv[i], *val = strchr(name, '=');

		/* --name value, or --name=value */
		if (val)
			*val++ = 0;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			break;
		if (!strcmp(name, "--seed")) {
			seed = strtoull(val, NULL, 0);
		} else if (!strcmp(name, "--blocks")) {
			blocks = strtoul(val, NULL, 0);
		} else if (!strcmp(name, "--block-seed")) {
			block_seed = strtoull(val, NULL, 0);
		} else if (!strcmp(name, "--backend")) {
			fz_opt_backend = val;
		} else if (!strcmp(name, "--case-blocks")) {
			fz_opt_case_blocks = strtoul(val, NULL, 0);
		} else {
			fz_usage();
			return 2;
		}
	}
	if (fz_backend() == FZ_BACKEND_UNKNOWN ||
	    (i < argc && (blocks || block_seed))) {
		fz_usage();
		return 2;
	}
	if (block_seed) {
		if (fz_init(&c, fz_backend())) {
			perror("ptrace_bts_fuzz");
			return 2;
		}
		fz_block_init(&b, block_seed);
		bad = fz_one(&c, &b, "block");
		if (!bad)
			fz_dump(&c, &b);
		printf("%s\n", bad ? "diverges" : "agrees");
		fz_fini(&c);
		return bad;
	}
	if (!blocks) {
		/* The harness sees the program's name, then its own options. */
		argv[i - 1] = argv[0];
		return test_harness_run(argc - i + 1, argv + i - 1);
	}
	bad = fz_parallel(seed, blocks, fz_backend(), fz_workers(), &sum);
	printf("%lu blocks, %lu runs, %lu records compared, %d divergence%s\n",
	       sum.blocks, sum.runs, sum.records, bad, bad == 1 ? "" : "s");
	return bad ? 1 : 0;
}
