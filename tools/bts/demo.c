// SPDX-License-Identifier: GPL-2.0
/*
 * bts-demo: a small program whose branch trace is easy to read: a loop,
 * a conditional, direct calls, a call through a pointer, recursion.
 * It prints through write() and leaves through _exit() so that the trace
 * of main stays short (no stdio, no atexit handlers).
 *
 * bts-demo --lines prints, untraced, the source line of each function
 * main calls, as the compiler numbers it: "<function> <file> <line>".
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * noipa rather than noinline: no cloning either (fact.constprop.0 at -O2),
 * so the trace shows these calls under their own names.
 */
#define noipa __attribute__((noipa))

/*
 * A function on one line, and that line from __LINE__: every instruction
 * of the function, its entry and its return, belongs to that line, which
 * btrace_test compares with the line btrace reads from DWARF.
 */
#define ONE_LINE(name, expr)						\
	static noipa int name(int n) { return expr; }			\
	static const int name##_line = __LINE__

ONE_LINE(is_odd, n & 1);
ONE_LINE(square, n * n);
ONE_LINE(triple, 3 * n);
ONE_LINE(fact, n <= 1 ? 1 : n * fact(n - 1));

static int (*const ops[])(int) = { square, triple };

static const struct {
	const char *name;
	int line;
} lines[] = {
	{ "is_odd", is_odd_line },
	{ "square", square_line },
	{ "triple", triple_line },
	{ "fact", fact_line },
};

static void print_lines(void)
{
	const char *file = strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') + 1 :
						    __FILE__;
	size_t i;

	for (i = 0; i < sizeof(lines) / sizeof(*lines); i++)
		dprintf(1, "%s %s %d\n", lines[i].name, file, lines[i].line);
}

int main(int argc, char **argv)
{
	char msg[] = "bts-demo: result 0000\n";
	int i, sum = 0;

	if (argc > 1 && !strcmp(argv[1], "--lines")) {
		print_lines();
		return 0;
	}
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
