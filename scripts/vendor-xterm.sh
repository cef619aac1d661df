#!/usr/bin/env bash
# Vendors xterm.js and its fit addon into console/static/vendor/xterm/ for
# the console's browser terminal. Run it by hand to move to other versions
# (XTERM_VERSION, XTERM_FIT_VERSION); its output is checked in, so neither
# `make build` nor a running daemon needs npm or the network.
#
# It fetches the packages with `npm pack` (npm checks each tarball against
# the registry's integrity hash), copies only the ES module builds (renamed
# from .mjs to .esm.js: the console serves .js as JavaScript, and a module
# script of another type is refused), the CSS and the licences, records the versions and integrity hashes in VERSIONS,
# and writes SHA256SUMS, which console's TestVendoredXtermChecksums holds
# every vendored file to.
set -euo pipefail
cd "$(dirname "$0")/.."

xterm_version=${XTERM_VERSION:-6.0.0}
fit_version=${XTERM_FIT_VERSION:-0.11.0}
dest=console/static/vendor/xterm

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pack NAME VERSION DIR: fetch NAME@VERSION into DIR and print its integrity.
pack() {
	local out
	out=$(cd "$tmp" && npm pack --silent --json "$1@$2")
	mkdir -p "$tmp/$3"
	tar -xzf "$tmp/$(node -e 'process.stdout.write(JSON.parse(process.argv[1])[0].filename)' "$out")" -C "$tmp/$3"
	node -e 'process.stdout.write(JSON.parse(process.argv[1])[0].integrity)' "$out"
}

xterm_integrity=$(pack @xterm/xterm "$xterm_version" xterm)
fit_integrity=$(pack @xterm/addon-fit "$fit_version" fit)

rm -rf "$dest"
mkdir -p "$dest"
cp "$tmp/xterm/package/lib/xterm.mjs" "$dest/xterm.esm.js"
cp "$tmp/xterm/package/css/xterm.css" "$dest/xterm.css"
cp "$tmp/xterm/package/LICENSE" "$dest/LICENSE.xterm"
cp "$tmp/fit/package/lib/addon-fit.mjs" "$dest/addon-fit.esm.js"
cp "$tmp/fit/package/LICENSE" "$dest/LICENSE.addon-fit"

cat >"$dest/VERSIONS" <<EOF
# Written by scripts/vendor-xterm.sh; do not edit by hand.
# package version npm-integrity
@xterm/xterm $xterm_version $xterm_integrity
@xterm/addon-fit $fit_version $fit_integrity
EOF

(cd "$dest" && LC_ALL=C sha256sum $(ls | grep -vx SHA256SUMS | LC_ALL=C sort) >SHA256SUMS)
echo "vendored @xterm/xterm $xterm_version and @xterm/addon-fit $fit_version into $dest"
