// SPDX-License-Identifier: GPL-2.0
/*
 * bts-crash: a dynamically linked PIE program for btrace to explain.
 *
 *   bts-crash          sorts with libc's qsort(), then calls a handler
 *                      through a table entry that an off-by-one write
 *                      corrupted: it dies of SIGSEGV at a bad address.
 *   bts-crash threads N  two threads call worker_step() for about N
 *                      seconds, then it exits 0 (for btrace -p).
 *   bts-crash --lines  the source line of by_value(), as the compiler
 *                      numbers it: "by_value crash.c <line>".
 *
 * The values are sorted from the highest: qsort() calls by_value().
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define noipa __attribute__((noipa))

struct handlers {
	int values[4];
	void (*on_done)(int sum);
};

static noipa void print_sum(int sum)
{
	printf("bts-crash: sum %d\n", sum);
}

/*
 * A function on one line, and that line from __LINE__ (as bts-demo's):
 * every instruction of it belongs to that line, which btrace_test compares
 * with the one btrace reads from DWARF, here in a PIE.
 */
#define ONE_LINE(name, params, expr)					\
	static noipa int name params { return expr; }			\
	static const int name##_line = __LINE__

ONE_LINE(by_value, (const void *a, const void *b), *(const int *)a - *(const int *)b);

/*
 * The bug: <= instead of <. The word after values is the low half of the
 * handler's pointer (all of it on i386), which becomes 0x500.
 */
static noipa void fill(struct handlers *h, int n)
{
	int *word = (int *)h;
	int i;

	for (i = 0; i <= n; i++)
		word[i] = 0x100 * (i + 1);
}

static noipa int sum_sorted(struct handlers *h)
{
	int i, sum = 0;

	qsort(h->values, 4, sizeof(int), by_value);
	for (i = 0; i < 4; i++)
		sum += h->values[i];
	return sum;
}

static noipa void finish(struct handlers *h, int sum)
{
	h->on_done(sum);
}

static volatile int stop;
static volatile unsigned long steps[2];

noipa void worker_step(int id)
{
	steps[id]++;
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;

	while (!stop)
		worker_step(id);
	return NULL;
}

static void *stopper(void *arg)
{
	struct timespec ts = { .tv_sec = (long)arg };

	nanosleep(&ts, NULL);
	stop = 1;
	return NULL;
}

static int threads(long seconds)
{
	pthread_t w, s;

	if (pthread_create(&w, NULL, worker, (void *)1L) ||
	    pthread_create(&s, NULL, stopper, (void *)seconds))
		return 1;
	worker(NULL);
	pthread_join(w, NULL);
	pthread_join(s, NULL);
	printf("bts-crash: %lu and %lu steps\n", steps[0], steps[1]);
	return 0;
}

int main(int argc, char **argv)
{
	struct handlers h = { .on_done = print_sum };

	if (argc > 2 && !strcmp(argv[1], "threads"))
		return threads(atol(argv[2]));
	if (argc > 1 && !strcmp(argv[1], "--lines")) {
		printf("by_value %s %d\n", strrchr(__FILE__, '/') ?
		       strrchr(__FILE__, '/') + 1 : __FILE__, by_value_line);
		return 0;
	}
	fill(&h, 4);
	/* Out of order, so that qsort() has something to do. */
	h.values[0] = 0x400;
	h.values[3] = 0x100;
	finish(&h, sum_sorted(&h));
	return 0;
}
