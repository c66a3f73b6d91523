// SPDX-License-Identifier: GPL-2.0
/*
 * bench-spin: the workload of the scaling benchmark and the traced task
 * that runs beside the untraced ones. Each thread runs a loop of
 * SPIN_INSNS instructions with one taken branch, ITERS times (0: until
 * killed), all threads starting together.
 *
 * Usage: bench-spin [-t THREADS] [-c CPU] ITERS
 * Prints "insns=N" (instructions of the loops in all threads) at the end.
 */
#include "bench.h"
#include <pthread.h>

#define SPIN_INSNS	5
#define MAX_THREADS	64

static unsigned long iters;
static pthread_barrier_t start;

static void spin(unsigned long n)
{
	/* 5 instructions, the jnz taken every time but the last */
	asm volatile("1:	add $1, %%eax\n"
		     "	add $2, %%edx\n"
		     "	xor %%eax, %%edx\n"
		     "	dec %%rcx\n"
		     "	jnz 1b\n"
		     : "+c" (n) : : "eax", "edx", "cc");
}

static void *thread(void *arg)
{
	pthread_barrier_wait(&start);
	if (!iters)
		for (;;)
			spin(1UL << 30);
	spin(iters);
	return arg;
}

int main(int argc, char **argv)
{
	pthread_t tid[MAX_THREADS];
	int threads = 1, cpu = -1, opt, i;

	while ((opt = getopt(argc, argv, "t:c:")) != -1) {
		switch (opt) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: bench-spin [-t THREADS] [-c CPU] ITERS\n");
		return 2;
	}
	iters = strtoul(argv[optind], NULL, 0);
	pin(cpu);
	pthread_barrier_init(&start, NULL, threads);
	for (i = 1; i < threads; i++)
		if (pthread_create(&tid[i], NULL, thread, NULL))
			die("pthread_create");
	thread(NULL);
	for (i = 1; i < threads; i++)
		pthread_join(tid[i], NULL);
	printf("insns=%lu\n", iters * SPIN_INSNS * threads);
	return 0;
}
