// SPDX-License-Identifier: GPL-2.0
/*
 * Emulated Branch Trace Store: records the user-mode branches of a task by
 * single-stepping it inside the kernel, for CPUs without BTS. decode.c
 * classifies the instructions and keeps the decode cache.
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
 * A step the forced TF caused is consumed (DR_STEP is cleared, with the
 * DR6 breakpoint bits no breakpoint claimed) so it never becomes a SIGTRAP;
 * other #DB causes (hardware breakpoints, the user's or the debugger's own
 * TF, icebp, bus locks) keep their meaning. Any other kernel
 * entry (interrupt, exception, syscall) leaves no record: the next return
 * notes a new IP. That matches the hardware backend, whose records with a
 * kernel end point are filtered out.
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

#include "emulate.h"
#include "internal.h"

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

/*
 * The instruction at st->ip completed and went to regs->ip: correct a
 * forced TF, and record it if it was a taken branch and @record.
 */
VISIBLE_IF_KUNIT enum ds_emu_outcome ds_emu_step(struct ds_emu_task *st,
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
 * A single-step trap that is no news for anyone: no signal, no DR6 bit for
 * the debugger. The breakpoint bits the hw_breakpoint handler left in @dr6
 * go with it: it moved every hit of a breakpoint it holds to the virtual
 * DR6 (or to perf), and the bits it left are instruction breakpoints at the
 * IP the step went to, whose fault comes when that instruction starts, or
 * slots no breakpoint holds. A CPU may set those for a disabled slot
 * whose address matches (the SDM says to look only at enabled ones; QEMU's
 * TCG does, with DR0-DR3 at their reset value 0, at a call through a NULL
 * pointer). Without the step, that handler would have swallowed such a
 * #DB: no step, no SIGTRAP either.
 */
static void ds_emu_consume_step(unsigned long *dr6, unsigned long *virtual_dr6)
{
	*dr6 &= ~(DR_STEP | DR_TRAP_BITS);
	*virtual_dr6 &= ~DR_STEP;
}

/*
 * The debugger's own single-step trap while the emulation holds its block
 * step: with BTF the CPU would not have trapped after an instruction that
 * was no taken branch, so that step is no news for the debugger (and no
 * DR6.BS); a #DB that still has a cause for the debugger is delivered and,
 * as with BTF, ends the block step.
 */
VISIBLE_IF_KUNIT void ds_emu_block_trap(struct ds_emu_task *st,
					enum ds_emu_outcome outcome, unsigned long *dr6,
					unsigned long *virtual_dr6)
{
	if (outcome == DS_EMU_NOT_TAKEN)
		ds_emu_consume_step(dr6, virtual_dr6);
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
		ds_emu_consume_step(dr6, &current->thread.virtual_dr6);
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
	ds_emu_decode_init();
	err = ds_register_backend(&ds_emu_backend);
	if (err)
		pr_warn("cannot register the emulated BTS backend: %d\n", err);
	return err;
}
device_initcall(ds_emu_init);

