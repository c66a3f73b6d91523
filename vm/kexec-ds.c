// SPDX-License-Identifier: GPL-2.0
/*
 * kexec into a kernel while a hardware branch trace records: make test's
 * run 'kexec'. A child, traced by PTRACE_BTS on the CPU's BTS, spins on
 * CPU 1 while CPU 0 loads the kernel and initramfs given and reboots into
 * them. Precise perf events (PEBS) sample both tasks all the while: the
 * one of the task that reboots is still scheduled in when the old kernel
 * jumps. The new kernel says what the old one left in the Debug Store MSRs
 * (ds: "the Debug Store was live on N CPUs at boot"), which vm/init's
 * vm.mode=kexec-check reports.
 *
 * Usage: kexec-ds <bzImage> <initramfs> <command line>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/reboot.h>
#include <asm/ptrace-bts.h>

#define TRACE_RECORDS	4096

static void fail(const char *what)
{
	printf("kexec-ds: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fail("sched_setaffinity");
}

/* A precise event on @pid's user-mode instructions: PEBS where perf has it. */
static void sample_precisely(pid_t pid)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.type		= PERF_TYPE_HARDWARE,
		.config		= PERF_COUNT_HW_INSTRUCTIONS,
		.sample_period	= 100003,
		.precise_ip	= 2,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};

	if (syscall(SYS_perf_event_open, &attr, pid, -1, -1, 0) < 0)
		fail("perf_event_open, precise_ip 2");
}

/* The tracee: branches on CPU 1 until the machine goes away. */
static void spin(void)
{
	pin(1);
	if (syscall(SYS_ptrace, PTRACE_TRACEME, 0, NULL, NULL))
		_exit(1);
	raise(SIGSTOP);
	for (;;)
		asm volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	struct ptrace_bts_config cfg = {
		.size		= TRACE_RECORDS * sizeof(struct bts_struct),
		.flags		= PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
		.backend	= PTRACE_BTS_BACKEND_HARDWARE,
	};
	int kfd, ifd, status;
	pid_t pid;

	if (argc != 4) {
		fprintf(stderr, "usage: kexec-ds <bzImage> <initramfs> <command line>\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	kfd = open(argv[1], O_RDONLY);
	if (kfd < 0)
		fail(argv[1]);
	ifd = open(argv[2], O_RDONLY);
	if (ifd < 0)
		fail(argv[2]);

	pid = fork();
	if (pid < 0)
		fail("fork");
	if (!pid)
		spin();
	pin(0);
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
		fail("the tracee did not stop");
	if (syscall(SYS_ptrace, PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))
		fail("PTRACE_BTS_CONFIG, the hardware backend");
	sample_precisely(pid);
	sample_precisely(0);
	if (syscall(SYS_ptrace, PTRACE_CONT, pid, NULL, NULL))
		fail("PTRACE_CONT");
	/* Long enough for the tracee to run, and to fill the staging buffer. */
	usleep(500 * 1000);
	printf("vm: kexec: a hardware trace records pid %d on CPU 1\n", pid);
	printf("vm: kexec: precise perf events sample it and pid %d on CPU 0\n",
	       getpid());

	if (syscall(SYS_kexec_file_load, kfd, ifd, strlen(argv[3]) + 1,
		    argv[3], 0UL))
		fail("kexec_file_load");
	printf("vm: kexec: into the new kernel\n");
	sync();
	reboot(LINUX_REBOOT_CMD_KEXEC);
	fail("reboot");
	return 1;
}
