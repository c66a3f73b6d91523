// SPDX-License-Identifier: GPL-2.0
/*
 * bts-demo: a small program whose branch trace is easy to read: a loop,
 * a conditional, direct calls, a call through a pointer, recursion.
 * It prints through write() and leaves through _exit() so that the trace
 * of main stays short (no stdio, no atexit handlers).
 */
#include <string.h>
#include <unistd.h>

#define noinline __attribute__((noinline))

static noinline int is_odd(int n)
{
	return n & 1;
}

static noinline int square(int n)
{
	return n * n;
}

static noinline int triple(int n)
{
	return 3 * n;
}

static int (*const ops[])(int) = { square, triple };

static noinline int fact(int n)
{
	return n <= 1 ? 1 : n * fact(n - 1);
}

int main(void)
{
	char msg[] = "bts-demo: result 0000\n";
	int i, sum = 0;

	for (i = 0; i < 3; i++) {
		if (is_odd(i))
			sum += ops[i & 1](i);
		else
			sum += square(i);
	}
	sum += fact(3);
	for (i = 0; i < 4; i++, sum /= 10)
		msg[20 - i] = '0' + sum % 10;
	write(1, msg, strlen(msg));
	_exit(0);
}
