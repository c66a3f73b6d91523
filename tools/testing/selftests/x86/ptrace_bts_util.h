/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the ptrace branch tracing selftests (ptrace_bts, ds_perf_bts,
 * ptrace_bts_errno) share: the raw ptrace call, the memory charge of the
 * trace buffers, the CPU's flags, and perf's BTS event.
 */
#ifndef PTRACE_BTS_UTIL_H
#define PTRACE_BTS_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <linux/perf_event.h>
#include <asm/ptrace-bts.h>

static inline long sys_ptrace(long request, pid_t pid, void *addr,
			      unsigned long data)
{
	return syscall(SYS_ptrace, request, pid, addr, (void *)data);
}

/* Charge of the trace buffers: VmPin of @pid (0: self) in kB, -1 unread. */
static inline long vmpin_kb(pid_t pid)
{
	char path[64], line[128];
	long kb = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Does the "flags" line of /proc/cpuinfo list @flag? */
static inline bool cpu_has_flag(const char *flag)
{
	char line[4096], *tok, *save;
	bool found = false;
	FILE *f;

	f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", strlen("flags")))
			continue;
		tok = strchr(line, ':');
		if (!tok)
			continue;
		for (tok = strtok_r(tok + 1, "\n ", &save); tok && !found;
		     tok = strtok_r(NULL, "\n ", &save))
			found = !strcmp(tok, flag);
		break;
	}
	fclose(f);
	return found;
}

/*
 * perf's BTS event on @pid (0: this task): every user-mode branch as a
 * sample. While it exists, perf holds the Debug Store.
 */
static inline int open_perf_bts(pid_t pid, bool disabled)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_HARDWARE,
		.size		= sizeof(attr),
		.config		= PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
		.sample_period	= 1,
		.sample_type	= PERF_SAMPLE_IP | PERF_SAMPLE_ADDR,
		.disabled	= disabled,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};

	return syscall(SYS_perf_event_open, &attr, pid, -1, -1, 0);
}

/*
 * The backend the tracing must use, where the caller knows which one the
 * machine offers: PTRACE_BTS_BACKEND in the environment, "hardware" or
 * "emulated"; 0 when it is not set, -1 for a name this test does not know.
 */
static inline int expected_backend(void)
{
	const char *name = getenv("PTRACE_BTS_BACKEND");

	if (!name || !*name)
		return PTRACE_BTS_BACKEND_ANY;
	if (!strcmp(name, "hardware"))
		return PTRACE_BTS_BACKEND_HARDWARE;
	if (!strcmp(name, "emulated"))
		return PTRACE_BTS_BACKEND_EMULATED;
	return -1;
}

#endif /* PTRACE_BTS_UTIL_H */
