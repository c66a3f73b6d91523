#!/bin/bash
# kernel-doc -none -Wall over every C file and header the series adds or
# changes in the kernel (the overlay's and those its entries patch): a
# warning the base tree does not already have fails. build/src is a git
# repository whose root commit is the base.
# Usage: kdoc-check.sh <src> <patches dir>
set -euo pipefail
src=$(cd "$1" && pwd) patches=$(cd "$2" && pwd)

files=$(
	{
		sed -n 's/^\t\(.*\.[ch]\)$/\1/p' "$patches"/[0-9]*.patch
		sed -n 's|^diff --git a/\(.*\.[ch]\) b/.*|\1|p' "$patches"/[0-9]*.patch
	} | grep -v '^tools/' | sort -u
)
cd "$src"
base=$(git rev-list --max-parents=0 HEAD)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The warnings of one file, without line numbers, so that they compare.
warnings() {
	./scripts/kernel-doc -none -Wall "$1" 2>&1 |
		sed -E 's/^[^:]*:[0-9]+: //' | sort
}

new=0
for f in $files; do
	[ -e "$f" ] || continue
	warnings "$f" >"$tmp/now"
	: >"$tmp/before"
	if git cat-file -e "$base:$f" 2>/dev/null; then
		mkdir -p "$tmp/base/$(dirname "$f")"
		git show "$base:$f" >"$tmp/base/$f"
		warnings "$tmp/base/$f" >"$tmp/before"
	fi
	if comm -23 "$tmp/now" "$tmp/before" | grep .; then
		echo "kdoc-check: $f: new kernel-doc warnings above"
		new=1
	fi
done
[ "$new" = 0 ] || exit 1
echo "kdoc-check: kernel-doc -Wall adds no warning ($(wc -w <<<"$files") files)"
