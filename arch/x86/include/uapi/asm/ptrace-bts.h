/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Branch tracing of a debuggee through ptrace: the PTRACE_BTS_* requests.
 *
 * All requests need the caller to be the ptracer of a stopped tracee, like
 * PTRACE_PEEKUSER; otherwise ptrace() fails with ESRCH. STATUS, SIZE and
 * READ only need the caller to be the ptracer: they also read the trace of
 * a running tracee, and of one that exited and is not reaped yet. The
 * layouts are the same for 32-bit and 64-bit tracers and tracees. See
 * Documentation/arch/x86/ptrace-bts.rst.
 */
#ifndef _UAPI_ASM_X86_PTRACE_BTS_H
#define _UAPI_ASM_X86_PTRACE_BTS_H

#include <linux/types.h>

/*
 * ptrace(PTRACE_BTS_CONFIG, pid, struct ptrace_bts_config *cfg, size_t len)
 *	Configure, resize or stop branch tracing. The kernel reads len bytes;
 *	len smaller than the original 16-byte struct is EINVAL, a larger
 *	struct whose bytes beyond what this kernel knows are not zero (or
 *	one larger than a page) is E2BIG. A 16-byte struct reads as backend
 *	PTRACE_BTS_BACKEND_ANY. PTRACE_BTS_O_SIGNAL needs a valid signal
 *	other than SIGKILL and SIGSTOP (EINVAL); without it cfg->signal is
 *	ignored. PTRACE_BTS_O_SIGNAL with PTRACE_BTS_O_STOP is EINVAL, and
 *	so is either with a buffer of fewer records than one plus one for
 *	PTRACE_BTS_O_GAPS and one for PTRACE_BTS_O_SCHED. A
 *	backend other than the PTRACE_BTS_BACKEND_* values is EINVAL.
 *	Returns 0.
 *	- flags without PTRACE_BTS_O_TRACE: stop tracing, free the buffer.
 *	- PTRACE_BTS_O_ALLOC: (re)allocate a buffer of cfg->size bytes (rounded
 *	  down to whole records, at least one; 0 is EINVAL) with the backend
 *	  cfg->backend selects; existing records are lost. A backend that
 *	  is missing is EOPNOTSUPP, one that is in use EBUSY. EDQUOT if the
 *	  buffer would take the tracer's user over RLIMIT_MEMLOCK (without
 *	  CAP_IPC_LOCK), ENOMEM if there is no memory. A trace there is
 *	  keeps its backend where cfg->backend allows it, and then stays
 *	  as it was if the new buffer cannot be had; otherwise EBUSY,
 *	  EDQUOT and ENOMEM leave the thread without a trace.
 *	  PTRACE_BTS_BACKEND_HARDWARE is EACCES (after EOPNOTSUPP, before
 *	  EBUSY) where perf would not give the caller the same trace as a
 *	  perf event (perf_event_paranoid, CAP_SYS_ADMIN, CAP_PERFMON, the
 *	  perf_event_open security hook), and with ds.force_emulation=1;
 *	  PTRACE_BTS_BACKEND_ANY then gets the emulated backend, or EACCES
 *	  where there is none.
 *	  Without it, the existing buffer and backend are kept (EINVAL if
 *	  there is none) and only the flags change; cfg->backend must then
 *	  be PTRACE_BTS_BACKEND_ANY or the backend in use (EINVAL).
 *	With PTRACE_BTS_O_TRACE, EPERM if the tracee is not dumpable, unless
 *	the credentials the ptrace link recorded have CAP_SYS_PTRACE over it
 *	(the tracer's at PTRACE_ATTACH or PTRACE_SEIZE, the tracee's own at
 *	PTRACE_TRACEME), as for PTRACE_PEEKTEXT.
 * ptrace(PTRACE_BTS_STATUS, pid, struct ptrace_bts_config *cfg, size_t len)
 *	Fill min(len, sizeof(*cfg)) bytes: buffer size in bytes (whole
 *	records; 0 when not configured), the O_TRACE/O_SCHED/O_SIGNAL/O_STOP/
 *	O_GAPS flags,
 *	signal (0 without O_SIGNAL), bts_size = sizeof(struct bts_struct),
 *	the backend in use (0 when not configured), the PTRACE_BTS_S_* state,
 *	the next record's sequence number and the records lost. Returns the
 *	size of the kernel's struct ptrace_bts_config.
 * ptrace(PTRACE_BTS_SIZE, pid, 0, 0)
 *	Returns the number of records available. SIZE, GET and DRAIN ask
 *	CONFIG's dumpable rule at every request: EPERM while the tracee is
 *	not dumpable (PR_SET_DUMPABLE 0, a change of credentials), unless
 *	the ptrace link's credentials have CAP_SYS_PTRACE over it.
 * ptrace(PTRACE_BTS_GET, pid, struct bts_struct *rec, unsigned long index)
 *	Copy one record; index 0 is the newest. EINVAL if index >= SIZE.
 *	Returns 0.
 * ptrace(PTRACE_BTS_CLEAR, pid, 0, 0)
 *	Drop all records (and resume tracing paused at a full buffer).
 *	Returns 0, also when not configured.
 * ptrace(PTRACE_BTS_DRAIN, pid, struct bts_struct *buf, size_t len)
 *	Copy all records, oldest first, into buf, then drop them (and resume
 *	tracing paused at a full buffer). EINVAL if len cannot hold SIZE records;
 *	nothing is dropped on error. Returns the number of records copied.
 * ptrace(PTRACE_BTS_READ, pid, struct ptrace_bts_read *rd, size_t len)
 *	Copy the records numbered rd->seq on, oldest first, into rd->buf, as
 *	many as rd->size bytes hold, without dropping them; set rd->first to
 *	the number of the first record copied, rd->next to the number after
 *	the last one, and rd->lost and rd->state as STATUS would. rd->first
 *	above rd->seq means the records between are gone. The dumpable rule
 *	of SIZE applies (EPERM). len below the 56-byte struct, or rd->size
 *	below one record, is EINVAL; unknown non-zero tail bytes E2BIG;
 *	rd->seq above the number the next record gets (STATUS's next)
 *	ERANGE. Returns the number of records copied.
 * ptrace(PTRACE_GETREGSET, pid, NT_X86_BTS, struct iovec *iov)
 *	Copy the newest records that fit, up to 1024, oldest first,
 *	without dropping them; iov_len becomes at most 24 KiB, not the
 *	bytes copied. ENODATA without a
 *	trace; core dumps carry the same as an NT_X86_BTS note per traced
 *	thread whose images were dumpable.
 */
#define PTRACE_BTS_CONFIG	40
#define PTRACE_BTS_STATUS	41
#define PTRACE_BTS_SIZE		42
#define PTRACE_BTS_GET		43
#define PTRACE_BTS_CLEAR	44
#define PTRACE_BTS_DRAIN	45
#define PTRACE_BTS_READ		46

/**
 * struct ptrace_bts_config - PTRACE_BTS_CONFIG and PTRACE_BTS_STATUS argument
 * @size:	CONFIG with PTRACE_BTS_O_ALLOC: the trace buffer size in
 *		bytes, rounded down to whole records but at least one (0 or
 *		more than 4 MiB is EINVAL); ignored without it. STATUS: the
 *		buffer size in bytes, a whole number of records, 0 when not
 *		configured.
 * @flags:	PTRACE_BTS_O_* flags. STATUS: the configured
 *		PTRACE_BTS_O_TRACE, PTRACE_BTS_O_SCHED, PTRACE_BTS_O_SIGNAL,
 *		PTRACE_BTS_O_STOP and PTRACE_BTS_O_GAPS.
 * @signal:	with PTRACE_BTS_O_SIGNAL, the signal sent to the tracee
 *		thread when the buffer is full; ignored without it. STATUS:
 *		0 without PTRACE_BTS_O_SIGNAL.
 * @bts_size:	STATUS: sizeof(struct bts_struct), 24; ignored by CONFIG.
 * @backend:	PTRACE_BTS_BACKEND_*. CONFIG: the backend to trace with.
 *		STATUS: the backend that records, PTRACE_BTS_BACKEND_HARDWARE
 *		or PTRACE_BTS_BACKEND_EMULATED, 0 when not configured.
 * @state:	STATUS: PTRACE_BTS_S_* bits; ignored by CONFIG.
 * @next:	STATUS: the sequence number the next record gets; the
 *		records held are numbered @next - SIZE to @next - 1. 0 when
 *		not configured, or with %PTRACE_BTS_S_UNREADABLE. Ignored by
 *		CONFIG.
 * @lost:	STATUS: drops since the allocation: records dropped at a
 *		full buffer with PTRACE_BTS_O_SIGNAL or PTRACE_BTS_O_STOP
 *		while paused, plus one each time the
 *		hardware had to drop records it could not store. Overwritten
 *		records are not counted: they are the numbers below
 *		@next - SIZE. 0 with %PTRACE_BTS_S_UNREADABLE. Ignored by
 *		CONFIG.
 *
 * The first 16 bytes are the original layout, without @backend: CONFIG
 * reads a 16-byte struct as one with @backend PTRACE_BTS_BACKEND_ANY.
 * The 20-byte layout has no @state, @next and @lost. The layout is the
 * same for 32-bit and 64-bit tracers.
 */
struct ptrace_bts_config {
	__u32	size;
	__u32	flags;
	__u32	signal;
	__u32	bts_size;
	__u32	backend;
	__u32	state;
	__u64	next;
	__u64	lost;
};

/*
 * Tracing paused at a full buffer (PTRACE_BTS_O_SIGNAL, PTRACE_BTS_O_STOP)
 * until a DRAIN or CLEAR.
 */
#define PTRACE_BTS_S_PAUSED		0x1
/*
 * Tracing stopped at an execve() of an image the tracee's user may not
 * read (a set-user-ID program); the records of the images before stay.
 */
#define PTRACE_BTS_S_STOPPED_EXEC	0x2
/*
 * The tracer may not read the trace now (the dumpable rule of
 * PTRACE_BTS_SIZE): @next and @lost are 0.
 */
#define PTRACE_BTS_S_UNREADABLE		0x4
/*
 * The thread exited: the trace is complete, readable until the tracer
 * reaps the thread or detaches. With PTRACE_BTS_S_STOPPED_EXEC where
 * tracing had stopped at an exec before.
 */
#define PTRACE_BTS_S_EXITED		0x8

/**
 * struct ptrace_bts_read - PTRACE_BTS_READ argument
 * @seq:	the sequence number of the first record wanted: 0 for all
 *		that are held, the last read's @next for what came since
 * @buf:	the user address of an array of struct bts_struct
 * @size:	its size in bytes
 * @first:	out: the sequence number of buf[0], or @next when nothing
 *		was copied; above @seq where records were lost to the reader
 * @next:	out: the sequence number after the last record copied
 * @lost:	out: as &struct ptrace_bts_config.lost, at the read
 * @state:	out: as &struct ptrace_bts_config.state, at the read
 * @__reserved:	zero
 *
 * The layout is the same for 32-bit and 64-bit tracers.
 */
struct ptrace_bts_read {
	__u64	seq;
	__u64	buf;
	__u64	size;
	__u64	first;
	__u64	next;
	__u64	lost;
	__u32	state;
	__u32	__reserved;
};

/*
 * Who records the branches. ANY lets the kernel choose: the CPU's Branch
 * Trace Store if it has one that is free, else the emulated backend, which
 * single-steps the tracee in the kernel and is much slower.
 */
#define PTRACE_BTS_BACKEND_ANY		0
#define PTRACE_BTS_BACKEND_HARDWARE	1
#define PTRACE_BTS_BACKEND_EMULATED	2

/* Record the tracee's user-mode branches. */
#define PTRACE_BTS_O_TRACE	0x1
/* Also record when the tracee is scheduled in and out. */
#define PTRACE_BTS_O_SCHED	0x2
/*
 * When the buffer is full, send @signal to the tracee and pause tracing
 * until the tracer drains or clears the buffer, instead of overwriting the
 * oldest records. The signal is a real one: the program's handler or
 * default action gets it unless the tracer suppresses it at the
 * signal-delivery-stop; its siginfo has si_code SI_KERNEL and si_errno
 * ENOBUFS. For tracers of the 2.6.29 ABI; PTRACE_BTS_O_STOP is the way.
 */
#define PTRACE_BTS_O_SIGNAL	0x4
/* (Re)allocate the trace buffer with @size bytes. */
#define PTRACE_BTS_O_ALLOC	0x8
/*
 * When the buffer is full, pause tracing until the tracer drains or clears
 * the buffer, and stop the tracee in a ptrace event stop,
 * (SIGTRAP | PTRACE_EVENT_BTS << 8) in waitpid()'s status, before it runs
 * on in user mode. PTRACE_GETEVENTMSG gives STATUS's next (its low 32
 * bits where unsigned long has 32; 0 if the trace may not be read), so
 * that a READ from the tracer's last position needs no STATUS. Nothing
 * reaches the program; a signal given to the restarting request is
 * ignored, as at any event stop. A stop pending when the ptrace link ends
 * does not happen.
 */
#define PTRACE_BTS_O_STOP	0x10
/*
 * Mark the gaps of the trace with BTS_GAP records: where execution went on
 * elsewhere than the records say (a signal handler, sigreturn, exec), and
 * where records are missing (a pause, a loss). Without it, a trace has no
 * BTS_GAP records, as for tracers of the ABI before them.
 */
#define PTRACE_BTS_O_GAPS	0x20

/**
 * enum bts_qualifier - what a struct bts_struct describes
 * @BTS_INVALID:	no record
 * @BTS_BRANCH:		a taken branch, in variant.lbr
 * @BTS_TASK_ARRIVES:	the tracee was scheduled in, in variant.event
 * @BTS_TASK_DEPARTS:	the tracee was scheduled out, in variant.event
 * @BTS_GAP:		execution did not go on from the record before by a
 *			branch, or records are missing here, in variant.gap
 *			(PTRACE_BTS_O_GAPS)
 */
enum bts_qualifier {
	BTS_INVALID		= 0,
	BTS_BRANCH		= 1,
	BTS_TASK_ARRIVES	= 2,
	BTS_TASK_DEPARTS	= 3,
	BTS_GAP			= 4,
};

/*
 * Why a trace has a gap: struct bts_struct variant.gap.reason.
 * EXEC:	the tracee exec()ed; the records after are of the new image
 * EXEC_STOPPED: the tracee exec()ed an image its user may not read;
 *		tracing stopped there (PTRACE_BTS_S_STOPPED_EXEC)
 * SIGNAL:	the kernel entered a signal handler, at ip; info: the signal
 * SIGRETURN:	a signal handler returned (sigreturn), to ip
 * LOST:	the hardware dropped records here, how many is not known
 * PAUSED:	recording was paused before this record, at a full buffer
 *		(PTRACE_BTS_O_STOP, PTRACE_BTS_O_SIGNAL): branches may be missing
 */
#define PTRACE_BTS_GAP_EXEC		1
#define PTRACE_BTS_GAP_EXEC_STOPPED	2
#define PTRACE_BTS_GAP_SIGNAL		3
#define PTRACE_BTS_GAP_SIGRETURN	4
#define PTRACE_BTS_GAP_LOST		5
#define PTRACE_BTS_GAP_PAUSED		6

/**
 * struct bts_struct - one branch trace record, 24 bytes
 * @qualifier:		enum bts_qualifier
 * @variant:		the record's data, as @qualifier says
 * @variant.lbr:	BTS_BRANCH: a taken branch
 * @variant.lbr.from:	address of the branch instruction
 * @variant.lbr.to:	address of the branch target
 * @variant.event:	BTS_TASK_ARRIVES, BTS_TASK_DEPARTS: a scheduling
 *			event of the tracee (PTRACE_BTS_O_SCHED)
 * @variant.event.clock: CLOCK_MONOTONIC time of the event in nanoseconds,
 *			as the tracer reads that clock in its time namespace
 * @variant.event.pid:	thread id of the tracee in the tracer's pid
 *			namespace
 * @variant.event.__reserved: zero
 * @variant.gap:	BTS_GAP: a gap in the trace
 * @variant.gap.ip:	where execution went on, 0 if not known
 * @variant.gap.reason:	PTRACE_BTS_GAP_*
 * @variant.gap.info:	the signal of PTRACE_BTS_GAP_SIGNAL, else 0
 *
 * The layout is the same for 32-bit and 64-bit tracers and tracees, and
 * for both backends.
 */
struct bts_struct {
	__u64	qualifier;
	union {
		struct {
			__u64	from;
			__u64	to;
		} lbr;
		struct {
			__u64	clock;
			__u32	pid;
			__u32	__reserved;
		} event;
		struct {
			__u64	ip;
			__u32	reason;
			__u32	info;
		} gap;
	} variant;
};

#endif /* _UAPI_ASM_X86_PTRACE_BTS_H */
