#!/bin/bash
# Build gdb with PTRACE_BTS: Debian's gdb 13 at a pinned version, with the
# patches listed in vm/gdb/patches/series applied with zero fuzz.
#
# Output: $BUILD/gdb/root, an install tree (usr/bin/gdb, usr/bin/gdbserver,
# usr/share/gdb) for prefix /usr, and $BUILD/gdb/vmroot, the same with the
# shared libraries gdb and gdbserver load and the Python standard library
# they run with, taken from this machine, which mk/initramfs.sh copies into
# the VM.
# Only the native x86-64 GNU/Linux debugger and gdbserver are built, with
# Python and expat (XML target descriptions), without the simulators,
# binutils, TUI, debuginfod, libipt, guile, source highlighting or docs.
#
# Cached: a stamp holds a hash of the pin, the configure arguments and
# every file under vm/gdb/patches/.  When it matches and the install tree
# exists, nothing is done.  Otherwise the source is unpacked afresh, the
# patches applied and the tree synced (rsync -c) into the one the build
# uses, so that make recompiles only what changed; ccache serves the rest.
#
# FORCE=1 rebuilds even when the stamp matches.  GDB_FETCH_ONLY=1 stops once
# the source package is downloaded.  GDB_PREPARE_ONLY=1 stops once the tree
# is patched and the build's packages are installed.
set -euo pipefail

GDB_PACKAGE=gdb
GDB_VERSION=13.1-3

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
patchdir=$top/vm/gdb/patches
work=$build/gdb-src           # apt-get source downloads here
src=$work/tree                # the patched source tree
obj=$work/obj                 # the build directory (survives re-patching)
out=$build/gdb
stamp=$out/stamp

apt_state=$build/apt/source

APT_WHO=gdb
. "$top/mk/apt.sh"
. "$top/mk/srcpkg.sh"

log() { echo "gdb: $*"; }
die() { echo "gdb: ERROR: $*" >&2; exit 1; }

# One argument a line.  gdb_cv_var_elf etc. are left to configure.
configure_args() {
	printf '%s\n' --prefix=/usr --disable-nls --disable-werror \
		--disable-sim --disable-gprofng --disable-ld --disable-gas \
		--disable-binutils --disable-gold --disable-gprof --disable-libctf \
		--disable-tui --disable-source-highlight --with-python=/usr/bin/python3 \
		--with-expat --without-guile --without-debuginfod --without-babeltrace \
		--without-libipt --without-intel-pt --without-xxhash --without-lzma \
		--without-zstd --without-mpfr
}

want_stamp() {
	{
		echo "pin $GDB_PACKAGE=$GDB_VERSION"
		echo "configure $(configure_args)"
		(cd "$patchdir" && find . -type f | LC_ALL=C sort | xargs sha256sum)
	} | sha256sum | cut -d' ' -f1
}

if [ -z "${FORCE:-}" ] && [ -x "$out/root/usr/bin/gdb" ] && [ -f "$stamp" ] &&
	[ "$(cat "$stamp")" = "$(want_stamp)" ]; then
	log "up to date ($out/root)"
	exit 0
fi

# --- fetch ------------------------------------------------------------------
srcpkg_fetch "$GDB_PACKAGE" "$GDB_VERSION" "$work" "$apt_state"
[ -z "${GDB_FETCH_ONLY:-}" ] || { log "fetched into $work"; exit 0; }

# --- host packages ----------------------------------------------------------
packages=(dpkg-dev gcc g++ make pkg-config patch rsync
	libgmp-dev libexpat1-dev libncurses-dev python3-dev)
srcpkg_need "${packages[@]}"

# --- unpack + patch -----------------------------------------------------------
srcpkg_prepare "$GDB_PACKAGE" "$GDB_VERSION" "$work" "$src" "$patchdir" "$(want_stamp)"
[ -z "${GDB_PREPARE_ONLY:-}" ] || { log "patched tree in $src"; exit 0; }

# --- configure + build --------------------------------------------------------
# The manual is not in Debian's source (GFDL): MAKEINFO=true builds none.
cc=gcc cxx=g++
if command -v ccache >/dev/null; then
	cc="ccache gcc" cxx="ccache g++"
fi
args_now="$(configure_args)"
if [ ! -f "$obj/Makefile" ] || [ "$(cat "$obj/.configure-args" 2>/dev/null)" != "$args_now" ]; then
	rm -rf "$obj"
	mkdir -p "$obj"
	log "configuring"
	mapfile -t args <<<"$args_now"
	(cd "$obj" && CC=$cc CXX=$cxx CFLAGS="-O2 -g0" CXXFLAGS="-O2 -g0" \
		"$src/configure" "${args[@]}" >"$work/configure.log" 2>&1) ||
		{ tail -40 "$work/configure.log"; die "configure failed (see $work/configure.log)"; }
	echo "$args_now" >"$obj/.configure-args"
fi
log "building gdb and gdbserver (under flock /tmp/kbuild.lock)"
t0=$(date +%s)
flock /tmp/kbuild.lock bash -c 'date +%s >"$1"; exec make -C "$2" -j2 MAKEINFO=true all-gdb all-gdbserver' \
	_ "$work/lock-time" "$obj" >"$work/build.log" 2>&1 ||
	{ grep -E -B2 -A5 'error|Error' "$work/build.log" | head -60
	  die "build failed (see $work/build.log)"; }
t1=$(cat "$work/lock-time")
log "built in $(( $(date +%s) - t1 ))s (waited $(( t1 - t0 ))s for the lock)"

rm -rf "$out/root.new"
mkdir -p "$out"
make -C "$obj" -s MAKEINFO=true DESTDIR="$out/root.new" install-gdb install-gdbserver \
	>"$work/install.log" 2>&1 || { tail -20 "$work/install.log"; die "install failed"; }
rm -rf "$out/root"
mv "$out/root.new" "$out/root"

# --- the VM's tree ------------------------------------------------------------
# Libraries at the paths ldd finds them (links resolved), libthread_db for
# threads of static programs (dlopen()ed, so not in ldd's list), and the
# standard library without what gdb's Python never imports (tests, GUIs,
# packaging, networking, the optimized bytecode).
vm=$out/vmroot.new
rm -rf "$vm"
mkdir -p "$vm"
cp -a "$out/root/." "$vm/"
for lib in $(ldd "$out/root/usr/bin/gdb" "$out/root/usr/bin/gdbserver" |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | sort -u) \
	/lib/x86_64-linux-gnu/libthread_db.so.1; do
	mkdir -p "$vm${lib%/*}"
	cp -L "$lib" "$vm$lib"
done
py=$(python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
mkdir -p "$vm/usr/lib/$py"
tar -C "/usr/lib/$py" -cf - --exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' \
	--exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
	--exclude=./lib2to3 --exclude=./ensurepip --exclude=./pydoc_data \
	--exclude=./distutils --exclude=./site-packages --exclude=./venv \
	--exclude="./config-*" --exclude=./unittest --exclude=./sqlite3 --exclude=./email \
	--exclude=./xmlrpc --exclude=./asyncio --exclude=./multiprocessing \
	--exclude=./curses --exclude=./dbm --exclude=./wsgiref --exclude=./http \
	--exclude=./urllib . | tar -C "$vm/usr/lib/$py" -xf -
rm -rf "$out/vmroot"
mv "$vm" "$out/vmroot"
want_stamp >"$stamp"
log "ok: $out/root/usr/bin/gdb, $out/vmroot"
