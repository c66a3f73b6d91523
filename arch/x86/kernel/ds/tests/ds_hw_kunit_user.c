// SPDX-License-Identifier: GPL-2.0
/*
 * The user program of the hardware suite's user-mode case: a static ELF
 * executable of the kernel's own class, written into the root file system
 * for the length of the case and run on the traced CPU through a
 * usermode helper, so that the CPU stores the records of a known loop of
 * user code.
 */

#include <linux/cpumask.h>
#include <linux/elf.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/fs_struct.h>
#include <linux/initrd.h>
#include <linux/mount.h>
#include <linux/namei.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/umh.h>

#include <asm/unistd.h>

#include "ds_hw_kunit.h"

/* Where the program lives while the case runs, and where it loads. */
#define DS_HW_USER_PATH		"/ds_hw_kunit_loop"
#define DS_HW_USER_BASE		0x400000UL

/*
 * The user program's code: @loops taken jumps from the JNS to the DEC, as
 * ds_hw_loop() makes in the kernel, then exit(0). The encodings mean the
 * same in 32-bit and 64-bit mode up to the system call.
 *
 *	mov	$loops, %ecx
 * 1:	dec	%ecx
 * 2:	jns	1b
 *	mov	$__NR_exit, %eax
 *	xor	%edi, %edi		(32-bit: xor %ebx, %ebx)
 *	syscall				(32-bit: int $0x80)
 */
#define DS_HW_USER_COUNT	1
#define DS_HW_USER_DEC		5
#define DS_HW_USER_JNS		7
#define DS_HW_USER_NR		10
#define DS_HW_USER_CODE		18

struct ds_hw_user_image {
	struct elfhdr	ehdr;
	struct elf_phdr	phdr;
	u8		code[DS_HW_USER_CODE];
};

static void ds_hw_user_code(u8 *code, u32 loops)
{
	static const u8 tmpl[DS_HW_USER_CODE] = {
		0xb9, 0, 0, 0, 0,
		0xff, 0xc9,
		0x79, 0xfc,
		0xb8, 0, 0, 0, 0,
#ifdef CONFIG_X86_64
		0x31, 0xff,
		0x0f, 0x05,
#else
		0x31, 0xdb,
		0xcd, 0x80,
#endif
	};
	u32 nr = __NR_exit;

	memcpy(code, tmpl, sizeof(tmpl));
	memcpy(&code[DS_HW_USER_COUNT], &loops, sizeof(loops));
	memcpy(&code[DS_HW_USER_NR], &nr, sizeof(nr));
}

/* Where the loaded program's code starts. */
#define DS_HW_USER_TEXT	(DS_HW_USER_BASE + \
			 offsetof(struct ds_hw_user_image, code))

static void ds_hw_user_image(struct ds_hw_user_image *img, u32 loops)
{
	memset(img, 0, sizeof(*img));
	memcpy(img->ehdr.e_ident, ELFMAG, SELFMAG);
	img->ehdr.e_ident[EI_CLASS] = ELF_CLASS;
	img->ehdr.e_ident[EI_DATA] = ELF_DATA;
	img->ehdr.e_ident[EI_VERSION] = EV_CURRENT;
	img->ehdr.e_type = ET_EXEC;
	img->ehdr.e_machine = ELF_ARCH;
	img->ehdr.e_version = EV_CURRENT;
	img->ehdr.e_entry = DS_HW_USER_TEXT;
	img->ehdr.e_phoff = offsetof(struct ds_hw_user_image, phdr);
	img->ehdr.e_ehsize = sizeof(img->ehdr);
	img->ehdr.e_phentsize = sizeof(img->phdr);
	img->ehdr.e_phnum = 1;

	img->phdr.p_type = PT_LOAD;
	img->phdr.p_vaddr = DS_HW_USER_BASE;
	img->phdr.p_paddr = DS_HW_USER_BASE;
	img->phdr.p_filesz = sizeof(*img);
	img->phdr.p_memsz = sizeof(*img);
	img->phdr.p_flags = PF_R | PF_X;
	img->phdr.p_align = PAGE_SIZE;

	ds_hw_user_code(img->code, loops);
}

/**
 * ds_hw_user_unlink() - remove the user program, if it is there
 */
void ds_hw_user_unlink(void)
{
	struct path root, parent;
	struct dentry *dentry;

	/*
	 * As unlink(2) does: write access to the mount first, then the
	 * directory's lock (the order lockdep knows), and a read-only or
	 * frozen mount keeps the file. It lives in the root directory.
	 */
	get_fs_root(current->fs, &root);
	if (mnt_want_write(root.mnt))
		goto put_root;
	dentry = kern_path_locked(DS_HW_USER_PATH, &parent);
	if (IS_ERR(dentry))
		goto drop_write;
	if (d_is_positive(dentry))
		vfs_unlink(mnt_idmap(parent.mnt), d_inode(parent.dentry),
			   dentry, NULL);
	dput(dentry);
	inode_unlock(d_inode(parent.dentry));
	path_put(&parent);
drop_write:
	mnt_drop_write(root.mnt);
put_root:
	path_put(&root);
}

static void ds_hw_user_write(struct kunit *test,
			     const struct ds_hw_user_image *img)
{
	struct file *file;
	loff_t pos = 0;
	ssize_t n;

	/* A file of our own: never one that is there, nor a link's target. */
	file = filp_open(DS_HW_USER_PATH, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY,
			 0700);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(file), "%s: %ld", DS_HW_USER_PATH,
			       PTR_ERR(file));
	n = kernel_write(file, img, sizeof(*img), &pos);
	/*
	 * A kernel thread's last fput() is deferred, and exec refuses a file
	 * still open for writing: close it now, as the initramfs code does.
	 */
	fput(file);
	flush_delayed_fput();
	KUNIT_ASSERT_EQ(test, n, (ssize_t)sizeof(*img));
}

/* In the helper before its exec: the program runs on the traced CPU. */
static int ds_hw_user_pin(struct subprocess_info *info, struct cred *new)
{
	int *cpu = info->data;

	return set_cpus_allowed_ptr(current, cpumask_of(*cpu));
}

/**
 * ds_hw_run_user() - run the user program on a CPU
 * @test:  the test
 * @cpu:   where it runs
 * @loops: taken jumps it makes
 * @from:  filled in: the user address of its jump
 * @to:    filled in: the jump's target
 */
void ds_hw_run_user(struct kunit *test, int cpu, u32 loops, u64 *from, u64 *to)
{
	struct subprocess_info *info;
	struct ds_hw_user_image *img;
	char *argv[2], *envp[1];
	int ret;

	img = kunit_kzalloc(test, sizeof(*img), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, img);
	ds_hw_user_image(img, loops);
	ds_hw_user_write(test, img);

	/* Helpers run once the initramfs is in; KUnit may run before. */
	wait_for_initramfs();
	argv[0] = DS_HW_USER_PATH;
	argv[1] = NULL;
	envp[0] = NULL;
	info = call_usermodehelper_setup(DS_HW_USER_PATH, argv, envp,
					 GFP_KERNEL, ds_hw_user_pin, NULL,
					 &cpu);
	KUNIT_ASSERT_NOT_NULL(test, info);
	ret = call_usermodehelper_exec(info, UMH_WAIT_PROC);
	ds_hw_user_unlink();
	KUNIT_ASSERT_EQ_MSG(test, ret, 0, "%s", DS_HW_USER_PATH);

	*from = DS_HW_USER_TEXT + DS_HW_USER_JNS;
	*to = DS_HW_USER_TEXT + DS_HW_USER_DEC;
}
