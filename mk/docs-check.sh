#!/bin/bash
# Build the series' documentation with Sphinx and fail on any warning in it.
#
# Runs "make htmldocs SPHINXDIRS=<dirs>" in the assembled tree, out of tree
# in <build>/htmldocs, with -E so that every page is read again (an
# incremental Sphinx build reports the warnings of changed pages only).
# Fails on any Sphinx or kernel-doc warning or error that names one of the
# series' rst files (the overlay's Documentation/**.rst, from the entries'
# Files: blocks) or a file one of their ".. kernel-doc::" directives points
# at, on "kernel-doc -none -Wall" warnings in those files, and on rst lines
# over 80 columns. The base's own warnings elsewhere are counted, not judged.
# Usage: docs-check.sh <src> <patches dir> <build>
set -euo pipefail
src=$(cd "$1" && pwd) patches=$(cd "$2" && pwd)
mkdir -p "$3" && build=$(cd "$3" && pwd)
out=$build/htmldocs log=$build/logs/htmldocs.log
mkdir -p "$out" "$(dirname "$log")"
start=$(date +%s.%N)

if ! command -v sphinx-build >/dev/null; then
	echo "docs-check: sphinx-build is missing (python3-sphinx: make deps)" >&2
	exit 1
fi

rsts=$(sed -n 's|^\t\(Documentation/.*\.rst\)$|\1|p' "$patches"/[0-9]*.patch | sort -u)
if [ -z "$rsts" ]; then
	echo "docs-check: no rst file in the series" >&2
	exit 1
fi
cd "$src"
headers=$(sed -n 's/^\.\. kernel-doc:: *\([^ ]*\).*/\1/p' $rsts | sort -u)
dirs=$(for f in $rsts; do d=${f#Documentation/}; dirname "$d"; done | sort -u)

fail=0
if ! make -s O="$out" htmldocs SPHINXDIRS="$(echo $dirs)" SPHINXOPTS=-E \
	>"$log" 2>&1; then
	tail -20 "$log"
	echo "docs-check: make htmldocs failed (log: $log)"
	exit 1
fi

# Sphinx: "<path>:<line>: WARNING: ..."; kernel-doc: "<path>:<line>:
# warning: ...", both with absolute or relative paths.
pattern=$(printf '%s\n' $rsts $headers | sed 's/[.]/[.]/g' | paste -sd'|')
issues='(warning|error|severe|critical)'
all=$(grep -Eic "$issues" "$log" || true)
ours=$(grep -Ei "$issues" "$log" | grep -E "(^|/)($pattern)(:|\$| )" || true)
if [ -n "$ours" ]; then
	echo "$ours"
	echo "docs-check: Sphinx warnings in the series' documentation above"
	fail=1
fi

for h in $headers; do
	w=$(./scripts/kernel-doc -none -Wall "$h" 2>&1 || true)
	if [ -n "$w" ]; then
		echo "$w"
		echo "docs-check: $h: kernel-doc -Wall warnings above"
		fail=1
	fi
done

long=$(awk 'length > 80 { print FILENAME ":" FNR ": " length " columns" }' $rsts)
if [ -n "$long" ]; then
	echo "$long"
	echo "docs-check: rst lines over 80 columns above"
	fail=1
fi

secs=$(echo "$(date +%s.%N) - $start" | bc)
nours=$(grep -c . <<<"$ours" || true)
printf 'docs-check: htmldocs SPHINXDIRS=%s: %d warning(s) in %s and %s,' \
	"$(echo $dirs)" "$nours" "$(echo $rsts)" "$(echo $headers)"
printf ' %d warning or error line(s) in the whole build; %.0f s wall\n' \
	"$all" "$secs"
exit $fail
