#!/bin/bash
# Build the test VM's initramfs: busybox-static, vm/init, the installed
# kselftests and any extra static binaries given as arguments (put in
# /usr/bin).  Usage: initramfs.sh <output.cpio.gz> <kselftest install dir> [bin...]
# LIST names the file of kselftests (collection:test, one a line) that
# run_kselftest.sh runs by default in the VM (make shell); PROGS (the same,
# comma-separated) leaves every other kselftest out; BUSYBOX (default
# /bin/busybox) makes the i386 variant; KEXEC_KERNEL puts that bzImage in
# /boot, with an initramfs of busybox and vm/init alone to kexec it with;
# KMODULES (.ko files, space-separated) go to /lib/modules; LIBS (files,
# space-separated) go to the same path in the initramfs, symbolic links
# resolved: the C libraries of the dynamically linked test programs;
# ROOTS (directories, space-separated) are copied in whole, as trees rooted
# at / (gdb's, mk/gdb.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$1 ksft=$2
shift 2

root=$(mktemp -d "${out%/*}/initramfs.XXXXXX")
# mktemp makes it 0700: / must be searchable by the unprivileged users the
# tests drop to (ptrace_bts_hostile execs itself as uid 4242).
chmod 755 "$root"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,root,etc}
cp "${BUSYBOX:-/bin/busybox}" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
install -m 755 "$top/vm/init" "$root/init"

# kselftest/runner.sh calls "/usr/bin/timeout --foreground"; busybox's
# timeout has no --foreground (the tests run in the foreground anyway).
cat > "$root/usr/bin/timeout" <<'EOS'
#!/bin/sh
[ "$1" = --foreground ] && shift
exec /bin/busybox timeout "$@"
EOS
chmod 755 "$root/usr/bin/timeout"

if [ -n "${PROGS:-}" ]; then
	# Only what the run boots with: the runner, and of each collection
	# the programs PROGS names (collection:program, comma-separated) and
	# the collection's settings. Every boot unpacks the initramfs under
	# TCG; all of the selftests are 28 MB gzipped.
	mkdir -p "$root/kselftest"
	cp -a "$ksft/run_kselftest.sh" "$ksft/kselftest" "$root/kselftest/"
	for prog in ${PROGS//,/ }; do
		col=${prog%%:*}
		[ -e "$ksft/$col/${prog#*:}" ] ||
			{ echo "initramfs: no program $prog in $ksft" >&2; exit 1; }
		mkdir -p "$root/kselftest/$col"
		cp -a "$ksft/$col/${prog#*:}" "$root/kselftest/$col/"
		# A 64-bit test may run its 32-bit twin as a tracee
		# (ptrace_bts_lifecycle_64's tracee_32bit): it comes along.
		twin=$ksft/$col/${prog#*:}
		twin=${twin%_64}_32
		[ "$prog" = "${prog%_64}" ] || [ ! -e "$twin" ] ||
			cp -a "$twin" "$root/kselftest/$col/"
		[ ! -e "$ksft/$col/settings" ] || cp -a "$ksft/$col/settings" "$root/kselftest/$col/"
		# What the program needs beside it, as kselftest's TEST_FILES:
		# <program>.files names them (the gdb collection's programs).
		files=$ksft/$col/${prog#*:}.files
		if [ -e "$files" ]; then
			while read -r f; do
				cp -a "$ksft/$col/$f" "$root/kselftest/$col/"
			done <"$files"
		fi
	done
	# The runner's list is PROGS itself: it may name tests that their
	# collection leaves out of its default list (TEST_GEN_PROGS_EXTENDED,
	# such as x86's ptrace_bts_suspend_64, which suspends the machine).
	tr , '\n' <<<"$PROGS" >"$root/kselftest/kselftest-list.txt"
else
	cp -a "$ksft" "$root/kselftest"
fi
# Empty when ONLY= leaves this VM nothing to run: it is then not booted.
grep -v '^#' "$LIST" | grep . > "$root/kselftest/tests.list" || true
for bin in "$@"; do
	install -m 755 "$bin" "$root/usr/bin/"
done
for ko in ${KMODULES:-}; do
	install -D -m 644 "$ko" "$root/lib/modules/${ko##*/}"
done
for lib in ${LIBS:-}; do
	mkdir -p "$root${lib%/*}"
	cp -L "$lib" "$root$lib"
done
for tree in ${ROOTS:-}; do
	cp -a "$tree/." "$root/"
done

if [ -n "${KEXEC_KERNEL:-}" ]; then
	mkdir -p "$root/boot"
	cp "$KEXEC_KERNEL" "$root/boot/bzImage"
	inner=$(mktemp -d "${out%/*}/initramfs-kexec.XXXXXX")
	trap 'rm -rf "$root" "$inner"' EXIT
	chmod 755 "$inner"
	mkdir -p "$inner"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,root,etc}
	cp "$root/bin/busybox" "$inner/bin/busybox"
	ln -s busybox "$inner/bin/sh"
	install -m 755 "$top/vm/init" "$inner/init"
	(cd "$inner" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
		gzip -1 > "$root/boot/initrd.gz"
fi

(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"
