#!/bin/bash
# Unpack the pinned Debian linux-source tarball into $BUILD/src as a git
# repository whose first commit (tagged "base") is the untouched base.
#
# The pin lives in mk/base.conf.  If that exact version has left the Debian
# archive, take the newest linux-source of the same series, say so loudly and
# record what was used in $BUILD/base-version, which the test report prints.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/mk/base.conf"
build=${BUILD:-$top/build}
src=$build/src
tarball=/usr/src/$BASE_PACKAGE.tar.xz

APT_WHO=base
. "$top/mk/apt.sh"

installed_version() {
	dpkg-query -W -f='${Status} ${Version}\n' "$BASE_PACKAGE" 2>/dev/null |
		awk '$3 == "installed" { print $4 }'
}

available() {
	apt-cache madison "$BASE_PACKAGE" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }'
}

choose_version() {
	local have
	have=$(installed_version)
	if [ "$have" = "$BASE_VERSION" ]; then
		echo "$BASE_VERSION"
		return
	fi
	if ! available | grep -qxF "$BASE_VERSION"; then
		apt_update
	fi
	if available | grep -qxF "$BASE_VERSION"; then
		echo "$BASE_VERSION"
		return
	fi
	local newest
	newest=$(available | sort -V | tail -n 1)
	if [ -z "$newest" ]; then
		echo "base: no $BASE_PACKAGE in the apt archive" >&2
		exit 1
	fi
	{
		echo "######################################################################"
		echo "# WARNING: pinned base $BASE_PACKAGE=$BASE_VERSION has left the archive."
		echo "# WARNING: building on the newest available version instead: $newest"
		echo "######################################################################"
	} >&2
	echo "$newest"
}

version=$(choose_version)

if [ -d "$src/.git" ] && [ "$(cat "$build/base-version" 2>/dev/null)" = "$version" ] &&
   git -C "$src" rev-parse -q --verify refs/tags/base >/dev/null; then
	exit 0
fi

if [ "$(installed_version)" != "$version" ]; then
	echo "base: installing $BASE_PACKAGE=$version"
	apt_retry "$BASE_PACKAGE=$version" apt_root install -y -q --allow-downgrades \
		"$BASE_PACKAGE=$version"
fi

echo "base: unpacking $tarball ($version) into $src"
rm -rf "$src" "$build/obj" "$build/tree-head"
mkdir -p "$src"
tar -xf "$tarball" -C "$src" --strip-components=1

# Debian's packaging ignores everything at the top level ("/*", "!/debian/"),
# which would hide every file of the tree from git.  Drop those lines.
sed -i -e '/^# Debian packaging: ignore everything/,/^!\/debian\/$/d' "$src/.gitignore"

export GIT_AUTHOR_NAME="Debian base" GIT_AUTHOR_EMAIL="base@invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z"
git -C "$src" init -q -b series
git -C "$src" config core.autocrlf false
git -C "$src" config gc.auto 0
git -C "$src" add -A
git -C "$src" commit -q -m "base: Debian $BASE_PACKAGE $version" \
	-m "Unpacked from /usr/src/$BASE_PACKAGE.tar.xz; Debian's top-level ignore rule dropped."
git -C "$src" tag base
echo "$version" > "$build/base-version"
echo "base: $(git -C "$src" rev-parse --short base) is $BASE_PACKAGE $version"
