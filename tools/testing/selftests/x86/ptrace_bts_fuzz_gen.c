// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_fuzz: the generator's state and what emits the bytes, the
 * registers and the short sequences of the items.
 */
#define _GNU_SOURCE
#include "ptrace_bts_fuzz.h"

/*
 * What the block may write: all but %rbx (the scratch memory), %rsp and
 * %r14 (where the handler resumes a faulting instruction).
 */
static const uint8_t fz_free_regs[] = {
	RAX, RCX, RDX, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R15,
};

/* The CPU's features the generator asks for; absent ones still run (#UD). */
bool fz_has_avx, fz_has_xop, fz_amd;

uint64_t fz_rand(struct fz_gen *g)
{
	/* splitmix64 */
	uint64_t z = (g->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

unsigned int fz_below(struct fz_gen *g, unsigned int n)
{
	return fz_rand(g) % n;
}

void e8(struct fz_gen *g, uint8_t b)
{
	g->buf[g->len++] = b;
}

void e16(struct fz_gen *g, uint16_t v)
{
	memcpy(g->buf + g->len, &v, sizeof(v));
	g->len += sizeof(v);
}

void e32(struct fz_gen *g, uint32_t v)
{
	memcpy(g->buf + g->len, &v, sizeof(v));
	g->len += sizeof(v);
}

void emit(struct fz_gen *g, const char *bytes, size_t n)
{
	memcpy(g->buf + g->len, bytes, n);
	g->len += n;
}

/* The address the next byte runs at. */
uint32_t fz_here(struct fz_gen *g)
{
	return FZ_CODE + g->len;
}

/* A forward rel8/rel32 field at @at now points here. */
void fz_land8(struct fz_gen *g, size_t at)
{
	long rel = (long)g->len - (long)(at + 1);

	if (rel > 127)
		abort();	/* the items keep short jumps short */
	g->buf[at] = rel;
}

void fz_land32(struct fz_gen *g, size_t at)
{
	int32_t rel = g->len - (at + 4);

	memcpy(g->buf + at, &rel, sizeof(rel));
}

/* A rel8 field that jumps back to @target. */
void fz_back8(struct fz_gen *g, size_t target)
{
	long rel = (long)target - (long)(g->len + 1);

	if (rel < -128)
		abort();
	e8(g, (uint8_t)rel);
}

uint8_t fz_modrm(int mod, int reg, int rm)
{
	return mod << 6 | (reg & 7) << 3 | (rm & 7);
}

/* A REX prefix for 64-bit code, when one is needed or wanted. */
void fz_rex(struct fz_gen *g, bool w, int reg, int rm, bool force)
{
	uint8_t rex = 0x40 | w << 3 | (reg >> 3) << 2 | (rm >> 3);

	if (g->compat)
		return;
	if (rex != 0x40 || force)
		e8(g, rex);
}

int fz_reg(struct fz_gen *g, unsigned int avoid)
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
void fz_noise_prefix(struct fz_gen *g)
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
void fz_alu(struct fz_gen *g, unsigned int avoid)
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
void fz_tf_on(struct fz_gen *g)
{
	EMIT(g, "\x9c\x66\x81\x0c\x24\x00\x01\x9d"); /* pushf; orw; popf */
	g->tf = true;
}

void fz_tf_off(struct fz_gen *g)
{
	EMIT(g, "\x9c\x66\x81\x2c\x24\x00\x01\x9d"); /* pushf; subw; popf */
	g->tf = false;
}

void fz_filler(struct fz_gen *g, unsigned int avoid, unsigned int max)
{
	unsigned int n = fz_below(g, max + 1);

	while (n--)
		fz_alu(g, avoid);
}

/* Bytes that never run, for the decoder to get wrong. */
void fz_junk(struct fz_gen *g)
{
	unsigned int n = fz_below(g, 8);

	while (n--)
		e8(g, fz_rand(g));
}

/* lea target(%rip),%reg with the rel32 left to fz_land32(); its offset. */
size_t fz_lea_rip(struct fz_gen *g, int reg, bool w)
{
	fz_rex(g, w, reg, 0, false);
	e8(g, 0x8d);
	e8(g, fz_modrm(0, reg, 5));
	e32(g, 0);
	return g->len - 4;
}

/* Arm the handler's resume address: the end of the current item. */
size_t fz_arm_resume(struct fz_gen *g)
{
	return fz_lea_rip(g, R14, true);
}
