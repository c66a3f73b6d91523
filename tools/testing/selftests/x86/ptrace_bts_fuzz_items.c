// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_fuzz: the items a block is made of, each self-contained and
 * leaving TF off, and a block of them in the shared code page.
 */
#define _GNU_SOURCE
#include "ptrace_bts_fuzz.h"

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

const struct fz_item fz_items[] = {
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

void fz_block_init(struct fz_block *b, uint64_t seed)
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
uint32_t fz_block_code(struct fz_block *b, struct fz_gen *g)
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
