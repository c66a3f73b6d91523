# shellcheck shell=bash
# Sourced by the mk/ scripts that need Debian packages: apt calls that
# survive an inconsistent mirror, and private apt states that leave the
# host's package configuration as it was found.
#
# A mirror that is half way through a sync serves indexes whose size or hash
# does not match its Release file, for hours.  "apt-get update" then exits
# non-zero although every index the project needs may be fine.  So a failed
# update is a warning here; what fails is a package that cannot be installed
# or downloaded, named in the error together with apt's own words.
#
# Private states (apt_private_init) carry their own sources list, derived by
# mk/apt-sources.py from the host's configured "deb" entries (same URIs,
# suites, components and keyrings, so any mirror or proxy of the machine
# applies), their own lists, cache, preferences and dpkg status, all under
# build/.  They fetch i386 packages without a dpkg architecture and source
# packages without a deb-src entry in /etc/apt, and need no root.  The host's
# apt.conf.d is still read, so its proxy and acquire settings apply to them;
# its update hooks (APT::Update) do not run.
#
# The caller sets APT_WHO (the prefix of messages) before sourcing.
# APT_CONFIG in the environment is honoured, also across sudo (as -c):
# mk/apt-check.sh adds a broken source through it.

APT_WHO=${APT_WHO:-apt}
# Seconds to wait before the second, third, ... attempt.
APT_BACKOFF=${APT_BACKOFF:-"10 30 60"}

apt_warn() { echo "$APT_WHO: WARNING: $*" >&2; }
apt_die() { echo "$APT_WHO: ERROR: $*" >&2; exit 1; }
apt_indent() { sed "s/^/$APT_WHO:   /" >&2; }

# apt-get on the host's state, as root.
apt_root() {
	if [ "$(id -u)" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get "$@"
	else
		# sudo resets the environment: pass APT_CONFIG as -c.
		sudo DEBIAN_FRONTEND=noninteractive apt-get \
			${APT_CONFIG:+-c "$APT_CONFIG"} "$@"
	fi
}

# apt_update [-c <conf>]: refresh the host's indexes, or those of a private
# state; a failure is reported and survived.
apt_update() {
	local out run=apt_root

	[ "${1:-}" = -c ] && run=apt-get
	if out=$($run "$@" -q update 2>&1); then
		return 0
	fi
	apt_warn "apt-get update failed for some indexes; going on with what it got:"
	# apt's own error lines, or all it said when it said none (sudo refused).
	echo "$out" | grep -E '^(E|W|Err):' | apt_indent ||
		echo "$out" | apt_indent
	return 0
}

# apt_retry <what> <command...>: run the command, its output shown as it
# goes; when it fails, refresh the indexes and try again after each
# APT_BACKOFF delay.  After the last failure, name <what> (apt's output is
# just above) and end the calling shell.
apt_retry() {
	local what=$1 delay status update=(apt_update)

	shift
	# A private state's command starts "apt-get -c <conf>": refresh that state.
	[ "$1" = apt-get ] && [ "${2:-}" = -c ] && update=(apt_update -c "$3")
	for delay in $APT_BACKOFF ""; do
		status=0
		"$@" || status=$?
		[ "$status" -ne 0 ] || return 0
		[ -n "$delay" ] || break
		apt_warn "$what failed; trying again in ${delay}s"
		sleep "$delay"
		"${update[@]}"
	done
	apt_die "could not get $what (apt's output above)"
}

# apt_install <package...>: install on the host, with retries.
apt_install() {
	apt_retry "package(s) $*" apt_root install -y -q --no-install-recommends "$@"
}

# apt_private_init <dir> <deb|deb-src> [architecture] [dpkg status]: make (or
# refresh) a private apt state in <dir> whose sources are the host's "deb"
# entries as <type> entries, and update it.  Without a dpkg status file the
# state has an empty one (nothing installed).  Afterwards
# "apt-get -c <dir>/apt.conf ..." works in it without root.
apt_private_init() {
	local dir=$1 type=$2 arch=${3:-$(dpkg --print-architecture)}
	local status=${4:-$1/status}
	local top

	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	mkdir -p "$dir/sources.list.d" "$dir/preferences.d" "$dir/lists/partial" \
		"$dir/archives/partial"
	: >"$dir/sources.list"
	[ -n "${4:-}" ] || : >"$dir/status"
	python3 "$top/mk/apt-sources.py" --type "$type" --arch "$arch" \
		>"$dir/sources.list.d/host-derived.sources" ||
		apt_die "could not derive $type entries from the host's apt sources"
	# #clear: the host's lists of architectures and update hooks would
	# otherwise be added to, and the hooks run (as root) on every update.
	cat >"$dir/apt.conf" <<-EOF
	#clear APT::Architectures;
	#clear APT::Update;
	Dir::State "$dir";
	Dir::State::lists "$dir/lists";
	Dir::State::status "$status";
	Dir::State::extended_states "$dir/extended_states";
	Dir::Cache "$dir";
	Dir::Cache::archives "$dir/archives";
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	Dir::Etc::sourcelist "$dir/sources.list";
	Dir::Etc::sourceparts "$dir/sources.list.d";
	Dir::Etc::preferences "$dir/preferences";
	Dir::Etc::preferencesparts "$dir/preferences.d";
	APT::Architecture "$arch";
	APT::Architectures { "$arch"; };
	Acquire::Languages "none";
	Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
	Acquire::IndexTargets::deb-src::Contents-dsc::DefaultEnabled "false";
	EOF
	# As root, apt drops to _apt for downloads; let it write its folders.
	[ "$(id -u)" -ne 0 ] || chown -R _apt:root "$dir/lists" "$dir/archives"
	apt_update -c "$dir/apt.conf"
}

# apt_download_dir <dir>: a download folder apt's _apt sandbox can write
# (its parents must let _apt through).
apt_download_dir() {
	mkdir -p "$1"
	[ "$(id -u)" -ne 0 ] || chown _apt:root "$1"
}

# apt_fetch_i386 <state> <work> <package...>: download the i386 packages
# through the private state <state> (apt_private_init) into <work>/deb and
# unpack them all into <work>/x. Nothing is installed. The caller owns
# <work> and removes it.
apt_fetch_i386() {
	local state=$1 work=$2 deb
	shift 2

	apt_private_init "$state" deb i386
	# apt's _apt sandbox must get through to the download folder.
	chmod 755 "$work"
	apt_download_dir "$work/deb"
	(cd "$work/deb" && apt_retry "${*/%/:i386}" \
		apt-get -c "$state/apt.conf" -q download "${@/%/:i386}")
	for deb in "$work"/deb/*_i386.deb; do
		dpkg-deb -x "$deb" "$work/x"
	done
}

# apt_is_elf_i386 <file>: ELFCLASS32 (byte 4 = 1) and EM_386 (byte 18 = 3)?
apt_is_elf_i386() {
	local elf

	elf=$(od -An -tx1 -j4 -N1 "$1" | tr -d ' ')
	elf+=$(od -An -tx1 -j18 -N1 "$1" | tr -d ' ')
	[ "$elf" = 0103 ]
}
