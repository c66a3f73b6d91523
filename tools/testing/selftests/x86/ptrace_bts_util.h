/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the ptrace branch tracing selftests (the ptrace_bts_* programs,
 * ds_perf_bts, ptrace_bts_errno) share: the raw ptrace call, the memory charge of the
 * trace buffers, the CPU's flags, perf's BTS event, and what the kernel
 * reports of the backends.
 */
#ifndef PTRACE_BTS_UTIL_H
#define PTRACE_BTS_UTIL_H

#include <fcntl.h>
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

/* Does the first "@field : value" line of /proc/cpuinfo have @value? */
static inline bool cpu_info_is(const char *field, const char *value)
{
	char line[256], *val;
	bool is = false;
	FILE *f;

	f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		val = strchr(line, ':');
		if (!val || strncmp(line, field, strlen(field)) ||
		    (line[strlen(field)] != ' ' && line[strlen(field)] != '\t'))
			continue;
		val[strcspn(val, "\n")] = 0;
		is = !strcmp(val + 1 + strspn(val + 1, " "), value);
		break;
	}
	fclose(f);
	return is;
}

/*
 * Does the kernel drive this CPU's BTS? An Intel CPU that lists "bts" and
 * the 64-bit save area ("dtes64"), not a NetBurst (family 15) one.
 */
static inline bool cpu_has_bts(void)
{
	return cpu_has_flag("bts") && cpu_has_flag("dtes64") &&
	       cpu_info_is("vendor_id", "GenuineIntel") &&
	       !cpu_info_is("cpu family", "15");
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

#define DS_PARAM(name)		"/sys/module/ds/parameters/" name
#define PERF_PARANOID		"/proc/sys/kernel/perf_event_paranoid"

/* Is the boolean parameter at @path set? false where there is none. */
static inline bool ds_param_on(const char *path)
{
	char c = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return false;
	if (fread(&c, 1, 1, f) != 1)
		c = 0;
	fclose(f);
	return c == 'Y';
}

/*
 * Does this kernel have the PTRACE_BTS_* requests? They come with the
 * Debug Store allocator, whose ds.meltdown_kernel is always there.
 */
static inline bool bts_requests_present(void)
{
	return !access(DS_PARAM("meltdown_kernel"), F_OK);
}

/* Does the kernel offer the emulated backend (ds.emulation)? */
static inline bool bts_emulation_present(void)
{
	return ds_param_on(DS_PARAM("emulation"));
}

/*
 * Would perf give this user BTS on its own tasks? Root, or a
 * perf_event_paranoid of at most 2. Root is taken to have CAP_SYS_ADMIN,
 * and no security module to refuse it.
 */
static inline bool bts_hw_allowed(void)
{
	char buf[16] = "";
	FILE *f;

	if (!geteuid())
		return true;
	f = fopen(PERF_PARANOID, "r");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return buf[0] && atoi(buf) <= 2;
}

/* Does ds.force_emulation keep tracers off the CPU's BTS? */
static inline bool bts_emulation_forced(void)
{
	return bts_emulation_present() &&
	       ds_param_on(DS_PARAM("force_emulation"));
}

/*
 * The backend PTRACE_BTS_BACKEND_ANY must get, from what the kernel
 * reports: the CPU's BTS (cpu_has_bts()) unless ds.force_emulation is set
 * or perf's policy refuses it to this user, else the emulation.
 */
static inline int expected_backend(void)
{
	if (cpu_has_bts() && !bts_emulation_forced() && bts_hw_allowed())
		return PTRACE_BTS_BACKEND_HARDWARE;
	return PTRACE_BTS_BACKEND_EMULATED;
}

/* The name of @backend, a PTRACE_BTS_BACKEND_*, for messages. */
static inline const char *backend_name(int backend)
{
	switch (backend) {
	case PTRACE_BTS_BACKEND_ANY:
		return "any";
	case PTRACE_BTS_BACKEND_HARDWARE:
		return "hardware";
	case PTRACE_BTS_BACKEND_EMULATED:
		return "emulated";
	default:
		return "unknown";
	}
}

/* Write @val to @file of cgroup @dir: 0, or -1 with errno set. */
static inline int cgroup_write(const char *dir, const char *file,
			       const char *val)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* @key's value in @file of cgroup @dir, or its only number; -1 unread. */
static inline long cgroup_read(const char *dir, const char *file,
			       const char *key)
{
	char path[512], name[64];
	long val = -1, v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!key) {
		if (fscanf(f, "%ld", &v) == 1)
			val = v;
	} else {
		while (fscanf(f, "%63s %ld", name, &v) == 2) {
			if (!strcmp(name, key)) {
				val = v;
				break;
			}
		}
	}
	fclose(f);
	return val;
}

/* Does @file of cgroup @dir list the word @word (a controller)? */
static inline bool cgroup_lists(const char *dir, const char *file,
				const char *word)
{
	char path[512], tok[64];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fscanf(f, "%63s", tok) == 1)
		found = !strcmp(tok, word);
	fclose(f);
	return found;
}

#endif /* PTRACE_BTS_UTIL_H */
