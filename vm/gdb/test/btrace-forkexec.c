// SPDX-License-Identifier: GPL-2.0
/*
 * A parent that forks a child which execs another program (argv[1]),
 * then waits for it: the parent's recording goes on across the fork, and
 * the child, which gdb detaches, runs untraced to its end.
 */
#include <sys/wait.h>
#include <unistd.h>

static volatile int sink;

void before_fork(void)
{
	sink = 1;
}

void after_child(int status)
{
	sink = status;
}

int main(int argc, char **argv)
{
	int status = -1;
	pid_t pid;

	before_fork();
	pid = fork();
	if (pid == 0) {
		if (argc > 1)
			execv(argv[1], argv + 1);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	after_child(status);
	return 0;
}
