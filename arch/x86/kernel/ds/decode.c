// SPDX-License-Identifier: GPL-2.0
/*
 * Emulated Branch Trace Store: the classifier, pure functions of the
 * instruction bytes and the registers, and the per-task decode cache.
 *
 * Taken or not is decided from the instruction and where the CPU went,
 * never from "the IP moved" alone: a direct branch whose target is not
 * the next instruction was taken exactly when the IP is at its target; a
 * jcc to the instruction right after it is evaluated against the flags
 * (which it does not change), loop/jcxz against the count register. So a
 * jump to itself and a jcc to the next instruction are recorded exactly
 * when taken, and the iterations of a REP string instruction are not
 * branches.
 *
 * The decode cache. Fetching and decoding costs more than the trap itself,
 * so every task keeps a direct-mapped cache of decoded instructions, indexed
 * by IP. An entry holds the instruction bytes and is used only while the
 * bytes at that IP are still the same (one short user read). That covers
 * execve, mmap/munmap and self-modifying code without hooking any of them.
 *
 * Prefixes. The CPU reads up to 15 bytes of prefixes and ignores a REX
 * that another prefix follows; the kernel's decoder stops at four distinct
 * legacy prefixes and takes REX only right before the opcode. The
 * classifier first rewrites the prefixes as the CPU reads them
 * (ds_emu_canon_prefixes()), so that "48 66 9c" is a PUSHW and "26 2e 36 3e
 * 64 9c" a PUSHF. Instruction bytes are read up to the end of their page
 * first, and from the next page only when the instruction goes on there:
 * the trace touches no page the program does not.
 */

#define pr_fmt(fmt) "ds_emulate: " fmt

#include <linux/hash.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include <asm/debugreg.h>
#include <asm/ds.h>
#include <asm/ds_emulate.h>
#include <asm/insn.h>
#include <asm/msr.h>
#include <asm/ptrace.h>
#include <asm/segment.h>

#include "emulate.h"
#include "internal.h"

/* Opcodes the classifier looks at. */
#define DS_EMU_OP_JCC8		0x70	/* 0x70-0x7f jcc rel8 */
#define DS_EMU_OP_JCC8_LAST	0x7f
#define DS_EMU_OP_TWO_BYTE	0x0f
#define DS_EMU_OP_JCC32		0x80	/* 0x0f 0x80-0x8f jcc rel32 */
#define DS_EMU_OP_JCC32_LAST	0x8f
#define DS_EMU_OP_POP_SS	0x17	/* not in 64-bit mode */
#define DS_EMU_OP_MOV_SREG	0x8e	/* mov Sreg, r/m16; /2 is SS */
#define DS_EMU_OP_LCALL		0x9a
#define DS_EMU_OP_PUSHF		0x9c
#define DS_EMU_OP_POPF		0x9d
#define DS_EMU_OP_RET_IMM	0xc2
#define DS_EMU_OP_RET		0xc3
#define DS_EMU_OP_LRET_IMM	0xca
#define DS_EMU_OP_LRET		0xcb
#define DS_EMU_OP_IRET		0xcf
#define DS_EMU_OP_LOOPNE	0xe0
#define DS_EMU_OP_LOOPE		0xe1
#define DS_EMU_OP_LOOP		0xe2
#define DS_EMU_OP_JCXZ		0xe3
#define DS_EMU_OP_CALL		0xe8
#define DS_EMU_OP_JMP		0xe9
#define DS_EMU_OP_LJMP		0xea
#define DS_EMU_OP_JMP8		0xeb
#define DS_EMU_OP_GRP5		0xff	/* /2 call, /3 lcall, /4 jmp, /5 ljmp */
#define DS_EMU_OP_XOP		0x8f	/* POP r/m, or AMD's XOP escape */
#define DS_EMU_OP_MOV_LOAD	0x8b	/* mov r, r/m: measures a ModRM */
#define DS_EMU_XOP_MAP_MASK	0x1f
#define DS_EMU_XOP_MAP_FIRST	8
#define DS_EMU_OP_JMPABS	0xa1	/* with REX2 in map 0 */
#define DS_EMU_OP_XBEGIN	0xc7	/* with ModRM 0xf8 */
#define DS_EMU_XBEGIN_MODRM	0xf8
#define DS_EMU_SREG_SS		2	/* ModRM.reg of mov Sreg */
#define DS_EMU_GRP5_CALL	2	/* ModRM.reg of the 0xff group */
#define DS_EMU_GRP5_LCALL	3
#define DS_EMU_GRP5_JMP		4
#define DS_EMU_GRP5_LJMP	5
#define DS_EMU_GRP5_PUSH	6

/* --- the classifier: pure functions of the bytes and the registers --- */

/* Near calls and returns push and pop 8 bytes in 64-bit mode. */
static u8 ds_emu_near_slot(const struct insn *insn)
{
	return insn->x86_64 ? 8 : insn->opnd_bytes;
}

/*
 * Instructions that may write the stack pointer without being a branch,
 * PUSHF or POPF, so that its check cannot hold them to it. Errs towards
 * yes, which only weakens the check: any ModRM that names register 4 (or
 * 12), the pushes and pops, ENTER and LEAVE, and the register forms of
 * XCHG, MOV imm, BSWAP, INC and DEC that name it.
 */
bool ds_emu_writes_sp(const struct insn *insn)
{
	u8 modrm = insn->modrm.bytes[0];
	u8 op = insn->opcode.bytes[0];

	if (insn->modrm.nbytes &&
	    (X86_MODRM_REG(modrm) == 4 ||
	     (X86_MODRM_MOD(modrm) == 3 && X86_MODRM_RM(modrm) == 4)))
		return true;
	if (op == DS_EMU_OP_TWO_BYTE) {
		op = insn->opcode.bytes[1];
		/* push and pop of fs and gs, bswap */
		return insn->opcode.nbytes == 2 &&
		       (op == 0xa0 || op == 0xa1 || op == 0xa8 || op == 0xa9 ||
			op == 0xcc);
	}
	switch (op) {
	case 0x06: case 0x07: case 0x0e: case 0x16: case 0x1e: case 0x1f:
	case 0x50 ... 0x5f:	/* push, pop */
	case 0x60: case 0x61:	/* pusha, popa */
	case 0x68: case 0x6a:	/* push imm */
	case 0x8f:		/* pop r/m */
	case 0x94:		/* xchg */
	case 0xbc:		/* mov imm */
	case 0xc8: case 0xc9:	/* enter, leave */
		return true;
	case 0x44: case 0x4c:	/* inc, dec; REX prefixes in 64-bit mode */
		return !insn->x86_64;
	case DS_EMU_OP_GRP5:
		return X86_MODRM_REG(modrm) == DS_EMU_GRP5_PUSH;
	default:
		return false;
	}
}

/* MOVS, CMPS, STOS, LODS, SCAS, INS, OUTS: one iteration per trap. */
static bool ds_emu_string(u8 op)
{
	return (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) ||
	       (op >= 0x6c && op <= 0x6f);
}

static void ds_emu_kind_other(const struct insn *insn, struct ds_emu_insn *out)
{
	out->kind = DS_EMU_OTHER;
	out->effect = ds_emu_writes_sp(insn) ? DS_EMU_FX_NEXT_SP :
					       DS_EMU_FX_NEXT;
}

/*
 * The register a ModRM names as the target, or DS_EMU_REG_MEM: a memory
 * operand, or one of REX2's r16-r31, which pt_regs does not hold.
 */
static u8 ds_emu_modrm_reg(const struct insn *insn)
{
	u8 modrm = insn->modrm.bytes[0], rex = insn->rex_prefix.bytes[0];

	if (X86_MODRM_MOD(modrm) != 3)
		return DS_EMU_REG_MEM;
	if (insn->rex_prefix.nbytes == 2) {	/* REX2 */
		rex = insn->rex_prefix.bytes[1];
		if (X86_REX2_B(rex))
			return DS_EMU_REG_MEM;
	}
	return X86_MODRM_RM(modrm) + (X86_REX_B(rex) ? 8 : 0);
}

static void ds_emu_kind_grp5(const struct insn *insn, struct ds_emu_insn *out)
{
	switch (X86_MODRM_REG(insn->modrm.bytes[0])) {
	case DS_EMU_GRP5_CALL:
		out->effect = DS_EMU_FX_CALL_IND;
		out->slot = ds_emu_near_slot(insn);
		out->reg = ds_emu_modrm_reg(insn);
		break;
	case DS_EMU_GRP5_JMP:
		out->effect = DS_EMU_FX_JMP_IND;
		out->reg = ds_emu_modrm_reg(insn);
		break;
	case DS_EMU_GRP5_LCALL:
		out->effect = DS_EMU_FX_LCALL;
		break;
	case DS_EMU_GRP5_LJMP:
		out->effect = DS_EMU_FX_LJMP;
		break;
	default:	/* inc, dec, push */
		ds_emu_kind_other(insn, out);
		return;
	}
	out->kind = DS_EMU_JUMP;
}

static void ds_emu_kind_one_byte(const struct insn *insn,
				 struct ds_emu_insn *out)
{
	u8 op = insn->opcode.bytes[0];

	out->kind = DS_EMU_JUMP;
	switch (op) {
	case DS_EMU_OP_POP_SS:
	case DS_EMU_OP_MOV_SREG:
		if (op == DS_EMU_OP_MOV_SREG &&
		    X86_MODRM_REG(insn->modrm.bytes[0]) != DS_EMU_SREG_SS) {
			ds_emu_kind_other(insn, out);
			break;
		}
		out->kind = DS_EMU_SS;
		out->effect = DS_EMU_FX_SS;
		/* what POP SS pops; MOV SS leaves the stack */
		if (op == DS_EMU_OP_MOV_SREG)
			out->slot = 0;
		break;
	case DS_EMU_OP_JCC8 ... DS_EMU_OP_JCC8_LAST:
		out->kind = DS_EMU_JCC;
		out->cond = op & DS_EMU_CC_MASK;
		out->effect = DS_EMU_FX_REL;
		break;
	case DS_EMU_OP_LOOPNE:
	case DS_EMU_OP_LOOPE:
	case DS_EMU_OP_LOOP:
		out->kind = DS_EMU_LOOP;
		out->cond = op == DS_EMU_OP_LOOPNE ? DS_EMU_LOOP_NZF :
			    op == DS_EMU_OP_LOOPE ? DS_EMU_LOOP_ZF :
			    DS_EMU_LOOP_ANY;
		out->effect = DS_EMU_FX_REL;
		break;
	case DS_EMU_OP_JCXZ:
		out->kind = DS_EMU_JCXZ;
		out->effect = DS_EMU_FX_REL;
		break;
	case DS_EMU_OP_CALL:
		out->effect = DS_EMU_FX_CALL_REL;
		out->slot = ds_emu_near_slot(insn);
		break;
	case DS_EMU_OP_JMP:
	case DS_EMU_OP_JMP8:
		out->effect = DS_EMU_FX_REL;
		break;
	case DS_EMU_OP_RET_IMM:
	case DS_EMU_OP_RET:
		out->effect = DS_EMU_FX_RET;
		out->slot = ds_emu_near_slot(insn);
		out->imm = op == DS_EMU_OP_RET_IMM ? insn->immediate.value : 0;
		break;
	case DS_EMU_OP_LRET_IMM:
	case DS_EMU_OP_LRET:
		out->effect = DS_EMU_FX_LRET;
		out->imm = op == DS_EMU_OP_LRET_IMM ? insn->immediate.value : 0;
		break;
	case DS_EMU_OP_LCALL:
		out->effect = DS_EMU_FX_LCALL;
		break;
	case DS_EMU_OP_LJMP:
		out->effect = DS_EMU_FX_LJMP;
		break;
	case DS_EMU_OP_XBEGIN:
		ds_emu_kind_other(insn, out);
		/* An abort goes to its fallback: no branch to the trace. */
		if (insn->modrm.bytes[0] == DS_EMU_XBEGIN_MODRM) {
			out->effect = DS_EMU_FX_REL;
			out->rel = insn->immediate.value;
		}
		return;
	case DS_EMU_OP_IRET:
		out->kind = DS_EMU_IRET;
		out->effect = DS_EMU_FX_IRET;
		break;
	case DS_EMU_OP_POPF:
		out->kind = DS_EMU_POPF;
		out->effect = DS_EMU_FX_POPF;
		break;
	case DS_EMU_OP_PUSHF:
		out->kind = DS_EMU_PUSHF;
		out->effect = DS_EMU_FX_PUSHF;
		break;
	case DS_EMU_OP_GRP5:
		ds_emu_kind_grp5(insn, out);
		break;
	default:
		ds_emu_kind_other(insn, out);
		break;
	}
	if (out->effect == DS_EMU_FX_REL || out->effect == DS_EMU_FX_CALL_REL)
		out->rel = insn->immediate.value;
}

static void ds_emu_kind_two_byte(const struct insn *insn,
				 struct ds_emu_insn *out)
{
	u8 op = insn->opcode.bytes[1];

	if (insn->opcode.nbytes == 2 &&
	    op >= DS_EMU_OP_JCC32 && op <= DS_EMU_OP_JCC32_LAST) {
		out->kind = DS_EMU_JCC;
		out->cond = op & DS_EMU_CC_MASK;
		out->effect = DS_EMU_FX_REL;
		out->rel = insn->immediate.value;
		return;
	}
	ds_emu_kind_other(insn, out);
}

/*
 * REX2 (APX) puts the map in a prefix bit: with M0 set, opcode.bytes[0]
 * is an opcode of the 0x0f map (D5 80 9C C0 is SETL, not PUSHF), none of
 * which branches (Jcc rel32 takes no REX2). Map 0 is the one-byte map:
 * PUSHF, POPF, RET, IRET and the 0xff group take REX2 (D5 10 FF D0 is
 * call *%r16), the relative branches do not (the decoder refuses them),
 * and JMPABS (D5 00 A1 imm64) is REX2 only: an absolute jump that pushes
 * nothing.
 */
static void ds_emu_kind_rex2(const struct insn *insn, struct ds_emu_insn *out)
{
	u8 rex2 = insn->rex_prefix.bytes[1];

	if (X86_REX2_M(rex2)) {
		ds_emu_kind_other(insn, out);
		return;
	}
	if (insn->opcode.bytes[0] == DS_EMU_OP_JMPABS && !X86_REX_W(rex2)) {
		out->kind = DS_EMU_JUMP;
		out->effect = DS_EMU_FX_JMP_IND;
		out->reg = DS_EMU_REG_MEM;
		return;
	}
	ds_emu_kind_one_byte(insn, out);
}

static bool ds_emu_legacy_prefix(u8 b)
{
	switch (b) {
	case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65:
	case 0x66: case 0x67: case 0xf0: case 0xf2: case 0xf3:
		return true;
	default:
		return false;
	}
}

/*
 * The prefixes as the CPU reads them. The kernel's decoder keeps at most
 * four different legacy prefixes and takes REX only right before the
 * opcode; the CPU takes any number up to the 15-byte limit and ignores a
 * REX that another prefix follows. So "48 66 9c" is PUSHW and "26 2e 36 3e
 * 64 9c" is PUSHF, where the decoder would see opcodes 66 and 64. Rewrite
 * the prefixes into @out as what matters to the trace: operand size,
 * address size, the last of F2/F3, then the REX that counts (segment
 * overrides and LOCK change no branch and no flags). Returns how many
 * bytes shorter @out is than @buf, or -EINVAL without an opcode.
 */
static int ds_emu_canon_prefixes(const u8 *buf, int size, bool mode64,
				 u8 *out, int *out_size, int *out_prefixes)
{
	bool opsize = false, adsize = false;
	u8 rep = 0, rex = 0;
	int i, n = 0;

	for (i = 0; i < size; i++) {
		if (mode64 && (buf[i] & 0xf0) == 0x40) {
			rex = buf[i];
			continue;
		}
		if (!ds_emu_legacy_prefix(buf[i]))
			break;
		rex = 0;
		if (buf[i] == 0x66)
			opsize = true;
		else if (buf[i] == 0x67)
			adsize = true;
		else if (buf[i] == 0xf2 || buf[i] == 0xf3)
			rep = buf[i];
	}
	if (i == size)
		return -EINVAL;
	if (opsize)
		out[n++] = 0x66;
	if (adsize)
		out[n++] = 0x67;
	if (rep)
		out[n++] = rep;
	if (rex)
		out[n++] = rex;
	memcpy(out + n, buf + i, size - i);
	*out_size = n + size - i;
	*out_prefixes = n;
	return i - n;
}

/*
 * The length of an AMD XOP instruction (8F with a map of 8 or more where
 * POP r/m would have one of 0-7) at @buf, after @prefixes prefix bytes, or
 * -EINVAL. The kernel's decoder does not know XOP; no XOP instruction
 * branches or touches the flags' TF, but the length must be right for the
 * decode cache and the MOV SS shadow. ModRM, SIB and displacement are
 * measured on a MOV r, r/m with the same ModRM bytes.
 */
static int ds_emu_xop_len(const u8 *buf, int size, int prefixes, bool mode64)
{
	/* immediate bytes of maps 8, 9 and 0xa */
	static const u8 xop_imm[] = { 1, 0, 4 };
	int map, i, n = 0, modrm_len;
	u8 mov[MAX_INSN_SIZE];
	struct insn insn;

	if (prefixes + 4 >= size)
		return -EINVAL;
	map = buf[prefixes + 1] & DS_EMU_XOP_MAP_MASK;
	if (map < DS_EMU_XOP_MAP_FIRST ||
	    map >= DS_EMU_XOP_MAP_FIRST + ARRAY_SIZE(xop_imm))
		return -EINVAL;
	for (i = 0; i < prefixes; i++)
		if (buf[i] == 0x67)
			mov[n++] = 0x67;
	mov[n++] = DS_EMU_OP_MOV_LOAD;
	memcpy(mov + n, buf + prefixes + 4, size - prefixes - 4);
	if (insn_decode(&insn, mov, n + size - prefixes - 4,
			mode64 ? INSN_MODE_64 : INSN_MODE_32))
		return -EINVAL;
	modrm_len = insn.length - n;
	return prefixes + 4 + modrm_len +
	       xop_imm[map - DS_EMU_XOP_MAP_FIRST];
}

/*
 * A near branch with a 16-bit operand size truncates the IP to 16 bits, and
 * its call or return pushes or pops 2 bytes. In 64-bit mode Intel CPUs
 * ignore the 0x66 prefix of near branches (as the kernel's decoder reads
 * them), AMD CPUs honour it, and take a rel16 where Intel takes a rel32.
 */
static void ds_emu_near16(const struct insn *insn, bool amd,
			  struct ds_emu_insn *out)
{
	switch (out->effect) {
	case DS_EMU_FX_REL:
	case DS_EMU_FX_CALL_REL:
	case DS_EMU_FX_CALL_IND:
	case DS_EMU_FX_JMP_IND:
	case DS_EMU_FX_RET:
		break;
	default:
		return;
	}
	out->ip16 = true;
	if (!insn->x86_64)
		return;
	if (!amd) {
		out->ip16 = false;
		return;
	}
	if (out->slot)
		out->slot = 2;
	if (insn->immediate.nbytes == 4 &&
	    (out->effect == DS_EMU_FX_REL || out->effect == DS_EMU_FX_CALL_REL)) {
		out->len -= 2;
		out->rel = (s16)out->rel;
	}
}

/* 66 (no REX.W) E8, E9 or 0F 8x in the canonical prefixes of @buf. */
static bool ds_emu_amd_rel16(const u8 *buf, int size, int prefixes)
{
	const u8 *op = buf + prefixes;
	bool opsize = false;
	int i;

	for (i = 0; i < prefixes; i++) {
		if (buf[i] == 0x66)
			opsize = true;
		else if ((buf[i] & 0xf0) == 0x40 && X86_REX_W(buf[i]))
			return false;
	}
	if (!opsize || prefixes >= size)
		return false;
	if (op[0] == DS_EMU_OP_CALL || op[0] == DS_EMU_OP_JMP)
		return true;
	return op[0] == DS_EMU_OP_TWO_BYTE && prefixes + 1 < size &&
	       op[1] >= DS_EMU_OP_JCC32 && op[1] <= DS_EMU_OP_JCC32_LAST;
}

/**
 * __ds_emu_classify() - decode one instruction for the branch trace
 * @buf:    the instruction bytes
 * @size:   bytes available at @buf
 * @mode64: decode in 64-bit mode, else in 32-bit mode
 * @amd:    as an AMD CPU runs it, else as an Intel one
 * @out:    filled in: everything but @ip and @bytes
 *
 * Return: 0, or -EINVAL if the bytes do not decode.
 */
VISIBLE_IF_KUNIT int __ds_emu_classify(const u8 *buf, int size, bool mode64, bool amd,
				       struct ds_emu_insn *out)
{
	int removed, canon_size, prefixes, len, i, pad = 0;
	bool opsize = false, rep = false;
	u8 canon[MAX_INSN_SIZE];
	struct insn insn;

	removed = ds_emu_canon_prefixes(buf, size, mode64, canon, &canon_size,
					&prefixes);
	if (removed < 0)
		return -EINVAL;
	out->mode64 = mode64;
	out->cond = 0;
	out->slot = 0;
	out->ip16 = false;
	out->imm = 0;
	out->reg = DS_EMU_REG_MEM;
	out->rel = 0;
	if (canon[prefixes] == DS_EMU_OP_XOP && prefixes + 1 < canon_size &&
	    (canon[prefixes + 1] & DS_EMU_XOP_MAP_MASK) >= DS_EMU_XOP_MAP_FIRST) {
		len = ds_emu_xop_len(canon, canon_size, prefixes, mode64);
		if (len < 0)
			return len;
		out->len = len + removed;
		out->addr_bytes = 0;
		out->kind = DS_EMU_OTHER;
		/* TBM writes a general register named by XOP.vvvv. */
		out->effect = DS_EMU_FX_NEXT_SP;
		return 0;
	}
	/*
	 * The kernel's decoder reads a rel32 after 0x66 E8, E9 and 0F 8x in
	 * 64-bit mode, as Intel does; AMD reads a rel16. Let it see the two
	 * bytes AMD does not fetch, and hold the length to what is there.
	 */
	if (amd && mode64 && ds_emu_amd_rel16(canon, canon_size, prefixes)) {
		memset(canon + canon_size, 0, sizeof(canon) - canon_size);
		pad = sizeof(canon) - canon_size;
	}
	if (insn_decode(&insn, canon, canon_size + pad,
			mode64 ? INSN_MODE_64 : INSN_MODE_32))
		return -EINVAL;

	out->len = insn.length + removed;
	out->addr_bytes = insn.addr_bytes;
	out->slot = insn.opnd_bytes;
	/*
	 * A VEX or EVEX prefix leaves the opcode of its own map in
	 * opcode.bytes[0] with no 0x0f escape: C5 F8 77 is VZEROUPPER, not
	 * JA. No VEX or EVEX instruction transfers control or loads or
	 * stores the flags; BMI ones write general registers.
	 */
	if (insn_is_avx(&insn)) {
		out->kind = DS_EMU_OTHER;
		out->effect = DS_EMU_FX_NEXT_SP;
		return 0;
	}
	if (insn_is_rex2(&insn)) {
		ds_emu_kind_rex2(&insn, out);
		return 0;
	}
	if (insn.opcode.bytes[0] != DS_EMU_OP_TWO_BYTE)
		ds_emu_kind_one_byte(&insn, out);
	else
		ds_emu_kind_two_byte(&insn, out);

	/* The canonical prefixes are 66, 67, the last of F2 and F3, REX. */
	for (i = 0; i < prefixes; i++) {
		opsize |= canon[i] == 0x66;
		rep |= canon[i] == 0xf2 || canon[i] == 0xf3;
	}
	if (out->effect == DS_EMU_FX_NEXT && rep && insn.opcode.nbytes == 1 &&
	    ds_emu_string(insn.opcode.bytes[0]))
		out->effect = DS_EMU_FX_REP;
	opsize &= !X86_REX_W(insn.rex_prefix.bytes[0]);
	/*
	 * The decoder gives PUSHF and POPF 64 bits in 64-bit mode whatever
	 * the prefixes; 0x66 makes them push and pop a word.
	 */
	if (mode64 && (out->kind == DS_EMU_PUSHF || out->kind == DS_EMU_POPF))
		out->slot = opsize ? 2 : 8;
	if (opsize)
		ds_emu_near16(&insn, amd, out);
	return out->len <= size ? 0 : -EINVAL;
}

/* The vendor whose reading of a 0x66 before a near branch the CPU follows. */
static bool ds_emu_amd __read_mostly;

/* AMD reads 0x66 before a near branch in 64-bit mode its own way. */
void __init ds_emu_decode_init(void)
{
	ds_emu_amd = boot_cpu_data.x86_vendor == X86_VENDOR_AMD ||
		     boot_cpu_data.x86_vendor == X86_VENDOR_HYGON;
}

VISIBLE_IF_KUNIT int ds_emu_classify(const u8 *buf, int size, bool mode64,
				     struct ds_emu_insn *out)
{
	return __ds_emu_classify(buf, size, mode64, ds_emu_amd, out);
}

/* Does condition code @cc hold on @flags? */
static bool ds_emu_cond(unsigned int cc, unsigned long flags)
{
	bool of = flags & X86_EFLAGS_OF, sf = flags & X86_EFLAGS_SF;
	bool zf = flags & X86_EFLAGS_ZF, cf = flags & X86_EFLAGS_CF;
	bool res;

	switch (cc & ~DS_EMU_CC_NEGATE) {
	case DS_EMU_CC_O:
		res = of;
		break;
	case DS_EMU_CC_B:
		res = cf;
		break;
	case DS_EMU_CC_E:
		res = zf;
		break;
	case DS_EMU_CC_BE:
		res = cf || zf;
		break;
	case DS_EMU_CC_S:
		res = sf;
		break;
	case DS_EMU_CC_P:
		res = flags & X86_EFLAGS_PF;
		break;
	case DS_EMU_CC_L:
		res = sf != of;
		break;
	default:	/* DS_EMU_CC_LE */
		res = zf || sf != of;
		break;
	}
	return res ^ (cc & DS_EMU_CC_NEGATE);
}

/* The loop/jcxz count register as wide as the address size says. */
static unsigned long ds_emu_count(const struct ds_emu_insn *in,
				  unsigned long cx)
{
	switch (in->addr_bytes) {
	case 2:
		return cx & U16_MAX;
	case 4:
		return cx & U32_MAX;
	default:
		return cx;
	}
}

/**
 * ds_emu_taken() - was a completed instruction a taken branch
 * @in:    the decoded instruction
 * @flags: the flags after it (jcc, loop and jcxz do not change them)
 * @cx:    the count register after it
 *
 * Return: true for a taken branch.
 */
bool ds_emu_taken(const struct ds_emu_insn *in, unsigned long flags,
		  unsigned long cx)
{
	unsigned long count = ds_emu_count(in, cx);

	switch (in->kind) {
	case DS_EMU_JUMP:
	case DS_EMU_IRET:
		return true;
	case DS_EMU_JCC:
		return ds_emu_cond(in->cond, flags);
	case DS_EMU_JCXZ:
		return !count;
	case DS_EMU_LOOP:
		if (!count)
			return false;
		if (in->cond == DS_EMU_LOOP_ZF)
			return flags & X86_EFLAGS_ZF;
		if (in->cond == DS_EMU_LOOP_NZF)
			return !(flags & X86_EFLAGS_ZF);
		return true;
	default:
		return false;
	}
}

/* --- the decode cache --- */

VISIBLE_IF_KUNIT struct ds_emu_insn *ds_emu_slot(struct ds_emu_task *st,
						 unsigned long ip)
{
	return &st->cache[hash_long(ip, DS_EMU_CACHE_BITS)];
}

/*
 * May the bytes at @ip be read as ptrace reads them? Only in executable
 * mappings (execute-only code), and never device memory, whose reads may
 * have side effects the untraced program would not cause.
 */
static bool ds_emu_code_mapping(unsigned long ip)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	bool ok;

	if (!mm)
		return false;
	mmap_read_lock(mm);
	vma = vma_lookup(mm, ip);
	ok = vma && (vma->vm_flags & VM_EXEC) &&
	     !(vma->vm_flags & (VM_IO | VM_PFNMAP));
	mmap_read_unlock(mm);
	return ok;
}

/*
 * Read up to @len instruction bytes at @ip; returns how many. Execute-only
 * code (a protection key that denies reads) cannot be copied from user
 * mode, but ptrace reads it through the page tables, and so do we: without
 * the bytes neither the record nor the TF correction could be done. The
 * callers never read past the page of @ip unless the instruction goes on
 * there. With @nofault, for an instruction the CPU has not fetched yet,
 * only pages already mapped are read, all or nothing: the trace must not
 * fault in, or show a userfaultfd monitor, a page the CPU then refuses to
 * execute from.
 */
static int ds_emu_read(u8 *buf, unsigned long ip, int len, bool nofault)
{
	int n;

	if (nofault)
		return copy_from_user_nofault(buf, (const void __user *)ip,
					      len) ? 0 : len;
	n = len - copy_from_user(buf, (const void __user *)ip, len);
	if (n == len || !ds_emu_code_mapping(ip + n))
		return n;
	return max(n, access_process_vm(current, ip, buf, len, FOLL_FORCE));
}

/* Are the bytes at @ip still those @e was decoded from? */
static bool ds_emu_still_there(const struct ds_emu_insn *e, unsigned long ip,
			       bool nofault)
{
	u8 now[MAX_INSN_SIZE];

	if (ds_emu_read(now, ip, e->len, nofault) != e->len)
		return false;
	return !memcmp(now, e->bytes, e->len);
}

const struct ds_emu_insn *__ds_emu_lookup(struct ds_emu_task *st,
					  unsigned long ip, bool mode64,
					  bool nofault)
{
	struct ds_emu_insn *e = ds_emu_slot(st, ip);
	u8 buf[MAX_INSN_SIZE];
	int n;

	if (e->len && e->ip == ip && e->mode64 == mode64 &&
	    ds_emu_still_there(e, ip, nofault)) {
		st->hits++;
		return e;
	}
	st->misses++;
	e->len = 0;
	/*
	 * The bytes up to the end of the page first: only an instruction that
	 * goes on into the next page (and so made the CPU fetch from it)
	 * reads there too.
	 */
	n = ds_emu_read(buf, ip, min_t(unsigned long, MAX_INSN_SIZE,
				       PAGE_SIZE - offset_in_page(ip)),
			nofault);
	if (n && ds_emu_classify(buf, n, mode64, e) && n < MAX_INSN_SIZE &&
	    !offset_in_page(ip + n))
		n += ds_emu_read(buf + n, ip + n, MAX_INSN_SIZE - n, nofault);
	if (!n || ds_emu_classify(buf, n, mode64, e)) {
		e->len = 0;
		return NULL;
	}
	e->ip = ip;
	memcpy(e->bytes, buf, e->len);
	return e;
}

/* The instruction at @ip, which the CPU has fetched. */
const struct ds_emu_insn *ds_emu_lookup(struct ds_emu_task *st,
					unsigned long ip, bool mode64)
{
	return __ds_emu_lookup(st, ip, mode64, false);
}
