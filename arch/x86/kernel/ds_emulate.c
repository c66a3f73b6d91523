// SPDX-License-Identifier: GPL-2.0
/*
 * Emulated Branch Trace Store: records the user-mode branches of a task by
 * single-stepping it inside the kernel, for CPUs without BTS.
 *
 * Stepping. While a task has an emulated BTS tracer that records, every
 * return to user mode (ds_emu_exit_to_user(), the last thing before the
 * return) notes the user IP the task resumes at and forces the trap flag on,
 * unless the user flags already have it (the task's own TF, or the debugger's
 * PTRACE_SINGLESTEP). TIF_DS_EMU_TF says that the TF is ours. Each kernel
 * entry from user mode clears a forced TF again in arch_enter_from_user_mode(),
 * before anything looks at the saved flags: ptrace, signal frames, core dumps
 * and sigreturn only ever see the user's own TF. Signal delivery, sigreturn,
 * execve and ptrace register writes may change the flags at will; the next
 * return re-arms.
 *
 * The single-step trap. exc_debug_user() hands every #DB to ds_emu_debug().
 * With DR_STEP set, the instruction at the noted IP has completed and the
 * saved IP is where it went: the instruction is decoded (in the mode it ran
 * in) and, if it was a taken branch, {from, to} goes into the trace buffer.
 * A step the forced TF caused is consumed (DR_STEP is cleared) so it never
 * becomes a SIGTRAP; other #DB causes (hardware breakpoints, the user's or the
 * debugger's own TF, icebp, bus locks) keep their meaning. Any other kernel
 * entry (interrupt, exception, syscall) leaves no record: the next return
 * notes a new IP. That matches the hardware backend, whose records with a
 * kernel end point are filtered out.
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
 * Block stepping. A debugger's PTRACE_SINGLEBLOCK sets TIF_BLOCKSTEP and
 * DEBUGCTL.BTF, and the CPU would then trap only after branches, hiding the
 * other instructions from the trace. So while the emulation steps the task,
 * the return to user mode takes the request over (ds_emu_task::blockstep)
 * and turns TIF_BLOCKSTEP and BTF off: the CPU traps after every
 * instruction. The debugger's trap after an instruction that was not a
 * taken branch is then consumed like a forced one; the others are delivered
 * and end the request, as the CPU clears BTF on every #DB it raises. So the
 * debugger stops exactly where BTF would stop it. When the emulation stops
 * stepping, the next return gives the request back to TIF_BLOCKSTEP and BTF;
 * the debugger's next resume or detach restates its request and voids the
 * one held (ds_emu_forget_blockstep(), from step.c).
 *
 * Instructions that read or write TF itself: POPF and IRET load it, so after
 * them the TF the CPU left in the flags is the user's, not ours; PUSHF stores
 * it, so the pushed copy is corrected to the user's value.
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
 *
 * Decoding ahead. The trap comes after the instruction ran, and an
 * instruction may have overwritten its own bytes: a PUSHF whose stack
 * overlaps it turns into other bytes, and its pushed TF would go
 * uncorrected. So each single-step trap also decodes the instruction at the
 * IP it returns to (ds_emu_predecode(), through the cache: still one user
 * read per step) and keeps a copy in ds_emu_task::next, a candidate for
 * the next trap if the task returned to that IP without a ptrace stop or a
 * sleep since (after which a debugger's writes are what runs). That read
 * never faults: an instruction the CPU has not fetched yet may be on a
 * page it will refuse to execute from, which the trace must neither fault
 * in nor show to a userfaultfd monitor. If the page is not mapped, the
 * trap decodes what the CPU fetched.
 *
 * What ran. Another thread (a debugger in non-stop mode, uprobes
 * replacing a page, a JIT) may rewrite the code at any time, and the CPU
 * runs what is there when it fetches (the return to user mode is an IRET,
 * which serialises). So no decode is trusted blindly: ds_emu_what_ran()
 * holds the early decode and the bytes there at the trap to what the CPU
 * shows: the IP it went to (a register's value for a jump through it),
 * the stack pointer it left and what a push, pop, call, return or IRET
 * moved through the stack (PUSHF's slot holds the flags, POPF's the flags
 * it loaded, RET's the IP it went to). One that matches is used, and
 * neither when none does: no record, no correction, the forced TF simply
 * dropped. The one exception is a stack that shows exactly what PUSHF
 * leaves (one slot pushed holding the low word of the flags, our TF
 * included), undone because an untraced PUSHF stores TF clear; it covers
 * code rewritten and restored while the instruction ran. Not pinned down:
 * a jump through memory, and which of two pushes or pops of one length
 * ran; where both reads match, one that stores or loads the flags wins.
 *
 * Limits: code segments other than the flat user ones (LDT code, vm86) are
 * not traced, nor is 32-bit code while SS is not the flat user data segment
 * (a stack segment of the LDT, with a base): the PUSHF correction writes to
 * the stack pointer as a linear address. Tracing resumes at the first
 * return to user mode with flat segments. A PUSHF in the shadow of the MOV
 * SS or POP SS that loads such a segment keeps the forced TF in the flags
 * it stores.
 *
 * uprobes. A uprobe's INT3 and the single step of its out-of-line (XOL)
 * copy are kernel entries: the step's #DB goes to uprobes' notifier first
 * (notify_debug() in exc_debug_user()), which consumes it, so
 * ds_emu_debug() never sees it and a branch run out of line is not
 * recorded; the hardware records it, from the XOL address. The step's TF
 * is uprobes', so the return to the XOL copy forces nothing (the user flags
 * have TF). Branches uprobes emulates (direct jmp/call, jcc) never run in
 * user mode and are recorded by neither backend.
 * Documentation/arch/x86/ptrace-bts.rst, "uprobes", says it for users.
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

/* Entries of the per-task decode cache; a power of two. */
#define DS_EMU_CACHE_BITS	7
#define DS_EMU_CACHE_SIZE	BIT(DS_EMU_CACHE_BITS)

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

#undef MODULE_PARAM_PREFIX
#define MODULE_PARAM_PREFIX "ds."

/*
 * An administrator who wants no task single-stepped by the kernel turns
 * the backend off at boot; it is never registered then, and the allocator
 * sees what a kernel built without it sees. Read-only: turning it off
 * later would have to stop the tracers that use it.
 */
static bool ds_emu_enable = true;
module_param_named(emulation, ds_emu_enable, bool, 0444);
MODULE_PARM_DESC(emulation,
		 "Offer the emulated BTS to tracers (boot only; default on)");

static bool ds_emu_force;
module_param_named(force_emulation, ds_emu_force, bool, 0644);
MODULE_PARM_DESC(force_emulation,
		 "Trace tasks with the emulated BTS even where the CPU has BTS, and refuse tracers the hardware");

bool ds_emu_forced(void)
{
	return ds_emu_enable && READ_ONCE(ds_emu_force);
}

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
static bool ds_emu_writes_sp(const struct insn *insn)
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
static int __ds_emu_classify(const u8 *buf, int size, bool mode64, bool amd,
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

static int ds_emu_classify(const u8 *buf, int size, bool mode64,
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
static bool ds_emu_taken(const struct ds_emu_insn *in, unsigned long flags,
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

static struct ds_emu_insn *ds_emu_slot(struct ds_emu_task *st,
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

static const struct ds_emu_insn *__ds_emu_lookup(struct ds_emu_task *st,
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
static const struct ds_emu_insn *ds_emu_lookup(struct ds_emu_task *st,
					       unsigned long ip, bool mode64)
{
	return __ds_emu_lookup(st, ip, mode64, false);
}

/*
 * Times the current task gave up the CPU so far: ptrace stops and sleeps,
 * when a debugger may write its code. Preemption does not count: another
 * thread may write the code at any time, preempted or not, and
 * ds_emu_what_ran() checks the decode against what the CPU did.
 */
static unsigned long ds_emu_switches(void)
{
	return current->nvcsw;
}

/*
 * Decode the instruction the task returns to from this single-step trap,
 * before it runs, for the next trap to use (see "Decoding ahead").
 */
static void ds_emu_predecode(struct ds_emu_task *st, struct pt_regs *regs)
{
	const struct ds_emu_insn *in;

	in = __ds_emu_lookup(st, regs->ip, user_64bit_mode(regs), true);
	if (!in)
		return;
	st->next = *in;
	st->next_switches = ds_emu_switches();
	st->next_decoded = true;
}

/*
 * Is st->next still a candidate for the instruction the task returns to?
 * It was decoded at that IP, and the task did not give up the CPU since:
 * after a ptrace stop, when a debugger writes code, the bytes there now
 * are what runs. A fault, an interrupt or a preemption before the
 * instruction ran keeps it.
 */
static bool ds_emu_next_holds(struct ds_emu_task *st)
{
	return st->next_decoded && st->next.ip == st->ip &&
	       st->next.mode64 == st->mode64 &&
	       st->next_switches == ds_emu_switches();
}

/* --- the hooks --- */

/*
 * The stack pointer is the linear address PUSHF stored at: 64-bit mode
 * ignores the base of SS; 32-bit code needs the flat user data segment
 * (not one of the LDT with a base of its own).
 */
static bool ds_emu_flat_stack(struct pt_regs *regs)
{
	return user_64bit_mode(regs) || regs->ss == __USER_DS;
}

/*
 * Only flat user code and stack segments: the IP is the linear address of
 * the instruction, and the stack pointer that of the flags PUSHF stores.
 */
static bool ds_emu_flat(struct pt_regs *regs)
{
	if (v8086_mode(regs))
		return false;
#ifdef CONFIG_X86_64
	if (regs->cs == __USER32_CS)
		return ds_emu_flat_stack(regs);
#endif
	return regs->cs == __USER_CS && ds_emu_flat_stack(regs);
}

/*
 * The debugger asked for PTRACE_SINGLEBLOCK: hold the request and let the
 * CPU trap after every instruction, ds_emu_debug() filters the traps.
 * TIF_BLOCKSTEP and BTF change together with interrupts off, as in
 * set_task_blockstep(), so the context switch never sees them apart.
 */
static void ds_emu_hold_blockstep(struct ds_emu_task *st)
{
	lockdep_assert_irqs_disabled();

	st->blockstep = true;
	clear_thread_flag(TIF_BLOCKSTEP);
	update_debugctlmsr(get_debugctlmsr() & ~DEBUGCTLMSR_BTF);
}

/* The emulation no longer steps the task: the CPU block-steps it again. */
static void ds_emu_return_blockstep(struct ds_emu_task *st)
{
	lockdep_assert_irqs_disabled();

	st->blockstep = false;
	set_thread_flag(TIF_BLOCKSTEP);
	update_debugctlmsr(get_debugctlmsr() | DEBUGCTLMSR_BTF);
}

void ds_emu_exit_to_user(struct pt_regs *regs)
{
	struct ds_emu_task *st = current->thread.ds_emu;

	lockdep_assert_irqs_disabled();

	if (!st || !test_thread_flag(TIF_DS_EMU) || !ds_emu_flat(regs) ||
	    !ds_emulated_recording(current)) {
		if (st) {
			st->ip_valid = false;
			st->next_decoded = false;
			st->next_valid = false;
			if (st->blockstep)
				ds_emu_return_blockstep(st);
		}
		clear_thread_flag(TIF_DS_EMU_TF);
		return;
	}
	if (test_thread_flag(TIF_BLOCKSTEP))
		ds_emu_hold_blockstep(st);

	st->ip = regs->ip;
	st->sp = regs->sp;
	st->mode64 = user_64bit_mode(regs);
	st->ip_valid = true;
	st->next_valid = ds_emu_next_holds(st);
	if (regs->flags & X86_EFLAGS_TF) {
		/* The user's or the debugger's TF: its traps are theirs. */
		clear_thread_flag(TIF_DS_EMU_TF);
		return;
	}
	regs->flags |= X86_EFLAGS_TF;
	set_thread_flag(TIF_DS_EMU_TF);
}

unsigned long ds_emu_user_flags(struct pt_regs *regs)
{
	/*
	 * While TIF_DS_EMU_TF is set, the task went to user mode with our TF
	 * and its own clear (ds_emu_exit_to_user()); until its next trap
	 * or entry, no instruction of its can set TF without trapping.
	 */
	if (user_mode(regs) && test_thread_flag(TIF_DS_EMU_TF))
		return regs->flags & ~X86_EFLAGS_TF;
	return regs->flags;
}

void ds_emu_forget_blockstep(struct task_struct *child)
{
	struct ds_emu_task *st = READ_ONCE(child->thread.ds_emu);

	/*
	 * @child is current, or frozen in a ptrace stop: it runs none of its
	 * hooks and cannot exit meanwhile, and the wake-up that ends the stop
	 * orders this store before its next return to user mode.
	 */
	if (st)
		WRITE_ONCE(st->blockstep, false);
}

/* --- what ran: a decode checked against what the CPU shows --- */

/* The flags POPF and IRET load at any privilege and operand size. */
#define DS_EMU_POPF_BITS	(X86_EFLAGS_CF | X86_EFLAGS_PF | X86_EFLAGS_AF | \
				 X86_EFLAGS_ZF | X86_EFLAGS_SF | X86_EFLAGS_TF | \
				 X86_EFLAGS_DF | X86_EFLAGS_OF)

/**
 * struct ds_emu_after - what the CPU shows of an instruction that completed
 * @regs:	the registers after it
 * @from:	its IP
 * @to:		the IP after it
 * @sp0:	the stack pointer before it
 * @sp:		the stack pointer after it
 * @flags:	the flags after it, TF as the CPU left it
 * @cx:		the count register after it
 * @mode64:	it ran in 64-bit mode
 */
struct ds_emu_after {
	const struct pt_regs	*regs;
	unsigned long		from;
	unsigned long		to;
	unsigned long		sp0;
	unsigned long		sp;
	unsigned long		flags;
	unsigned long		cx;
	bool			mode64;
};

static unsigned long ds_emu_mode_mask(bool mode64)
{
	return mode64 ? ULONG_MAX : U32_MAX;
}

/*
 * A stack slot of @size bytes at @addr, zero-extended. The callers read
 * a slot only once the stack pointer moved as the instruction they check
 * would move it, so the CPU touched that page just now: a read that finds
 * its page table entry gone (reclaim, migration, NUMA hinting) may fault
 * it back in. IRET's slots are read before that is known (from 64-bit
 * mode it pops the stack pointer), so never with a fault (@may_fault).
 */
static bool ds_emu_stack_read(unsigned long addr, int size,
			      unsigned long *val, bool may_fault)
{
	*val = 0;
	if (!copy_from_user_nofault(val, (const void __user *)addr, size))
		return true;
	return may_fault && !copy_from_user(val, (const void __user *)addr, size);
}

/* A slot's value, as wide as the slot. */
static bool ds_emu_slot_is(const struct ds_emu_insn *in, unsigned long addr,
			   unsigned long want)
{
	unsigned long mask = in->slot >= sizeof(long) ? ULONG_MAX :
			     BIT(in->slot * BITS_PER_BYTE) - 1, word;

	return ds_emu_stack_read(addr, in->slot, &word, true) &&
	       word == (want & mask);
}

/* The flags POPF, IRET and PUSHF move at any privilege and operand size. */
static bool ds_emu_flags_are(unsigned long addr, unsigned long flags,
			     bool may_fault)
{
	unsigned long word;

	return ds_emu_stack_read(addr, sizeof(u16), &word, may_fault) &&
	       !((word ^ flags) & DS_EMU_POPF_BITS);
}

/* The value of general register @reg (by its encoding) after the step. */
static unsigned long ds_emu_reg(const struct pt_regs *regs, u8 reg)
{
	static const u8 offs[] = {
		offsetof(struct pt_regs, ax), offsetof(struct pt_regs, cx),
		offsetof(struct pt_regs, dx), offsetof(struct pt_regs, bx),
		offsetof(struct pt_regs, sp), offsetof(struct pt_regs, bp),
		offsetof(struct pt_regs, si), offsetof(struct pt_regs, di),
#ifdef CONFIG_X86_64
		offsetof(struct pt_regs, r8), offsetof(struct pt_regs, r9),
		offsetof(struct pt_regs, r10), offsetof(struct pt_regs, r11),
		offsetof(struct pt_regs, r12), offsetof(struct pt_regs, r13),
		offsetof(struct pt_regs, r14), offsetof(struct pt_regs, r15),
#endif
	};

	if (reg >= ARRAY_SIZE(offs))
		return 0;
	return *(const unsigned long *)((const u8 *)regs + offs[reg]);
}

/* An indirect branch through a register went where that register says. */
static bool ds_emu_reg_target(const struct ds_emu_insn *in,
			      const struct ds_emu_after *a, unsigned long ip)
{
	/* call *%rsp pushed over its own target */
	if (in->reg == DS_EMU_REG_MEM || in->reg == 4)
		return true;
	return a->to == (ds_emu_reg(a->regs, in->reg) & ip);
}

/* IRET: the IP and CS it popped, its flags, where the stack went. */
static bool ds_emu_iret_ran(const struct ds_emu_insn *in,
			    const struct ds_emu_after *a, unsigned long mode)
{
	unsigned long word, slot = in->slot;

	if (!ds_emu_stack_read(a->sp0, slot, &word, false) || word != a->to ||
	    !ds_emu_stack_read(a->sp0 + slot, sizeof(u16), &word, false) ||
	    word != (u16)a->regs->cs ||
	    !ds_emu_flags_are(a->sp0 + 2 * slot, a->flags, false))
		return false;
	/* From 64-bit mode IRET pops SS:RSP too, at any privilege. */
	if (!in->mode64)
		return a->sp == ((a->sp0 + 3 * slot) & mode);
	return ds_emu_stack_read(a->sp0 + 3 * slot, slot, &word, false) &&
	       word == a->sp;
}

/**
 * ds_emu_ran() - is a decode what the CPU ran
 * @in: the decode
 * @a:  what the CPU shows
 *
 * Checks where the instruction left the IP and the stack pointer, and what
 * a push, a pop, a call, a return or IRET moved through the stack. An
 * instruction that may write the stack pointer any way it likes
 * (ds_emu_writes_sp()) is held to its IP only, an indirect branch through
 * memory to the stack pointer only (ds_emu_weak()).
 *
 * Return: true if @in could have produced @a.
 */
static bool ds_emu_ran(const struct ds_emu_insn *in,
		       const struct ds_emu_after *a)
{
	unsigned long mode = ds_emu_mode_mask(in->mode64);
	unsigned long ip = in->ip16 ? U16_MAX : mode;
	unsigned long next = (a->from + in->len) & mode;
	unsigned long target = (next + in->rel) & ip;
	unsigned long up = (a->sp0 + in->slot) & mode;
	unsigned long down = (a->sp0 - in->slot) & mode;

	switch (in->effect) {
	case DS_EMU_FX_NEXT:
		return a->to == next && a->sp == a->sp0;
	case DS_EMU_FX_NEXT_SP:
		return a->to == next;
	case DS_EMU_FX_REP:
		return (a->to == next || a->to == a->from) && a->sp == a->sp0;
	case DS_EMU_FX_REL:
		/* A jcc's condition is what the IP shows, see ds_emu_went(). */
		return a->sp == a->sp0 &&
		       (a->to == target ||
			(a->to == next && in->kind != DS_EMU_JUMP));
	case DS_EMU_FX_CALL_REL:
		return a->to == target && a->sp == down &&
		       ds_emu_slot_is(in, a->sp, next);
	case DS_EMU_FX_CALL_IND:
		return a->sp == down && ds_emu_slot_is(in, a->sp, next) &&
		       ds_emu_reg_target(in, a, ip);
	case DS_EMU_FX_JMP_IND:
		return a->sp == a->sp0 && ds_emu_reg_target(in, a, ip);
	case DS_EMU_FX_RET:
		return a->sp == ((up + in->imm) & mode) &&
		       ds_emu_slot_is(in, a->sp0, a->to);
	case DS_EMU_FX_PUSHF:
		/* The low word holds TF and the arithmetic flags in every size. */
		return a->to == next && a->sp == down &&
		       ds_emu_slot_is(&(struct ds_emu_insn){ .slot = 2 }, a->sp,
				      a->flags);
	case DS_EMU_FX_POPF:
		return a->to == next && a->sp == up &&
		       ds_emu_flags_are(a->sp0, a->flags, true);
	case DS_EMU_FX_IRET:
		return ds_emu_iret_ran(in, a, mode);
	case DS_EMU_FX_LRET:
		return a->sp == ((up + in->slot + in->imm) & mode) &&
		       ds_emu_slot_is(in, a->sp0, a->to) &&
		       ds_emu_slot_is(&(struct ds_emu_insn){ .slot = 2 },
				      a->sp0 + in->slot, a->regs->cs);
	case DS_EMU_FX_LCALL:
		return a->sp == ((down - in->slot) & mode) &&
		       ds_emu_slot_is(in, a->sp, next);
	case DS_EMU_FX_LJMP:
		return a->sp == a->sp0;
	case DS_EMU_FX_SS:
		/* the SS load's own trap, or after the one it shadows */
		return a->to != next || a->sp == up;
	default:
		return false;
	}
}

/*
 * A match that does not pin the instruction down: a same-length push or
 * pop can pass for what moved the stack pointer, anything for a jump
 * through memory or for an SS load whose shadowed instruction ran too.
 */
static bool ds_emu_weak(const struct ds_emu_insn *in,
			const struct ds_emu_after *a)
{
	switch (in->effect) {
	case DS_EMU_FX_NEXT_SP:
		return a->sp != a->sp0;
	case DS_EMU_FX_CALL_IND:
	case DS_EMU_FX_JMP_IND:
		return in->reg == DS_EMU_REG_MEM;
	case DS_EMU_FX_SS:
		return true;
	default:
		return false;
	}
}

/*
 * Was the instruction a taken branch? A direct one went to its target or
 * to the next instruction, and where the two differ the IP says which,
 * even if the code was rewritten between jcc and its negation while it
 * ran. Where they coincide (a jcc to the next instruction), the condition
 * on the flags does.
 */
static bool ds_emu_went(const struct ds_emu_insn *in,
			const struct ds_emu_after *a)
{
	unsigned long mode = ds_emu_mode_mask(in->mode64);
	unsigned long next = (a->from + in->len) & mode;
	unsigned long target = (next + in->rel) & (in->ip16 ? U16_MAX : mode);

	if (in->effect == DS_EMU_FX_REL && target != next)
		return a->to == target;
	return ds_emu_taken(in, a->flags, a->cx);
}

/* Its check reads TF itself off the stack, as stored or as loaded. */
static bool ds_emu_moves_tf(const struct ds_emu_insn *in)
{
	return in->effect == DS_EMU_FX_PUSHF || in->effect == DS_EMU_FX_POPF ||
	       in->effect == DS_EMU_FX_IRET;
}

/**
 * ds_emu_what_ran() - the decode of the instruction that completed
 * @st:    the task's emulation state
 * @early: its decode from before it ran, or %NULL
 * @a:     what the CPU shows
 *
 * Two reads of the bytes are candidates: @early, taken before the
 * instruction ran (it may have overwritten its own bytes), and the bytes
 * there now (another thread, a debugger, uprobes or a JIT may have written
 * them since @early; the CPU ran what was there when it fetched, as IRET
 * serialises). A candidate counts only if the CPU's state matches it
 * (ds_emu_ran()); where both match, one that stores or loads the flags
 * wins, since its check read the flags themselves.
 *
 * Return: the decode, or %NULL when none matches: the bytes changed more
 * than once while the instruction ran, or do not decode.
 */
static const struct ds_emu_insn *ds_emu_what_ran(struct ds_emu_task *st,
						 const struct ds_emu_insn *early,
						 const struct ds_emu_after *a)
{
	const struct ds_emu_insn *now;
	bool early_ok = early && ds_emu_ran(early, a);

	/* A decode that pins the instruction down spares the second read. */
	if (early_ok && !ds_emu_weak(early, a))
		return early;
	now = ds_emu_lookup(st, a->from, a->mode64);
	if (now && ds_emu_ran(now, a) &&
	    (!early_ok || ds_emu_moves_tf(now)))
		return now;
	return early_ok ? early : NULL;
}

/*
 * Does the stack show what PUSHF leaves, where no decode matched: one slot
 * pushed that holds the low word of the flags, our TF included, after an
 * instruction no longer than any can be? Nothing else is made of such a
 * step; an untraced PUSHF there would have stored the TF clear.
 */
static bool ds_emu_pushed_flags(const struct ds_emu_after *a)
{
	unsigned long mode = ds_emu_mode_mask(a->mode64);
	unsigned long pushed = (a->sp0 - a->sp) & mode, word;

	if (pushed != sizeof(u16) && pushed != (a->mode64 ? 8 : 4))
		return false;
	if (((a->to - a->from) & mode) - 1 >= MAX_INSN_SIZE)
		return false;
	return ds_emu_stack_read(a->sp, sizeof(u16), &word, true) &&
	       word == (u16)a->flags;
}

/* PUSHF stored our TF at @sp: the program's flags have it clear. */
static void ds_emu_clear_pushed_tf(struct pt_regs *regs)
{
	u16 __user *top = (u16 __user *)regs->sp;
	u16 pushed;

	/*
	 * A PUSHF right after a MOV SS that loaded a stack segment with a
	 * base: the stack pointer is no linear address.
	 */
	if (!ds_emu_flat_stack(regs))
		return;
	if (!get_user(pushed, top) && pushed & X86_EFLAGS_TF)
		put_user(pushed & ~X86_EFLAGS_TF, top);
}

/*
 * A forced TF was on while a TF loader or storer ran. After POPF or IRET the
 * TF in the CPU's flags is the user's own; PUSHF stored ours.
 */
static void ds_emu_fix_tf(const struct ds_emu_insn *in, struct pt_regs *regs,
			  unsigned long uflags)
{
	switch (in->kind) {
	case DS_EMU_POPF:
	case DS_EMU_IRET:
		regs->flags |= uflags & X86_EFLAGS_TF;
		break;
	case DS_EMU_PUSHF:
		ds_emu_clear_pushed_tf(regs);
		break;
	default:
		break;
	}
}

static void ds_emu_record(unsigned long from, unsigned long to)
{
	/* A branch to or from a kernel address is not the tracer's to see. */
	if (!ds_bts_user_branch(from, to))
		return;
	ds_emulated_write_bts(current, from, to);
}

/* What ds_emu_step() knows of the instruction that completed. */
enum ds_emu_outcome {
	DS_EMU_UNKNOWN,		/* no valid IP, or no decode matched */
	DS_EMU_NOT_TAKEN,	/* not a branch, or a branch not taken */
	DS_EMU_TAKEN,		/* a taken branch */
};

/*
 * The instruction at st->ip completed and went to regs->ip: correct a
 * forced TF, and record it if it was a taken branch and @record.
 */
static enum ds_emu_outcome ds_emu_step(struct ds_emu_task *st,
				       struct pt_regs *regs,
				       unsigned long uflags, bool forced,
				       bool record)
{
	struct ds_emu_after a = {
		.regs	= regs,
		.from	= st->ip,
		.to	= regs->ip,
		.sp0	= st->sp,
		.sp	= regs->sp,
		.flags	= uflags,
		.cx	= regs->cx,
		.mode64	= st->mode64,
	};
	unsigned long mode = ds_emu_mode_mask(st->mode64);
	const struct ds_emu_insn *in;

	in = ds_emu_what_ran(st, st->next_valid ? &st->next : NULL, &a);
	/*
	 * MOV SS and POP SS hold the single-step trap back until after the
	 * next instruction: that is the one that completed, and whose branch
	 * and TF this trap is about. A trap right after the MOV SS (the SDM
	 * promises the delay only for the first of several SS loads) is the
	 * MOV SS's own.
	 */
	if (in && in->kind == DS_EMU_SS && a.to != ((a.from + in->len) & mode)) {
		a.from = (a.from + in->len) & mode;
		a.sp0 = (a.sp0 + in->slot) & mode;
		in = ds_emu_what_ran(st, NULL, &a);
	}
	if (!in) {
		if (forced && ds_emu_pushed_flags(&a))
			ds_emu_clear_pushed_tf(regs);
		return DS_EMU_UNKNOWN;
	}
	if (forced)
		ds_emu_fix_tf(in, regs, uflags);
	if (!ds_emu_went(in, &a))
		return DS_EMU_NOT_TAKEN;
	if (record)
		ds_emu_record(a.from, a.to);
	return DS_EMU_TAKEN;
}

/*
 * The debugger's own single-step trap while the emulation holds its block
 * step: with BTF the CPU would not have trapped after an instruction that
 * was no taken branch, so that step is no news for the debugger (and no
 * DR6.BS); a #DB that still has a cause for the debugger is delivered and,
 * as with BTF, ends the block step.
 */
static void ds_emu_block_trap(struct ds_emu_task *st,
			      enum ds_emu_outcome outcome, unsigned long *dr6,
			      unsigned long *virtual_dr6)
{
	if (outcome == DS_EMU_NOT_TAKEN) {
		*dr6 &= ~DR_STEP;
		*virtual_dr6 &= ~DR_STEP;
	}
	if ((*dr6 | *virtual_dr6) & (DR_STEP | DR_TRAP_BITS | DR_BUS_LOCK))
		st->blockstep = false;
}

void ds_emu_debug(struct pt_regs *regs, unsigned long *dr6,
		  unsigned long uflags)
{
	struct ds_emu_task *st = current->thread.ds_emu;
	bool forced = test_thread_flag(TIF_DS_EMU_TF);
	enum ds_emu_outcome outcome = DS_EMU_UNKNOWN;

	if (!st)
		return;
	if (!(*dr6 & DR_STEP)) {
		/* icebp, breakpoints, bus locks: the CPU clears BTF for them. */
		st->blockstep = false;
		return;
	}
	/*
	 * A forced TF needs its correction even when tracing stopped (another
	 * CPU cleared TIF_DS_EMU) after the return to user mode that set it.
	 */
	if (st->ip_valid &&
	    (test_thread_flag(TIF_DS_EMU) || st->blockstep || forced))
		outcome = ds_emu_step(st, regs, uflags, forced,
				      test_thread_flag(TIF_DS_EMU));
	st->ip_valid = false;
	st->next_valid = false;
	st->next_decoded = false;
	if (test_thread_flag(TIF_DS_EMU) && ds_emu_flat(regs))
		ds_emu_predecode(st, regs);
	if (forced) {
		/* Our own trap: neither a signal nor a DR6 bit for the debugger. */
		*dr6 &= ~DR_STEP;
		current->thread.virtual_dr6 &= ~DR_STEP;
		return;
	}
	if (st->blockstep)
		ds_emu_block_trap(st, outcome, dr6,
				  &current->thread.virtual_dr6);
}

void ds_emu_fork_thread(struct task_struct *child)
{
	child->thread.ds_emu = NULL;
	clear_tsk_thread_flag(child, TIF_DS_EMU);
	clear_tsk_thread_flag(child, TIF_DS_EMU_TF);
}

void ds_emu_exit_thread(struct task_struct *task)
{
	kfree(xchg(&task->thread.ds_emu, NULL));
}

/* --- the backend --- */

static int ds_emu_start(struct ds_tracer *tracer)
{
	struct task_struct *task;
	struct ds_emu_task *st;
	int err = 0;

	/* Kernel branches cannot be stepped; the hardware may record them. */
	if (ds_tracer_flags(tracer) & DS_KERNEL)
		return -EOPNOTSUPP;
	task = ds_tracer_task(tracer);
	if (!task->thread.ds_emu) {
		st = kzalloc(sizeof(*st), GFP_KERNEL_ACCOUNT);
		if (!st) {
			err = -ENOMEM;
			goto put_task;
		}
		/* Starts are serialised by the allocator: no one else installs. */
		WRITE_ONCE(task->thread.ds_emu, st);
	}
	set_tsk_thread_flag(task, TIF_DS_EMU);
put_task:
	put_task_struct(task);
	return err;
}

static void ds_emu_stop(struct ds_tracer *tracer)
{
	struct task_struct *task = ds_tracer_task(tracer);

	/*
	 * The task clears a forced TF itself at its next kernel entry and
	 * drops TIF_DS_EMU_TF at the return after it.
	 */
	clear_tsk_thread_flag(task, TIF_DS_EMU);
	/*
	 * The allocator refuses tracers for exiting tasks after starting us:
	 * such a task may be past ds_emu_exit_thread() already.
	 */
	if (task->flags & PF_EXITING)
		ds_emu_exit_thread(task);
	put_task_struct(task);
}

static const struct ds_backend ds_emu_backend = {
	.name	= "emulated",
	.kinds	= BIT(DS_BTS),
	.start	= ds_emu_start,
	.stop	= ds_emu_stop,
};

static int __init ds_emu_init(void)
{
	int err;

	if (!ds_emu_enable) {
		pr_info("emulated BTS backend off (ds.emulation=0)\n");
		return 0;
	}
	ds_emu_amd = boot_cpu_data.x86_vendor == X86_VENDOR_AMD ||
		     boot_cpu_data.x86_vendor == X86_VENDOR_HYGON;
	err = ds_register_backend(&ds_emu_backend);
	if (err)
		pr_warn("cannot register the emulated BTS backend: %d\n", err);
	return err;
}
device_initcall(ds_emu_init);

#ifdef CONFIG_X86_DS_EMULATE_KUNIT_TEST
#include "tests/ds_emulate_kunit.c"
#endif
