// SPDX-License-Identifier: GPL-2.0
/*
 * A crash through a corrupted function pointer: the stack is of no help
 * (the call went to address 0), the call history shows how it got there.
 */
struct ops {
	void (*handler)(int);
};

static volatile int sink;

static void good_handler(int x)
{
	sink = x;
}

static struct ops table[2] = { { good_handler }, { good_handler } };

static void corrupt(int i)
{
	table[i].handler = 0;
}

static void dispatch(int i)
{
	table[i].handler(i);
}

int main(void)
{
	dispatch(0);
	corrupt(1);
	dispatch(0);
	dispatch(1);
	return 0;
}
