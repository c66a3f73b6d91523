#!/bin/bash
# Make $O/.config: tinyconfig + the committed fragment(s), then verify that
# every requested option made it (merge_config.sh only warns).
set -euo pipefail
src=$(realpath "$1") obj=$(realpath -m "$2")
shift 2
fragments=("$@")

mkdir -p "$obj"
make -s -C "$src" O="$obj" ARCH=x86_64 tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "${fragments[@]}" >/dev/null
make -s -C "$src" O="$obj" ARCH=x86_64 olddefconfig >/dev/null

bad=0
while read -r line; do
	case $line in
	CONFIG_*=n) want="# ${line%=n} is not set" ;;
	CONFIG_*) want=$line ;;
	*) continue ;;
	esac
	if ! grep -qxF "$want" "$obj/.config"; then
		echo "kconfig: requested '$line' but .config has '$(grep "^\(# \)\?${line%%=*}[= ]" "$obj/.config" || echo "nothing")'" >&2
		bad=1
	fi
done < <(cat "${fragments[@]}")
exit $bad
