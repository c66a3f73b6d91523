// SPDX-License-Identifier: GPL-2.0
/*
 * bench-micro: what an untraced task pays per operation.
 *
 * Usage: bench-micro [-c CPU] pipe|getppid|fork N
 *
 *   pipe     two tasks pass a byte back and forth over two pipes N times
 *            (as perf bench sched pipe): two context switches per trip
 *   getppid  N getppid() system calls
 *   fork     N times fork() a child that exits at once, and reap it
 *
 * Everything runs on CPU (default 0). Prints "ns_per_op=X".
 */
#include "bench.h"
#include <sys/wait.h>

static void pipe_loop(unsigned long n)
{
	int ab[2], ba[2];
	unsigned long i;
	int status;
	char c = 0;
	pid_t pid;

	if (pipe(ab) || pipe(ba))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		/* the other ends closed: either side's death ends the other's read */
		close(ab[1]);
		close(ba[0]);
		for (i = 0; i < n; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	close(ab[0]);
	close(ba[1]);
	for (i = 0; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			die("pipe trip");
	if (waitpid(pid, &status, 0) != pid || status)
		die("pipe partner");
}

static void getppid_loop(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		syscall(SYS_getppid);
}

static void fork_loop(unsigned long n)
{
	unsigned long i;
	pid_t pid;

	for (i = 0; i < n; i++) {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (!pid)
			_exit(0);
		waitpid(pid, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	int cpu = 0, opt;
	unsigned long n;
	double t0;

	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c')
			return 2;
		cpu = atoi(optarg);
	}
	if (optind != argc - 2) {
		fprintf(stderr, "usage: bench-micro [-c CPU] pipe|getppid|fork N\n");
		return 2;
	}
	n = strtoul(argv[optind + 1], NULL, 0);
	pin(cpu);
	t0 = now_us();
	if (!strcmp(argv[optind], "pipe"))
		pipe_loop(n);
	else if (!strcmp(argv[optind], "getppid"))
		getppid_loop(n);
	else if (!strcmp(argv[optind], "fork"))
		fork_loop(n);
	else
		return 2;
	printf("ns_per_op=%.1f\n", (now_us() - t0) * 1e3 / n);
	return 0;
}
