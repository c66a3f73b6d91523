// SPDX-License-Identifier: GPL-2.0
/*
 * A program whose branches gdb's sessions know: built -O0, static and not
 * position independent, so that its call history is the same on every
 * path. No C library calls between the breakpoints "record" and
 * "stop": gdb's "record full", the oracle for the replayed PCs, cannot
 * step every instruction the C library has.
 */
static volatile int sink;

static int square(int x)
{
	return x * x;			/* L_square */
}

static int sum_squares(int n)
{
	int i, s = 0;

	for (i = 0; i < n; i++)
		s += square(i);		/* L_loop */
	return s;
}

static void record_here(void)
{
}

static void stop_here(void)
{
}

int main(void)
{
	record_here();
	sink = sum_squares(3);		/* L_call */
	sink += square(sink);		/* L_after */
	stop_here();
	return 0;
}
