// SPDX-License-Identifier: GPL-2.0
/*
 * Two threads that run at once, each with a breakpoint of its own in a
 * routine only it runs: their recordings are the threads' own.
 */
#include <pthread.h>

static volatile int sink;
/* Both threads exist and run before either reaches its breakpoint. */
static pthread_barrier_t both;

static int twice(int x)
{
	return 2 * x;
}

static int thrice(int x)
{
	return 3 * x;
}

void thread_a_bp(void)
{
}

void thread_b_bp(void)
{
}

static void *thread_a(void *arg)
{
	pthread_barrier_wait(&both);
	sink = twice(1);
	thread_a_bp();
	return arg;
}

static void *thread_b(void *arg)
{
	pthread_barrier_wait(&both);
	sink = thrice(thrice(1));
	thread_b_bp();
	return arg;
}

int main(void)
{
	pthread_t a, b;

	if (pthread_barrier_init(&both, NULL, 2))
		return 1;
	if (pthread_create(&a, NULL, thread_a, NULL) ||
	    pthread_create(&b, NULL, thread_b, NULL))
		return 1;
	if (pthread_join(a, NULL) || pthread_join(b, NULL))
		return 1;
	return 0;
}
