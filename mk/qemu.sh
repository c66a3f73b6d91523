#!/bin/bash
# Build the BTS machine model: Debian's QEMU 7.2 at a pinned version, with the
# patches listed in vm/qemu/patches/series applied with zero fuzz.
#
# Output: $BUILD/qemu/qemu-system-x86_64 (x86_64-softmmu, TCG only).
# Run it with: -L /usr/share/qemu -L /usr/share/seabios -nic none (the -L are
# optional: the binary searches Debian's firmware directories itself).
#
# Cached: a stamp holds a hash of the pin and of every file under
# vm/qemu/patches/ (and of the configure arguments).  When it matches and the
# binary exists, nothing is done.  When it differs, the source is unpacked
# afresh and the patches re-applied; ninja then rebuilds only what changed.
#
# FORCE=1 rebuilds even when the stamp matches.  QEMU_FETCH_ONLY=1 stops once
# the source package is downloaded (mk/apt-check.sh); that needs no root.
# QEMU_PREPARE_ONLY=1 stops once the tree is patched and the build's
# packages are installed: make test does that beside the first kernel build
# and the build itself later.
set -euo pipefail

QEMU_PACKAGE=qemu
QEMU_VERSION=1:7.2+dfsg-7+deb12u18

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
patchdir=$top/vm/qemu/patches
work=$build/qemu-src          # apt-get source downloads here
src=$work/tree                # the patched source tree
obj=$work/obj                 # meson build directory (survives re-patching)
out=$build/qemu
stamp=$out/stamp

apt_state=$build/apt/source

APT_WHO=qemu
. "$top/mk/apt.sh"
. "$top/mk/srcpkg.sh"

log() { echo "qemu: $*"; }
die() { echo "qemu: ERROR: $*" >&2; exit 1; }

# --- cache check ------------------------------------------------------------
want_stamp() {
	{
		echo "pin $QEMU_PACKAGE=$QEMU_VERSION"
		echo "configure $(configure_args)"
		(cd "$patchdir" && find . -type f | LC_ALL=C sort | xargs sha256sum)
	} | sha256sum | cut -d' ' -f1
}

# One argument a line: --cc's value has a space. No trace backend: the
# default one ("log") writes the absolute path of each trace-events file
# into #line directives of the generated trace headers, which most objects
# include, so that ccache missed them all in another clone; the model uses
# no trace points.
configure_args() {
	# ccache, where there is one (make deps installs it): meson adds it
	# only to a compiler it finds itself, and configure names gcc.
	command -v ccache >/dev/null && echo --cc="ccache gcc"
	printf '%s\n' --target-list=x86_64-softmmu --without-default-features --enable-tcg \
		--enable-fdt=system --disable-docs --disable-werror \
		--enable-trace-backends=nop \
		--with-devices-x86_64=bts-model \
		--disable-install-blobs \
		--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
}

if [ -z "${FORCE:-}" ] && [ -x "$out/qemu-system-x86_64" ] && [ -f "$stamp" ] &&
	[ "$(cat "$stamp")" = "$(want_stamp)" ]; then
	log "up to date ($out/qemu-system-x86_64)"
	exit 0
fi

# --- fetch ------------------------------------------------------------------
srcpkg_fetch "$QEMU_PACKAGE" "$QEMU_VERSION" "$work" "$apt_state"
[ -z "${QEMU_FETCH_ONLY:-}" ] || { log "fetched into $work"; exit 0; }

# --- host packages ----------------------------------------------------------
packages=(ninja-build meson libglib2.0-dev libpixman-1-dev libfdt-dev
	python3-venv dpkg-dev gcc make pkg-config patch rsync
	# the firmware the result runs with
	qemu-system-data seabios)
srcpkg_need "${packages[@]}"

# --- unpack + patch -----------------------------------------------------------
srcpkg_prepare "$QEMU_PACKAGE" "$QEMU_VERSION" "$work" "$src" "$patchdir" "$(want_stamp)"
[ -z "${QEMU_PREPARE_ONLY:-}" ] || { log "patched tree in $src"; exit 0; }

# --- configure + build --------------------------------------------------------
# Configure once per build directory (the arguments are part of the stamp; a
# change of them wipes it).  Later meson.build changes are picked up by
# ninja's own regeneration rule.
mkdir -p "$out"
args_now="$(configure_args)"
if [ ! -f "$obj/build.ninja" ] || [ "$(cat "$obj/.configure-args" 2>/dev/null)" != "$args_now" ]; then
	rm -rf "$obj"
	mkdir -p "$obj"
	log "configuring"
	mapfile -t args <<<"$args_now"
	(cd "$obj" && flock /tmp/kbuild.lock "$src/configure" "${args[@]}" \
		>"$work/configure.log" 2>&1) ||
		{ tail -40 "$work/configure.log"; die "configure failed (see $work/configure.log)"; }
	echo "$args_now" >"$obj/.configure-args"
fi
log "building qemu-system-x86_64 (under flock /tmp/kbuild.lock)"
t0=$(date +%s)
flock /tmp/kbuild.lock bash -c 'date +%s >"$1"; exec ninja -C "$2" qemu-system-x86_64' \
	_ "$work/lock-time" "$obj" >"$work/build.log" 2>&1 ||
	{ grep -E -A5 'error|FAILED' "$work/build.log" | head -60
	  die "build failed (see $work/build.log)"; }
t1=$(cat "$work/lock-time")
log "built in $(( $(date +%s) - t1 ))s (waited $(( t1 - t0 ))s for the lock)"

cp -f "$obj/qemu-system-x86_64" "$out/qemu-system-x86_64.new"
mv -f "$out/qemu-system-x86_64.new" "$out/qemu-system-x86_64"
want_stamp >"$stamp"
log "ok: $out/qemu-system-x86_64"
