/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The emulated Branch Trace Store's internals, shared by emulate.c,
 * decode.c and the KUnit suite.
 */
#ifndef _X86_KERNEL_DS_EMULATE_H
#define _X86_KERNEL_DS_EMULATE_H

#include <linux/bits.h>
#include <linux/types.h>

#include <kunit/visibility.h>

#include <asm/insn.h>

struct pt_regs;

/* Entries of the per-task decode cache; a power of two. */
#define DS_EMU_CACHE_BITS	7
#define DS_EMU_CACHE_SIZE	BIT(DS_EMU_CACHE_BITS)

/* The condition code in the low nibble of a jcc opcode. */
#define DS_EMU_CC_MASK		0xf
/* Odd condition codes are the negation of the even one below them. */
#define DS_EMU_CC_NEGATE	0x1

/* The condition codes of jcc, in pairs, see ds_emu_cond(). */
enum ds_emu_cc {
	DS_EMU_CC_O	= 0x0,
	DS_EMU_CC_B	= 0x2,
	DS_EMU_CC_E	= 0x4,
	DS_EMU_CC_BE	= 0x6,
	DS_EMU_CC_S	= 0x8,
	DS_EMU_CC_P	= 0xa,
	DS_EMU_CC_L	= 0xc,
	DS_EMU_CC_LE	= 0xe,
};

/**
 * enum ds_emu_kind - what an instruction means to the branch trace
 * @DS_EMU_OTHER: not a branch (also REP string instructions)
 * @DS_EMU_JUMP:  always taken: jmp, call, ret, far transfers, indirect ones
 * @DS_EMU_JCC:   taken if the condition @cond holds on the flags
 * @DS_EMU_LOOP:  loop/loope/loopne: taken if the count, after the decrement,
 *		  is not zero and @cond (for loope/loopne) holds
 * @DS_EMU_JCXZ:  jcxz/jecxz/jrcxz: taken if the count is zero
 * @DS_EMU_IRET:  always taken, and loads TF
 * @DS_EMU_POPF:  not a branch, loads TF
 * @DS_EMU_PUSHF: not a branch, stores TF
 * @DS_EMU_SS:    MOV SS or POP SS: no trap until after the next instruction
 */
enum ds_emu_kind {
	DS_EMU_OTHER,
	DS_EMU_JUMP,
	DS_EMU_JCC,
	DS_EMU_LOOP,
	DS_EMU_JCXZ,
	DS_EMU_IRET,
	DS_EMU_POPF,
	DS_EMU_PUSHF,
	DS_EMU_SS,
};

/* @cond of %DS_EMU_LOOP. */
#define DS_EMU_LOOP_ANY		0	/* loop */
#define DS_EMU_LOOP_ZF		1	/* loope: while ZF */
#define DS_EMU_LOOP_NZF		2	/* loopne: while !ZF */

/**
 * enum ds_emu_effect - where an instruction leaves the IP and the stack
 * pointer, the check of a decode against what the CPU shows (ds_emu_ran())
 * @DS_EMU_FX_NEXT:	the next instruction; the stack pointer unchanged
 * @DS_EMU_FX_NEXT_SP:	the next instruction; may write the stack pointer
 * @DS_EMU_FX_REP:	a REP string instruction: the next one or itself again
 * @DS_EMU_FX_REL:	jmp, jcc, loop, jcxz: the next instruction, or @rel
 *			past it when taken
 * @DS_EMU_FX_CALL_REL:	@rel past the next instruction, whose IP is pushed
 * @DS_EMU_FX_CALL_IND:	to @reg, or anywhere through memory; the next
 *			instruction's IP is pushed
 * @DS_EMU_FX_JMP_IND:	to @reg, or anywhere through memory; the stack
 *			pointer unchanged
 * @DS_EMU_FX_RET:	the IP popped; @imm more bytes released
 * @DS_EMU_FX_PUSHF:	the next instruction; the flags pushed
 * @DS_EMU_FX_POPF:	the next instruction; the flags popped
 * @DS_EMU_FX_IRET:	the IP and CS popped, then the flags, then (from
 *			64-bit mode) the stack pointer
 * @DS_EMU_FX_LRET:	the IP and CS popped; @imm more bytes released
 * @DS_EMU_FX_LCALL:	anywhere; CS and the next instruction's IP pushed
 * @DS_EMU_FX_LJMP:	anywhere; the stack pointer unchanged
 * @DS_EMU_FX_SS:	MOV SS or POP SS: the next instruction, the stack
 *			pointer moved by @slot; or it and the one it shadows
 */
enum ds_emu_effect {
	DS_EMU_FX_NEXT,
	DS_EMU_FX_NEXT_SP,
	DS_EMU_FX_REP,
	DS_EMU_FX_REL,
	DS_EMU_FX_CALL_REL,
	DS_EMU_FX_CALL_IND,
	DS_EMU_FX_JMP_IND,
	DS_EMU_FX_RET,
	DS_EMU_FX_PUSHF,
	DS_EMU_FX_POPF,
	DS_EMU_FX_IRET,
	DS_EMU_FX_LRET,
	DS_EMU_FX_LCALL,
	DS_EMU_FX_LJMP,
	DS_EMU_FX_SS,
};

/*
 * @reg of an indirect branch through memory, or through a register the
 * task's registers do not hold (REX2's r16-r31).
 */
#define DS_EMU_REG_MEM		0xff

/**
 * struct ds_emu_insn - a decoded instruction, one entry of the decode cache
 * @ip:		linear address of the instruction
 * @bytes:	the instruction bytes the entry was decoded from
 * @len:	length of the instruction, 0 for an empty entry
 * @kind:	enum ds_emu_kind
 * @cond:	the jcc condition code, or DS_EMU_LOOP_*
 * @addr_bytes:	address size: the width of the loop/jcxz count register
 * @mode64:	decoded in 64-bit mode
 * @effect:	enum ds_emu_effect
 * @slot:	bytes a push or pop of the instruction moves the stack by
 * @ip16:	a near branch with a 16-bit operand size: the target is
 *		truncated to 16 bits
 * @imm:	bytes RET imm16 releases
 * @reg:	the register an indirect branch goes to, or %DS_EMU_REG_MEM
 * @rel:	displacement of a direct branch
 */
struct ds_emu_insn {
	unsigned long	ip;
	u8		bytes[MAX_INSN_SIZE];
	u8		len;
	u8		kind;
	u8		cond;
	u8		addr_bytes;
	bool		mode64;
	u8		effect;
	u8		slot;
	bool		ip16;
	u16		imm;
	u8		reg;
	s32		rel;
};

/**
 * struct ds_emu_task - emulation state of one task, thread_struct::ds_emu
 * @ip:		the user IP the task last returned to
 * @sp:		the user stack pointer it last returned with
 * @ip_valid:	@ip is the instruction the next single-step trap completes
 * @mode64:	the task returned to 64-bit code
 * @blockstep:	the debugger's PTRACE_SINGLEBLOCK, held while TIF_BLOCKSTEP
 *		and DEBUGCTL.BTF are off, see "Block stepping" above
 * @next_decoded: @next was decoded in the last single-step trap
 * @next_valid:	@next is the instruction at @ip as it was before it ran,
 *		see "Decoding ahead" above
 * @next_switches: the task's context switches when @next was decoded
 * @next:	the instruction at the IP the last single-step trap returned
 *		to, decoded in that trap
 * @hits:	decode cache hits
 * @misses:	decode cache misses (fetch and decode)
 * @cache:	the decode cache, indexed by hash of the IP
 *
 * Only the task itself uses it, from its own entry and exit paths; the one
 * exception, @blockstep, is also cleared by the debugger while the task is
 * frozen in a ptrace stop. It is allocated when the first emulated tracer
 * starts and freed when the task exits, so a tracer that stops while the
 * task runs frees nothing under it.
 */
struct ds_emu_task {
	unsigned long		ip;
	unsigned long		sp;
	bool			ip_valid;
	bool			mode64;
	bool			blockstep;
	bool			next_decoded;
	bool			next_valid;
	unsigned long		next_switches;
	struct ds_emu_insn	next;
	unsigned long		hits;
	unsigned long		misses;
	struct ds_emu_insn	cache[DS_EMU_CACHE_SIZE];
};

/* What ds_emu_step() knows of the instruction that completed. */
enum ds_emu_outcome {
	DS_EMU_UNKNOWN,		/* no valid IP, or no decode matched */
	DS_EMU_NOT_TAKEN,	/* not a branch, or a branch not taken */
	DS_EMU_TAKEN,		/* a taken branch */
};

bool ds_emu_writes_sp(const struct insn *insn);
bool ds_emu_taken(const struct ds_emu_insn *in, unsigned long flags,
		  unsigned long cx);
const struct ds_emu_insn *__ds_emu_lookup(struct ds_emu_task *st,
					  unsigned long ip, bool mode64,
					  bool nofault);
const struct ds_emu_insn *ds_emu_lookup(struct ds_emu_task *st,
					unsigned long ip, bool mode64);
void __init ds_emu_decode_init(void);

#if IS_ENABLED(CONFIG_KUNIT)
int __ds_emu_classify(const u8 *buf, int size, bool mode64, bool amd,
		      struct ds_emu_insn *out);
int ds_emu_classify(const u8 *buf, int size, bool mode64,
		    struct ds_emu_insn *out);
struct ds_emu_insn *ds_emu_slot(struct ds_emu_task *st,
				unsigned long ip);
enum ds_emu_outcome ds_emu_step(struct ds_emu_task *st,
				struct pt_regs *regs,
				unsigned long uflags, bool forced,
				bool record);
void ds_emu_block_trap(struct ds_emu_task *st,
		       enum ds_emu_outcome outcome, unsigned long *dr6,
		       unsigned long *virtual_dr6);
#endif

#endif /* _X86_KERNEL_DS_EMULATE_H */
