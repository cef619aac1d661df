package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const events = `{"Action":"run","Package":"paddock.dev/paddock/hypervisor/qemu","Test":"TestBootKVM"}
{"Action":"output","Package":"paddock.dev/paddock/hypervisor/qemu","Test":"TestBootKVM","Output":"=== RUN   TestBootKVM\n"}
{"Action":"output","Package":"paddock.dev/paddock/hypervisor/qemu","Test":"TestBootKVM","Output":"    vm_test.go:40: needs KVM: /dev/kvm cannot boot\n"}
{"Action":"output","Package":"paddock.dev/paddock/hypervisor/qemu","Test":"TestBootKVM","Output":"--- SKIP: TestBootKVM (0.00s)\n"}
{"Action":"skip","Package":"paddock.dev/paddock/hypervisor/qemu","Test":"TestBootKVM"}
{"Action":"output","Package":"paddock.dev/paddock/hostd/api","Test":"TestDebian/sub","Output":"    api_test.go:9: needs the debian image\n"}
{"Action":"skip","Package":"paddock.dev/paddock/hostd/api","Test":"TestDebian/sub"}
{"Action":"output","Package":"paddock.dev/paddock/hostd/api","Test":"TestOK","Output":"    api_test.go:9: a log line\n"}
{"Action":"pass","Package":"paddock.dev/paddock/hostd/api","Test":"TestOK"}
{"Action":"pass","Package":"paddock.dev/paddock/hostd/api"}
`

func TestReadSkips(t *testing.T) {
	skips, err := ReadSkips(strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) != 2 {
		t.Fatalf("skips %+v, want 2", skips)
	}
	if s := skips[0]; s.Test != "TestDebian/sub" || s.Reason != "api_test.go:9: needs the debian image" {
		t.Errorf("first skip %+v", s)
	}
	if s := skips[1]; s.Test != "TestBootKVM" || s.Reason != "vm_test.go:40: needs KVM: /dev/kvm cannot boot" {
		t.Errorf("second skip %+v", s)
	}
}

func TestRequireLive(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "events.json")
	os.WriteFile(js, []byte(events), 0o644)
	exp := filepath.Join(dir, "expected.txt")
	os.WriteFile(exp, []byte("# comment\nhypervisor/qemu | TestBoot.* | needs KVM | this machine kind's KVM cannot boot a stock kernel\n"), 0o644)

	var out bytes.Buffer
	err := run(js, exp, true, &out)
	if !errors.Is(err, errUnexpected) {
		t.Fatalf("err %v, want the unexpected-skip error; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "hostd/api TestDebian/sub: api_test.go:9: needs the debian image  UNEXPECTED") ||
		!strings.Contains(out.String(), "TestBootKVM: vm_test.go:40: needs KVM: /dev/kvm cannot boot  (expected here") {
		t.Errorf("output:\n%s", out.String())
	}

	// Without -require-live every skip is printed and none fails the run.
	out.Reset()
	if err := run(js, exp, false, &out); err != nil || !strings.Contains(out.String(), "Skipped tests: 2") {
		t.Errorf("err %v output:\n%s", err, out.String())
	}

	// A skip for another reason than the listed one is not expected.
	os.WriteFile(exp, []byte("hypervisor/qemu | TestBootKVM | no such reason | x\nhostd/api | TestDebian/.* | debian image | y\n"), 0o644)
	out.Reset()
	if err := run(js, exp, true, &out); !errors.Is(err, errUnexpected) || !strings.Contains(out.String(), "TestBootKVM: vm_test.go:40: needs KVM: /dev/kvm cannot boot  UNEXPECTED") {
		t.Errorf("err %v output:\n%s", err, out.String())
	}
}

func TestParseExpectedRefusesBadLines(t *testing.T) {
	for _, bad := range []string{"a | b | c", "a | ( | c | d", "a | b | ( | d", " | b | c | d", "a | b | c | "} {
		if _, err := ParseExpected(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestExpectedSkipsFileParses keeps the repository's list well formed.
func TestExpectedSkipsFileParses(t *testing.T) {
	f, err := os.Open("../../../scripts/expected-skips.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	list, err := ParseExpected(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if len(e.Why) < 10 {
			t.Errorf("line %d: say why this machine kind cannot run it", e.Line)
		}
	}
}
