# shellcheck shell=bash
# A Debian source package patched by this project (mk/qemu.sh, mk/gdb.sh):
# fetched through a private apt state, unpacked, our patches applied with
# zero fuzz. Source it after mk/apt.sh (APT_WHO names the caller in its
# messages).

srcpkg_log() { echo "$APT_WHO: $*"; }

# srcpkg_fetch <package> <version> <work> <apt state>: download the source
# package into <work>, unless its .dsc is there already. apt-get source
# needs deb-src entries: the private state's are the twins of the host's
# deb entries (mk/apt.sh), so nothing is added to /etc/apt.
srcpkg_fetch() {
	local pkg=$1 ver=$2 work=$3 state=$4

	mkdir -p "$work"
	ls "$work/${pkg}_${ver#*:}.dsc" >/dev/null 2>&1 && return 0
	srcpkg_log "fetching $pkg=$ver through a private apt state ($state)"
	apt_private_init "$state" deb-src
	apt_download_dir "$work/download"
	(cd "$work/download" && apt_retry "source package $pkg=$ver (pin gone from the archive?)" \
		apt-get -c "$state/apt.conf" -q source --download-only "$pkg=$ver")
	# The .dsc last: its presence says the download is complete.
	mv -f "$work"/download/*.tar.* "$work/"
	mv -f "$work"/download/*.dsc "$work/"
	rm -rf "$work/download"
}

# srcpkg_need <package>...: install those of the host packages not installed.
srcpkg_need() {
	local p missing=()

	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	srcpkg_log "installing ${missing[*]}"
	apt_update
	apt_install "${missing[@]}"
}

# srcpkg_prepare <package> <version> <work> <tree> <patch dir> <stamp>:
# unpack the source afresh (dpkg-source applies Debian's own patches),
# apply those of <patch dir>/series, and sync the result into <tree> with
# checksums, so that only files whose content changed get a new mtime and
# the build recompiles just those. Nothing is done while <work>/prepared
# holds <stamp>.
srcpkg_prepare() {
	local pkg=$1 ver=$2 work=$3 tree=$4 patchdir=$5 stamp=$6
	local prepared=$work/prepared fresh=$work/fresh p txt

	if [ -d "$tree" ] && [ "$(cat "$prepared" 2>/dev/null)" = "$stamp" ]; then
		srcpkg_log "patched tree in $tree is up to date"
		return 0
	fi
	rm -f "$prepared"
	srcpkg_log "unpacking"
	rm -rf "$fresh"
	(cd "$work" && dpkg-source -q -x "${pkg}_${ver#*:}.dsc" "$(basename "$fresh")" \
		>"$work/dpkg-source.log" 2>&1) ||
		{ cat "$work/dpkg-source.log"; apt_die "dpkg-source -x failed"; }

	[ -f "$patchdir/series" ] || apt_die "no $patchdir/series"
	while read -r p; do
		p=${p%%#*}
		p=$(echo "$p" | xargs)
		[ -n "$p" ] || continue
		[ -f "$patchdir/$p" ] || apt_die "series names $p, which is not in $patchdir"
		if ! txt=$(cd "$fresh" && patch -p1 -F0 -N --no-backup-if-mismatch -r - \
			<"$patchdir/$p" 2>&1); then
			echo "$txt" | apt_indent
			apt_die "patch $p does not apply with zero fuzz; rejected hunks are listed above"
		fi
		echo "$txt" | grep -iE 'offset|fuzz' | apt_indent || true
		srcpkg_log "applied $p"
	done <"$patchdir/series"

	mkdir -p "$tree"
	rsync -rlc --delete "$fresh/" "$tree/"
	rm -rf "$fresh"
	echo "$stamp" >"$prepared"
}
