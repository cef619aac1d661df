#!/usr/bin/env bash
# Runs tests as an ordinary user (uid and gid 65534, no groups), to prove
# that what they cover needs no root: the fake backend (hypervisor/fake)
# and what is tested on it. Each argument is a package, optionally with
# ":" and a -run pattern. Run by root, every package's test binary is
# built first (as root, with the module cache at hand) and then run under
# setpriv with a HOME and TMPDIR of its own; run by anyone else, the tests
# simply run as that user.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
[ $# -gt 0 ] || { echo "usage: $0 pkg[:run-pattern]..." >&2; exit 2; }
work=$(mktemp -d /tmp/pnr.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
rc=0
for spec in "$@"; do
	pkg=${spec%%:*}
	run=.
	[[ $spec == *:* ]] && run=${spec#*:}
	if [ "$(id -u)" != 0 ]; then
		$GO test -count=1 -run "$run" "$pkg" || rc=1
		continue
	fi
	bin="$work/$(echo "$pkg" | tr -c 'A-Za-z0-9\n' _).test"
	$GO test -c -o "$bin" "$pkg"
	[ -e "$bin" ] || { echo "ok   $pkg (no test files)"; continue; }
	chmod 755 "$bin"
	home="$work/home"
	mkdir -p "$home"
	chown 65534:65534 "$home"
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	# Test binaries run in their package's directory, which the ordinary
	# user can read but not write.
	if (cd "$dir" && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		env -i PATH="$PATH" HOME="$home" TMPDIR="$home" "$bin" -test.count=1 -test.run "$run" -test.timeout=10m); then
		echo "ok   $pkg (as uid 65534)"
	else
		echo "FAIL $pkg (as uid 65534)"
		rc=1
	fi
	rm -rf "$home"
done
exit $rc
