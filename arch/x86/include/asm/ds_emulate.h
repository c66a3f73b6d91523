/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Emulated Branch Trace Store: the hooks in the entry code, the #DB handler
 * and the task lifecycle. See arch/x86/kernel/ds/emulate.c.
 */
#ifndef _ASM_X86_DS_EMULATE_H
#define _ASM_X86_DS_EMULATE_H

#include <linux/thread_info.h>
#include <linux/types.h>

struct pt_regs;
struct task_struct;

/*
 * The thread flags that call the hooks: the emulation steps the task, the
 * TF is the emulation's, or a debugger steps the task (a PTRACE_SINGLEBLOCK
 * the emulation holds is given back after the emulation stops).
 */
#define _TIF_DS_EMU_WORK	(_TIF_DS_EMU | _TIF_DS_EMU_TF | _TIF_SINGLESTEP)

/**
 * ds_emu_user_flags() - the flags of the current task as the program has them
 * @regs: registers of the current task
 *
 * For the user registers an NMI saved: NMIs do not run the entry code that
 * hides a forced TF (perf's %PERF_SAMPLE_REGS_USER and _INTR). Saved user
 * flags with TIF_DS_EMU_TF set hold the emulation's TF and not the
 * program's: the TF is cleared. Kernel mode registers are left alone.
 * Between an entry from user mode and the next return, the entry code
 * already cleared the forced TF, and a TF the kernel sets meanwhile (a
 * sigreturn, a debugger's register write) is cleared here too, until the
 * return to user mode, which keeps it and drops TIF_DS_EMU_TF.
 *
 * Only with CONFIG_X86_DS_EMULATE: callers test IS_ENABLED() first.
 *
 * Return: the flags of @regs, without a forced TF.
 */
unsigned long ds_emu_user_flags(struct pt_regs *regs);

#ifdef CONFIG_X86_DS_EMULATE

/**
 * ds_emu_forced() - the ds.force_emulation knob
 *
 * Return: true if branch tracing should use the emulated backend even on
 * CPUs with BTS.
 */
bool ds_emu_forced(void);

/**
 * ds_emu_exit_to_user() - arm the single step for the next user instruction
 * @regs: the user registers
 *
 * Called last on every return to user mode of a task with a flag of
 * %_TIF_DS_EMU_WORK.
 *
 * Context: interrupts disabled.
 */
void ds_emu_exit_to_user(struct pt_regs *regs);

/**
 * ds_emu_debug() - a #DB from user mode, see exc_debug_user()
 * @regs:   the user registers, a forced TF already hidden
 * @dr6:    the DR6 bits still to handle; the single-step bit is cleared
 *	    when the step was the emulation's own
 * @uflags: the user flags as the CPU saved them
 *
 * Context: process context, interrupts enabled.
 */
void ds_emu_debug(struct pt_regs *regs, unsigned long *dr6,
		  unsigned long uflags);

/**
 * ds_emu_forget_blockstep() - the debugger restates how a task steps
 * @child: the task, from user_enable_single_step(), user_enable_block_step()
 *	   and user_disable_single_step()
 *
 * A PTRACE_SINGLEBLOCK the emulation holds from an earlier request is void;
 * a new one sets %TIF_BLOCKSTEP again.
 *
 * Context: @child is current, or stopped and frozen by ptrace.
 */
void ds_emu_forget_blockstep(struct task_struct *child);

/**
 * ds_emu_fork_thread() - a new task starts without emulation state
 * @child: the new task, from copy_thread()
 */
void ds_emu_fork_thread(struct task_struct *child);

/**
 * ds_emu_exit_thread() - free the emulation state of an exiting task
 * @task: the task, from exit_thread(), after ds_exit_thread()
 */
void ds_emu_exit_thread(struct task_struct *task);

static inline bool ds_emu_debug_pending(void)
{
	return read_thread_flags() & _TIF_DS_EMU_WORK;
}

#else /* !CONFIG_X86_DS_EMULATE */

static inline bool ds_emu_forced(void)
{
	return false;
}

static inline void ds_emu_exit_to_user(struct pt_regs *regs) { }
static inline void ds_emu_debug(struct pt_regs *regs, unsigned long *dr6,
				unsigned long uflags) { }
static inline void ds_emu_forget_blockstep(struct task_struct *child) { }
static inline void ds_emu_fork_thread(struct task_struct *child) { }
static inline void ds_emu_exit_thread(struct task_struct *task) { }

static inline bool ds_emu_debug_pending(void)
{
	return false;
}

#endif /* CONFIG_X86_DS_EMULATE */

#endif /* _ASM_X86_DS_EMULATE_H */
