#!/usr/bin/env bash
# Runs tests as an ordinary user (uid and gid 65534, no groups), to prove
# that what they cover needs no root: the fake backend (hypervisor/fake)
# and what is tested on it. Each argument is a package, optionally with
# ":" and a -run pattern. Every package's test binary is built first (by
# root, with the module cache at hand) and then run, under setpriv when
# run by root, with a HOME and TMPDIR of its own.
#
# A listed test may neither need root nor skip: the binaries run with
# PADDOCK_NONROOT_RUN=1, under which testutil.RequiresRoot fails a test
# instead of skipping it (so one that would boot a real backend fails
# here), and every skip is checked by internal/tools/skipcheck against
# scripts/expected-skips-nonroot.txt: a test that skips as an ordinary
# user proves nothing about running without root.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
[ $# -gt 0 ] || { echo "usage: $0 pkg[:run-pattern]..." >&2; exit 2; }
work=$(mktemp -d /tmp/pnr.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
events="$work/events.json"
: >"$events"
asuser=()
who="uid $(id -u)"
if [ "$(id -u)" = 0 ]; then
	asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
	who="uid 65534"
fi
rc=0
for spec in "$@"; do
	pkg=${spec%%:*}
	run=.
	[[ $spec == *:* ]] && run=${spec#*:}
	bin="$work/$(echo "$pkg" | tr -c 'A-Za-z0-9\n' _).test"
	$GO test -c -o "$bin" "$pkg"
	[ -e "$bin" ] || { echo "ok   $pkg (no test files)"; continue; }
	chmod 755 "$bin"
	home="$work/home"
	mkdir -p "$home"
	[ "$(id -u)" != 0 ] || chown 65534:65534 "$home"
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	path=$($GO list -f '{{.ImportPath}}' "$pkg")
	out="$work/out"
	# Test binaries run in their package's directory, which the ordinary
	# user can read but not write.
	if (cd "$dir" && ${asuser[@]+"${asuser[@]}"} env -i PATH="$PATH" HOME="$home" TMPDIR="$home" PADDOCK_NONROOT_RUN=1 \
		"$bin" -test.count=1 -test.run "$run" -test.timeout=10m -test.v=test2json) >"$out" 2>&1; then
		ok=1
	else
		ok=0
		rc=1
	fi
	$GO tool test2json -p "$path" <"$out" >"$out.json"
	cat "$out.json" >>"$events"
	# Top-level tests that passed (subtests are not counted).
	n=$(grep -o '"Action":"pass","Package":"[^"]*","Test":"[^"/]*"' "$out.json" | wc -l || true)
	if [ $ok = 1 ]; then
		echo "ok   $pkg ($n tests passed as $who)"
	else
		# The failed tests' output in full, as `make test` shows it.
		$GO tool gotestsum --format pkgname-and-test-fails --format-icons text --hide-summary=skipped \
			--raw-command -- cat "$out.json" || true
		echo "FAIL $pkg (as $who)"
	fi
	rm -rf "$home"
done
$GO run ./internal/tools/skipcheck -json "$events" -expected scripts/expected-skips-nonroot.txt -require-live || rc=1
exit $rc
