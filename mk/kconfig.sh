#!/bin/bash
# Make <obj>/.config: tinyconfig + the committed fragment(s), then verify that
# every requested option made it (merge_config.sh only warns).  Later
# fragments override earlier ones.  ARCH defaults to x86_64.
# Usage: kconfig.sh <src> <obj> <fragment>...
set -euo pipefail
src=$(realpath "$1") obj=$(realpath -m "$2")
shift 2
fragments=("$@")
arch=${ARCH:-x86_64}

mkdir -p "$obj"
make -s -C "$src" O="$obj" ARCH="$arch" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "${fragments[@]}" >/dev/null
make -s -C "$src" O="$obj" ARCH="$arch" olddefconfig >/dev/null

# The last request for each symbol wins; =n is met by "is not set" or by
# the symbol's absence (its dependencies are off).
declare -A want
while read -r line; do
	case $line in
	CONFIG_*=*) want[${line%%=*}]=${line#*=} ;;
	esac
done < <(cat "${fragments[@]}")

bad=0
for sym in "${!want[@]}"; do
	val=${want[$sym]}
	if [ "$val" = n ]; then
		grep -q "^$sym=" "$obj/.config" || continue
	else
		grep -qxF "$sym=$val" "$obj/.config" && continue
	fi
	echo "kconfig: requested $sym=$val but .config has '$(grep "^\(# \)\?$sym[= ]" "$obj/.config" || echo "nothing")'" >&2
	bad=1
done
exit $bad
