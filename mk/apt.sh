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
# applies), their own lists, cache and an empty dpkg status, all under
# build/.  They fetch i386 packages without a dpkg architecture and source
# packages without a deb-src entry in /etc/apt.  The host's apt.conf.d is
# still read, so its proxy and acquire settings apply to them too.
#
# The caller sets APT_WHO (the prefix of messages) before sourcing.
# APT_CONFIG in the environment is honoured everywhere, also under sudo:
# mk/apt-check.sh adds a broken source through it.

APT_WHO=${APT_WHO:-apt}
# Seconds to wait before the second, third, ... attempt.
APT_BACKOFF=${APT_BACKOFF:-"10 30 60"}

apt_sudo=
[ "$(id -u)" -eq 0 ] || apt_sudo=sudo

apt_warn() { echo "$APT_WHO: WARNING: $*" >&2; }
apt_die() { echo "$APT_WHO: ERROR: $*" >&2; exit 1; }

# apt-get as root, with APT_CONFIG kept across sudo.
apt_root() {
	$apt_sudo env ${APT_CONFIG:+APT_CONFIG="$APT_CONFIG"} \
		DEBIAN_FRONTEND=noninteractive apt-get "$@"
}

# apt_update [apt-get options...]: refresh the indexes; a failure is reported
# and survived.  Pass "-c <conf>" for a private state, where no root is needed.
apt_update() {
	local out run=apt_root

	[ "${1:-}" = -c ] && run=apt-get
	if out=$($run "$@" -q update 2>&1); then
		return 0
	fi
	apt_warn "apt-get update failed for some indexes; going on with what it got:"
	echo "$out" | grep -E '^(E|W|Err):' | sed "s/^/$APT_WHO:   /" >&2
	return 0
}

# apt_retry <what> <command...>: run the command; when it fails, refresh the
# indexes and try again after each APT_BACKOFF delay.  On the last failure,
# name <what> and show the command's own output.
apt_retry() {
	local what=$1 out delay update=(apt_update)

	shift
	# A private state's command starts "apt-get -c <conf>": refresh that state.
	[ "$1" = apt-get ] && [ "${2:-}" = -c ] && update=(apt_update -c "$3")
	for delay in $APT_BACKOFF ""; do
		if out=$("$@" 2>&1); then
			return 0
		fi
		[ -n "$delay" ] || break
		apt_warn "$what failed; trying again in ${delay}s"
		sleep "$delay"
		"${update[@]}"
	done
	echo "$out" | sed "s/^/$APT_WHO:   /" >&2
	apt_die "could not get $what (apt's output above)"
}

# apt_install <package...>: install on the host, with retries.
apt_install() {
	apt_retry "package(s) $*" apt_root install -y -q --no-install-recommends "$@"
}

# apt_private_init <dir> <deb|deb-src> [architecture]: make (or refresh) a
# private apt state in <dir> whose sources are the host's "deb" entries as
# <type> entries, and update it.  Afterwards "apt-get -c <dir>/apt.conf ..."
# works in it without root.
apt_private_init() {
	local dir=$1 type=$2 arch=${3:-$(dpkg --print-architecture)}
	local top

	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	mkdir -p "$dir/sources.list.d" "$dir/lists/partial" "$dir/archives/partial"
	: >"$dir/sources.list"
	: >"$dir/status"
	python3 "$top/mk/apt-sources.py" --type "$type" --arch "$arch" \
		>"$dir/sources.list.d/host-derived.sources" ||
		apt_die "could not derive $type entries from the host's apt sources"
	[ -s "$dir/sources.list.d/host-derived.sources" ] ||
		apt_die "the host's apt configuration has no deb entry to derive $type entries from"
	# Only the indexes the private state needs: Packages or Sources.
	cat >"$dir/apt.conf" <<-EOF
	Dir::State "$dir";
	Dir::State::lists "$dir/lists";
	Dir::State::status "$dir/status";
	Dir::Cache "$dir";
	Dir::Cache::archives "$dir/archives";
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	Dir::Etc::sourcelist "$dir/sources.list";
	Dir::Etc::sourceparts "$dir/sources.list.d";
	Dir::Etc::preferencesparts "$dir/preferences.d";
	APT::Architecture "$arch";
	APT::Architectures { "$arch"; };
	Acquire::Languages "none";
	Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
	Acquire::IndexTargets::deb-src::Contents-dsc::DefaultEnabled "false";
	EOF
	# apt drops root to _apt for downloads; let it write its folders.
	[ "$(id -u)" -ne 0 ] || chown -R _apt:root "$dir/lists" "$dir/archives" 2>/dev/null || true
	apt_update -c "$dir/apt.conf"
}

# apt_download_dir <dir>: a download folder apt's _apt sandbox can write.
apt_download_dir() {
	mkdir -p "$1"
	[ "$(id -u)" -ne 0 ] || chown _apt:root "$1" 2>/dev/null || chmod 777 "$1"
}
