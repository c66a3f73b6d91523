/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of ptrace_bts_errno share: the users and settings the
 * cases switch to, what the machine has, and the dumpable tracer.
 */
#ifndef PTRACE_BTS_ERRNO_H
#define PTRACE_BTS_ERRNO_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>

#include "../kselftest.h"
#include "ptrace_bts_util.h"

#define BTS_REC			sizeof(struct bts_struct)
#define BTS_TRACE_ALLOC		(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC)
/* The request numbers around the PTRACE_BTS_* block. */
#define PTRACE_BTS_FIRST	PTRACE_BTS_CONFIG
#define PTRACE_BTS_LAST		PTRACE_BTS_READ

/* perf's policy for the hardware backend, and the dumpable rule */
#ifndef CAP_PERFMON
#define CAP_PERFMON		38
#endif
#define DS_FORCE_EMULATION	DS_PARAM("force_emulation")
#define SUID_DUMPABLE		"/proc/sys/fs/suid_dumpable"
/* The unprivileged user of the tracers and their tracees. */
#define POLICY_UID		65534
/* The saved uid of a tracee that changes its effective uid. */
#define POLICY_UID2		65533
/* No capability at all. */
#define NO_CAP			-1
#define POLICY_RECORDS		64
#define DUMPABLE_RECORDS	4096

/* What the kernel and the machine offer. */
struct bts_machine {
	bool	requests;	/* the PTRACE_BTS_* requests exist */
	bool	hw;		/* BTS hardware */
	bool	emu;		/* the emulated backend */
};

/* What a tracer got from CONFIG, and the backend STATUS then reported. */
struct policy_result {
	long	ret;
	int	err;
	__u32	backend;
};

/*
 * Who traces whom, and how the tracee stops being dumpable. What the
 * trace's reads may do is what PTRACE_PEEKDATA may: decided by the
 * credentials the ptrace link recorded, not by the tracer's own.
 */
enum dumpable_how {
	/* an unprivileged tracer of its own user's tracee, PR_SET_DUMPABLE */
	DUMPABLE_PRCTL,
	/* the same tracee, by setresuid() to its saved uid */
	DUMPABLE_SETRESUID,
	/* root's tracee (PTRACE_TRACEME as root), the tracer no longer root */
	DUMPABLE_ROOT_TRACEE,
	/* root the tracer, but PTRACE_TRACEME recorded the tracee's user */
	DUMPABLE_ROOT_TRACER,
	/* PTRACE_ATTACH as root recorded root; the tracer no longer root */
	DUMPABLE_ROOT_ATTACHED,
};

/* ptrace_bts_errno_dumpable.c */
void dumpable_tracer(enum dumpable_how how, int backend);

/* ptrace_bts_errno.c */
int become_user(int cap);
pid_t user_tracee(void (*body)(void), uid_t suid);

#endif /* PTRACE_BTS_ERRNO_H */
