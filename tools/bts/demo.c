// SPDX-License-Identifier: GPL-2.0
/*
 * bts-demo: a small program whose branch trace is easy to read: a loop,
 * a conditional, direct calls, a call through a pointer, recursion.
 * It prints through write() and leaves through _exit() so that the trace
 * of main stays short (no stdio, no atexit handlers).
 */
#include <string.h>
#include <unistd.h>

/*
 * noipa rather than noinline: no cloning either (fact.constprop.0 at -O2),
 * so the trace shows these calls under their own names.
 */
#define noipa __attribute__((noipa))

static noipa int is_odd(int n)
{
	return n & 1;
}

static noipa int square(int n)
{
	return n * n;
}

static noipa int triple(int n)
{
	return 3 * n;
}

static int (*const ops[])(int) = { square, triple };

static noipa int fact(int n)
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
