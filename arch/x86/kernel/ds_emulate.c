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
 * Taken or not is decided from the instruction and the registers, never from
 * "the IP moved": a conditional jump is evaluated against the flags (which it
 * does not change), loop/jcxz against the count register, everything else
 * that transfers control is always taken. So a jump to itself and a jcc to
 * the instruction right after it are recorded exactly when taken, and the
 * iterations of a REP string instruction are not branches.
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
 * read per step) and keeps a copy in ds_emu_task::next; the next trap uses
 * that copy if the task returned to that IP without giving up the CPU since
 * (a fault that restarts the instruction, an interrupt, a preemption), and
 * reads the bytes otherwise: a debugger writes code only while the task is
 * stopped. A program that modifies its own code is then traced exactly,
 * unless it sleeps in a fault on that instruction. Code another thread writes while
 * this one runs it, without the serialisation the SDM asks for
 * (cross-modifying code), may run in its old or new form on real CPUs too;
 * the trap may then decode either.
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
#define DS_EMU_CACHE_SIZE	(1U << DS_EMU_CACHE_BITS)

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
#define DS_EMU_SREG_SS		2	/* ModRM.reg of mov Sreg */
#define DS_EMU_GRP5_CALL	2
#define DS_EMU_GRP5_LJMP	5

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
 * struct ds_emu_insn - a decoded instruction, one entry of the decode cache
 * @ip:		linear address of the instruction
 * @bytes:	the instruction bytes the entry was decoded from
 * @len:	length of the instruction, 0 for an empty entry
 * @kind:	enum ds_emu_kind
 * @cond:	the jcc condition code, or DS_EMU_LOOP_*
 * @addr_bytes:	address size: the width of the loop/jcxz count register
 * @mode64:	decoded in 64-bit mode
 */
struct ds_emu_insn {
	unsigned long	ip;
	u8		bytes[MAX_INSN_SIZE];
	u8		len;
	u8		kind;
	u8		cond;
	u8		addr_bytes;
	bool		mode64;
};

/**
 * struct ds_emu_task - emulation state of one task, thread_struct::ds_emu
 * @ip:		the user IP the task last returned to
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
		 "Trace tasks with the emulated BTS even where the CPU has BTS");

bool ds_emu_forced(void)
{
	return ds_emu_enable && READ_ONCE(ds_emu_force);
}

/* --- the classifier: pure functions of the bytes and the registers --- */

static enum ds_emu_kind ds_emu_kind_grp5(const struct insn *insn)
{
	int reg = X86_MODRM_REG(insn->modrm.bytes[0]);

	if (reg >= DS_EMU_GRP5_CALL && reg <= DS_EMU_GRP5_LJMP)
		return DS_EMU_JUMP;
	return DS_EMU_OTHER;
}

static void ds_emu_kind_one_byte(const struct insn *insn,
				 struct ds_emu_insn *out)
{
	u8 op = insn->opcode.bytes[0];

	switch (op) {
	case DS_EMU_OP_POP_SS:
		out->kind = DS_EMU_SS;
		break;
	case DS_EMU_OP_MOV_SREG:
		out->kind = X86_MODRM_REG(insn->modrm.bytes[0]) == DS_EMU_SREG_SS ?
			    DS_EMU_SS : DS_EMU_OTHER;
		break;
	case DS_EMU_OP_JCC8 ... DS_EMU_OP_JCC8_LAST:
		out->kind = DS_EMU_JCC;
		out->cond = op & DS_EMU_CC_MASK;
		break;
	case DS_EMU_OP_LOOPNE:
		out->kind = DS_EMU_LOOP;
		out->cond = DS_EMU_LOOP_NZF;
		break;
	case DS_EMU_OP_LOOPE:
		out->kind = DS_EMU_LOOP;
		out->cond = DS_EMU_LOOP_ZF;
		break;
	case DS_EMU_OP_LOOP:
		out->kind = DS_EMU_LOOP;
		out->cond = DS_EMU_LOOP_ANY;
		break;
	case DS_EMU_OP_JCXZ:
		out->kind = DS_EMU_JCXZ;
		break;
	case DS_EMU_OP_CALL:
	case DS_EMU_OP_JMP:
	case DS_EMU_OP_JMP8:
	case DS_EMU_OP_RET_IMM:
	case DS_EMU_OP_RET:
	case DS_EMU_OP_LRET_IMM:
	case DS_EMU_OP_LRET:
	case DS_EMU_OP_LCALL:
	case DS_EMU_OP_LJMP:
		out->kind = DS_EMU_JUMP;
		break;
	case DS_EMU_OP_IRET:
		out->kind = DS_EMU_IRET;
		break;
	case DS_EMU_OP_POPF:
		out->kind = DS_EMU_POPF;
		break;
	case DS_EMU_OP_PUSHF:
		out->kind = DS_EMU_PUSHF;
		break;
	case DS_EMU_OP_GRP5:
		out->kind = ds_emu_kind_grp5(insn);
		break;
	default:
		out->kind = DS_EMU_OTHER;
		break;
	}
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

/**
 * ds_emu_classify() - decode one instruction for the branch trace
 * @buf:    the instruction bytes
 * @size:   bytes available at @buf
 * @mode64: decode in 64-bit mode, else in 32-bit mode
 * @out:    filled in: everything but @ip and @bytes
 *
 * Return: 0, or -EINVAL if the bytes do not decode.
 */
static int ds_emu_classify(const u8 *buf, int size, bool mode64,
			   struct ds_emu_insn *out)
{
	int removed, canon_size, prefixes, len;
	u8 canon[MAX_INSN_SIZE];
	struct insn insn;
	u8 op;

	removed = ds_emu_canon_prefixes(buf, size, mode64, canon, &canon_size,
					&prefixes);
	if (removed < 0)
		return -EINVAL;
	if (canon[prefixes] == DS_EMU_OP_XOP && prefixes + 1 < canon_size &&
	    (canon[prefixes + 1] & DS_EMU_XOP_MAP_MASK) >= DS_EMU_XOP_MAP_FIRST) {
		len = ds_emu_xop_len(canon, canon_size, prefixes, mode64);
		if (len < 0)
			return len;
		out->len = len + removed;
		out->addr_bytes = 0;
		out->mode64 = mode64;
		out->cond = 0;
		out->kind = DS_EMU_OTHER;
		return 0;
	}
	if (insn_decode(&insn, canon, canon_size,
			mode64 ? INSN_MODE_64 : INSN_MODE_32))
		return -EINVAL;

	out->len = insn.length + removed;
	out->addr_bytes = insn.addr_bytes;
	out->mode64 = mode64;
	out->cond = 0;
	/*
	 * A VEX or EVEX prefix leaves the opcode of its own map in
	 * opcode.bytes[0] with no 0x0f escape: C5 F8 77 is VZEROUPPER, not
	 * JA. No VEX or EVEX instruction transfers control or loads or
	 * stores the flags.
	 */
	if (insn_is_avx(&insn)) {
		out->kind = DS_EMU_OTHER;
		return 0;
	}
	op = insn.opcode.bytes[0];
	if (op != DS_EMU_OP_TWO_BYTE) {
		ds_emu_kind_one_byte(&insn, out);
		return 0;
	}
	op = insn.opcode.bytes[1];
	if (insn.opcode.nbytes == 2 &&
	    op >= DS_EMU_OP_JCC32 && op <= DS_EMU_OP_JCC32_LAST) {
		out->kind = DS_EMU_JCC;
		out->cond = op & DS_EMU_CC_MASK;
	} else {
		out->kind = DS_EMU_OTHER;
	}
	return 0;
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
 * there, so no page the program does not touch is faulted in.
 */
static int ds_emu_read(u8 *buf, unsigned long ip, int len)
{
	int n = len - copy_from_user(buf, (const void __user *)ip, len);

	if (n == len || !ds_emu_code_mapping(ip + n))
		return n;
	return max(n, access_process_vm(current, ip, buf, len, FOLL_FORCE));
}

/* Are the bytes at @ip still those @e was decoded from? */
static bool ds_emu_still_there(const struct ds_emu_insn *e, unsigned long ip)
{
	u8 now[MAX_INSN_SIZE];

	if (ds_emu_read(now, ip, e->len) != e->len)
		return false;
	return !memcmp(now, e->bytes, e->len);
}

static const struct ds_emu_insn *ds_emu_lookup(struct ds_emu_task *st,
					       unsigned long ip, bool mode64)
{
	struct ds_emu_insn *e = ds_emu_slot(st, ip);
	u8 buf[MAX_INSN_SIZE];
	int n;

	if (e->len && e->ip == ip && e->mode64 == mode64 &&
	    ds_emu_still_there(e, ip)) {
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
				       PAGE_SIZE - offset_in_page(ip)));
	if (n && ds_emu_classify(buf, n, mode64, e) && n < MAX_INSN_SIZE &&
	    !offset_in_page(ip + n))
		n += ds_emu_read(buf + n, ip + n, MAX_INSN_SIZE - n);
	if (!n || ds_emu_classify(buf, n, mode64, e)) {
		e->len = 0;
		return NULL;
	}
	e->ip = ip;
	memcpy(e->bytes, buf, e->len);
	return e;
}

/*
 * Times the current task gave up the CPU so far: ptrace stops and sleeps.
 * Preemption does not count; while the task is preempted another thread
 * may write its code only as cross-modifying code, which the SDM leaves
 * unordered without a serialising instruction in this task.
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

	in = ds_emu_lookup(st, regs->ip, user_64bit_mode(regs));
	if (!in)
		return;
	st->next = *in;
	st->next_switches = ds_emu_switches();
	st->next_decoded = true;
}

/*
 * Is st->next still the instruction the task returns to? It was decoded
 * at that IP, and the task did not give up the CPU since: a ptrace stop,
 * the only time a debugger writes the code, and a sleep, while another
 * thread may write it, both do. A fault, an interrupt or a preemption
 * before the instruction ran keeps it.
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

/*
 * A forced TF was on while a TF loader or storer ran. After POPF or IRET the
 * TF in the CPU's flags is the user's own; PUSHF stored ours.
 */
static void ds_emu_fix_tf(const struct ds_emu_insn *in, struct pt_regs *regs,
			  unsigned long uflags)
{
	u16 __user *top = (u16 __user *)regs->sp;
	u16 pushed;

	switch (in->kind) {
	case DS_EMU_POPF:
	case DS_EMU_IRET:
		regs->flags |= uflags & X86_EFLAGS_TF;
		break;
	case DS_EMU_PUSHF:
		/*
		 * A PUSHF right after a MOV SS that loaded a stack segment
		 * with a base: the stack pointer is no linear address.
		 */
		if (!ds_emu_flat_stack(regs))
			break;
		/* The low word of the pushed flags holds TF in every size. */
		if (!get_user(pushed, top) && pushed & X86_EFLAGS_TF)
			put_user(pushed & ~X86_EFLAGS_TF, top);
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
	DS_EMU_UNKNOWN,		/* no valid IP, or the bytes did not decode */
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
	unsigned long from = st->ip, to = regs->ip;
	const struct ds_emu_insn *in;

	/* Decoded before it ran: it may have overwritten its own bytes. */
	in = st->next_valid ? &st->next : ds_emu_lookup(st, from, st->mode64);
	/*
	 * MOV SS and POP SS hold the single-step trap back until after the
	 * next instruction: that is the one that completed, and whose branch
	 * and TF this trap is about. A trap right after the MOV SS (the SDM
	 * promises the delay only for the first of several SS loads) is the
	 * MOV SS's own.
	 */
	if (in && in->kind == DS_EMU_SS && to != from + in->len) {
		from += in->len;
		in = ds_emu_lookup(st, from, st->mode64);
	}
	if (!in)
		return DS_EMU_UNKNOWN;
	if (forced)
		ds_emu_fix_tf(in, regs, uflags);
	if (!ds_emu_taken(in, regs->flags, regs->cx))
		return DS_EMU_NOT_TAKEN;
	if (record)
		ds_emu_record(from, to);
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
	err = ds_register_backend(&ds_emu_backend);
	if (err)
		pr_warn("cannot register the emulated BTS backend: %d\n", err);
	return err;
}
device_initcall(ds_emu_init);

#ifdef CONFIG_X86_DS_EMULATE_KUNIT_TEST
#include "tests/ds_emulate_kunit.c"
#endif
