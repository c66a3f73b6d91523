#!/bin/bash
# make gdb-check: gdb's own gdb.btrace tests (and gdb.python/py-record-btrace*)
# against the PTRACE_BTS source, in the VM, with a Debian userspace.
#
#   gdb-check.sh <bzImage> <machine>...     machine: tcg (stock QEMU, -cpu
#                                           max: the emulated backend) or bts
#                                           (the model: the hardware backend)
#
# GDB_CHECK_TAP=<file> also writes the results of the (one) machine as TAP
# for make test: each gdb.sum result a case (PASS ok, any other not ok),
# then that gdb recorded through PTRACE_BTS, and that the kernel printed no
# warning, oops or lockdep report.
# GDB_CHECK_TESTS (runtest's test names, such as gdb.btrace/segv.exp) runs
# those only; GDB_CHECK_EXTRA, a shell command, runs in the guest after
# them (its output is on the console); GDB_CHECK_APPEND adds to the kernel
# command line.
#
# The userspace: the packages the tests need (gcc, g++, binutils, libc6-dev,
# dejagnu, expect, bash, coreutils, ...) and what gdb runs with, downloaded
# through a private apt state (mk/apt.sh) and unpacked into a root that
# boots as the initramfs, with gdb and gdbserver (mk/gdb.sh), and the
# testsuite's sources and its site.exp under /gdb-check.
# Nothing is installed on the host.
#
# Output: build/gdb-check/<machine>/gdb.sum and gdb.log, and a summary per
# machine: the counts of gdb.sum's PASS, FAIL, UNSUPPORTED, ... lines.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
kernel=$1
shift
out=${GDB_CHECK_OUT:-$build/gdb-check}
state=$build/apt/gdb-check
root=$out/root
src=$build/gdb-src/tree
obj=$build/gdb-src/obj

APT_WHO=gdb-check
. "$top/mk/apt.sh"

log() { echo "gdb-check: $*"; }
die() { echo "gdb-check: ERROR: $*" >&2; exit 1; }

[ -x "$obj/gdb/gdb" ] && [ -d "$build/gdb/root" ] || die "no gdb build: make gdb"

# Essential packages are named: nothing depends on them.
packages=(bash coreutils dash sed grep gawk findutils diffutils util-linux
	procps gcc g++ binutils libc6-dev make dejagnu expect tcl
	libexpat1 libgmp10 libpython3.11 libtinfo6 zlib1g libstdc++6
	python3.11-minimal libpython3.11-stdlib)

stamp=$({ printf '%s\n' "${packages[@]}"; echo pruned; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/userspace.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -d "$out/userspace" ]; then
	log "downloading the userspace through a private apt state ($state)"
	rm -rf "$out/userspace" "$out/debs"
	mkdir -p "$out/debs"
	apt_private_init "$state" deb
	chmod 755 "$out" "$out/debs"
	apt_download_dir "$out/debs"
	# With an empty dpkg status, the whole dependency closure comes.
	apt_retry "the gdb-check userspace" apt-get -c "$state/apt.conf" -q -y \
		-o Dir::Cache::archives="$out/debs" -o Debug::NoLocking=1 \
		install --download-only --no-install-recommends "${packages[@]}"
	log "unpacking $(ls "$out"/debs/*.deb | wc -l) packages"
	mkdir -p "$out/userspace/usr/bin" "$out/userspace/usr/lib" \
		"$out/userspace/usr/lib64" "$out/userspace/usr/sbin"
	# Debian 12's merged /usr: the links debootstrap makes.
	for d in bin lib lib64 sbin; do ln -s "usr/$d" "$out/userspace/$d"; done
	for deb in "$out"/debs/*.deb; do
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x --keep-directory-symlink -C "$out/userspace"
	done
	# What maintainer scripts and alternatives would have made.
	ln -sf dash "$out/userspace/usr/bin/sh"
	ln -sf gcc "$out/userspace/usr/bin/cc"
	ln -sf tclsh8.6 "$out/userspace/usr/bin/tclsh"
	rm -rf "$out/debs"
	# Every boot unpacks the root under TCG: no documentation, man pages,
	# translations, time zones or Perl modules (nothing the tests run).
	rm -rf "$out"/userspace/usr/share/{doc,man,info,locale,zoneinfo,perl,bash-completion}
	echo "$stamp" >"$out/userspace.stamp"
fi

# --- the root: userspace, gdb, the testsuite, init ---------------------------
log "assembling the root"
rm -rf "$root"
mkdir -p "$root"
cp -a "$out/userspace/." "$root/"
cp -a "$build/gdb/root/usr/." "$root/usr/"
cp /bin/busybox "$root/usr/bin/busybox"
# The testsuite under /gdb-check (the build's paths may be under /tmp, a
# tmpfs in the guest): its library and the tests, and what they take from
# other directories (gdb.xml's target descriptions); site.exp from the
# build's configured testsuite, its paths moved there.
gsrc=/gdb-check/src/gdb/testsuite
gobj=/gdb-check/obj/gdb/testsuite
mkdir -p "$root$gsrc/gdb.python" "$root$gobj"
for d in lib config boards gdb.btrace gdb.xml; do
	cp -a "$src/gdb/testsuite/$d" "$root$gsrc/"
done
cp -a "$src/gdb/testsuite/gdb.python/"py-record-btrace* "$root$gsrc/gdb.python/"
make -s -C "$obj/gdb/testsuite" site.exp >/dev/null
sed "s|$src/gdb/testsuite|$gsrc|g; s|$obj/gdb/testsuite|$gobj|g" \
	"$obj/gdb/testsuite/site.exp" >"$root$gobj/site.exp"
grep -q "^set srcdir $gsrc\$" "$root$gobj/site.exp" || die "site.exp names no srcdir $gsrc"
ldconfig -r "$root" 2>/dev/null || true
mkdir -p "$root/etc" "$root/root"
echo "root:x:0:0:root:/root:/bin/bash" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

cat >"$root/init" <<EOF
#!/bin/bash
# gdb-check's guest: run the tests, copy the results to ttyS1, power off.
export PATH=/usr/bin:/usr/sbin HOME=/root USER=root LOGNAME=root
busybox mount -t proc proc /proc
busybox mount -t sysfs sys /sys
busybox mount -t devtmpfs dev /dev
busybox mkdir -p /dev/pts && busybox mount -t devpts devpts /dev/pts
busybox mount -t tmpfs tmp /tmp
ulimit -l unlimited
cd $gobj
echo "gdb-check: \$(grep -o 'ds.force_emulation=[01]' /proc/cmdline) running"
# "auto" is the source: perf has no BTS event on either machine (an AMD
# CPU; a CPU without a PMU), so gdb records through PTRACE_BTS, which the
# info record below shows.
runtest --tool gdb --outdir $gobj \\
	GDB=/usr/bin/gdb GDBSERVER=/usr/bin/gdbserver \\
	GDB_DATA_DIRECTORY=/usr/share/gdb \\
	${GDB_CHECK_TESTS:-gdb.btrace/*.exp gdb.python/py-record-btrace*.exp} 2>&1 | tail -40
${GDB_CHECK_EXTRA:-}
prog=\$(ls outputs/gdb.btrace/record_goto/record_goto 2>/dev/null)
[ -z "\$prog" ] || gdb -nx -batch -ex 'break main' -ex run -ex 'record btrace bts' \\
	-ex 'info record' "\$prog" 2>&1 | grep -E '^(Source|Recording)' | sed 's/^/gdb-check: /'
{ echo "==== gdb.sum"; cat gdb.sum; echo "==== gdb.log"; cat gdb.log; echo "==== end"; } >/dev/ttyS1
busybox poweroff -f
EOF
chmod 755 "$root/init"
mkdir -p "$root"/{proc,sys,dev,tmp}

log "packing the initramfs ($(du -sh "$root" | cut -f1))"
(cd "$root" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 >"$out/root.cpio.gz"

# write_tap <machine's dir>: gdb.sum's results, the source, a clean console.
write_tap() {
	local dir=$1 n=0 splat

	{
		if ! grep -q '^# of ' "$dir/gdb.sum"; then
			echo "not ok - gdb.sum has results # see $dir/console.log"
		fi
		grep -E '^(PASS|FAIL|XPASS|KPASS|XFAIL|KFAIL|UNRESOLVED|UNSUPPORTED|UNTESTED|ERROR): ' \
			"$dir/gdb.sum" | while IFS= read -r line; do
			case $line in
			PASS:*) echo "ok - $line" ;;
			*) echo "not ok - $line" ;;
			esac
		done
		if grep -q '^gdb-check: Source: ptrace,' "$dir/console.log"; then
			echo "ok - gdb recorded through PTRACE_BTS"
		else
			echo "not ok - gdb recorded through PTRACE_BTS"
		fi
		splat=$(grep -m1 -E 'WARNING:|BUG:|Oops|general protection|Call Trace:|possible circular locking|KASAN:' \
			"$dir/console.log" || true)
		if [ -z "$splat" ]; then
			echo "ok - the kernel log is clean"
		else
			echo "not ok - the kernel log is clean # $splat"
		fi
	} | awk '{ sub(/^(not )?ok/, "& " NR); print } END { print "1.." NR }'
}

# --- the runs -----------------------------------------------------------------------
status=0
for machine in "$@"; do
	case $machine in
	tcg) qemu=qemu-system-x86_64 cpu=max ;;
	bts) qemu=$build/qemu/qemu-system-x86_64
	     cpu="Skylake-Client,-pcid,-x2apic,-tsc-deadline,-hle,-rtm,-invpcid,-rdseed,-3dnowprefetch,-xsavec,bts=on" ;;
	*) die "unknown machine $machine" ;;
	esac
	mkdir -p "$out/$machine"
	log "$machine: booting (TCG; the log is $out/$machine/console.log)"
	t0=$(date +%s)
	timeout --foreground -k 10 "${GDB_CHECK_TIMEOUT:-${VM_TIMEOUT:-5400}}" "$qemu" -accel tcg -cpu "$cpu" \
		-smp 2 -m 3072 -no-reboot -display none -nic none -monitor none \
		-kernel "$kernel" -initrd "$out/root.cpio.gz" \
		-append "console=ttyS0 panic=-1 clearcpuid=smap nowatchdog rdinit=/init kunit.enable=0 ${GDB_CHECK_APPEND:-}" \
		-serial "file:$out/$machine/console.log" -serial "file:$out/$machine/results.log" \
		</dev/null || status=$?
	sed -n '/^==== gdb.sum/,/^==== gdb.log/p' "$out/$machine/results.log" |
		sed '1d;$d' >"$out/$machine/gdb.sum"
	sed -n '/^==== gdb.log/,/^==== end/p' "$out/$machine/results.log" |
		sed '1d;$d' >"$out/$machine/gdb.log"
	log "$machine: $(( $(date +%s) - t0 )) s"
	[ -z "${GDB_CHECK_TAP:-}" ] || write_tap "$out/$machine" >"$GDB_CHECK_TAP"
	if ! grep -q '^# of ' "$out/$machine/gdb.sum"; then
		log "$machine: no results (see $out/$machine/console.log)"
		status=1
		continue
	fi
	grep '^# of ' "$out/$machine/gdb.sum" | sed "s/^/gdb-check: $machine: /"
	grep -E '^(FAIL|UNRESOLVED|ERROR|UNSUPPORTED|KFAIL|XFAIL):' "$out/$machine/gdb.sum" |
		sed "s/^/gdb-check: $machine:   /" || true
done
exit $status
