/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the hardware suite's files share.
 */
#ifndef _X86_KERNEL_DS_TESTS_DS_HW_KUNIT_H
#define _X86_KERNEL_DS_TESTS_DS_HW_KUNIT_H

#include <kunit/test.h>
#include <linux/types.h>

void ds_hw_user_unlink(void);
void ds_hw_run_user(struct kunit *test, int cpu, u32 loops, u64 *from, u64 *to);

#endif /* _X86_KERNEL_DS_TESTS_DS_HW_KUNIT_H */
