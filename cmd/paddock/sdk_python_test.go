package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythonSDK is the Python SDK's directory in this tree.
const pythonSDK = "../../sdk/python"

// runPython runs python (python3 unless given) with args in dir and env,
// and returns its combined output; a failure to start fails the test.
func runPython(t *testing.T, dir string, env []string, python string, args ...string) (string, error) {
	t.Helper()
	if python == "" {
		python = "python3"
	}
	c := exec.Command(python, args...)
	c.Dir, c.Env = dir, append(env, "PYTHONDONTWRITEBYTECODE=1")
	out, err := c.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s %v: %v", python, args, err)
	}
	return string(out), err
}

// TestPythonSDKInstall installs sdk/python into a fresh venv with pip,
// offline (its build backend is the standard library's), imports it from
// elsewhere, and runs the SDK's offline tests.
func TestPythonSDKInstall(t *testing.T) {
	sdk, err := filepath.Abs(pythonSDK)
	if err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := runPython(t, "", os.Environ(), "", "-m", "venv", venv); err != nil {
		t.Fatalf("python3 -m venv (Debian: apt-get install python3-venv): %v\n%s", err, out)
	}
	// pip builds in a copy of the tree, so nothing is written into it.
	if out, err := runPython(t, "", os.Environ(), filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--disable-pip-version-check", sdk); err != nil {
		t.Fatalf("pip install ./sdk/python: %v\n%s", err, out)
	}
	const probe = `import os, paddock
d = os.path.dirname(paddock.__file__)
assert not d.startswith(os.environ["SDK"]), d
assert os.path.exists(os.path.join(d, "py.typed"))
assert os.path.exists(os.path.join(d, "aio.pyi")) and os.path.exists(os.path.join(d, "models.py"))
print(paddock.__version__, issubclass(paddock.ApprovalRequired, paddock.PaddockError))`
	out, err := runPython(t, t.TempDir(), append(os.Environ(), "SDK="+sdk), filepath.Join(venv, "bin", "python"), "-c", probe)
	if err != nil || strings.TrimSpace(out) != "0.1.0 True" {
		t.Fatalf("import paddock from the venv: %v\n%s", err, out)
	}
	out, err = runPython(t, sdk, os.Environ(), filepath.Join(venv, "bin", "python"), "-m", "unittest", "-v", "tests.test_offline", "tests.test_models", "tests.test_aio_offline")
	if err != nil {
		t.Fatalf("offline tests: %v\n%s", err, out)
	}
}

// TestPythonSDK runs the Python SDK's whole test suite (sdk/python/tests:
// sessions, exec and its stream resumed after a drop, files with a 20 MiB
// upload interrupted and resumed, jobs, approvals, each error class from a
// real refusal, events resumed with Last-Event-ID, fork, promote,
// evaluate, rollout, ...) against a real `paddock serve` through its
// gateway with TLS on procbox, then the example
// examples/python/fork_test_promote.py.
func TestPythonSDK(t *testing.T) {
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	sdk, err := filepath.Abs(pythonSDK)
	if err != nil {
		t.Fatal(err)
	}
	penv := append(env, "PADDOCK_SDK_LIVE=1", "PYTHONPATH="+sdk)
	out, err := runPython(t, sdk, penv, "", "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	if err != nil || strings.Contains(out, "skipped") {
		t.Errorf("python3 -m unittest (sdk/python): %v\n%s\n--- serve:\n%s", err, out, serveLogs(srv))
	} else {
		t.Logf("sdk/python tests:\n%s", out)
	}
	t.Run("example", func(t *testing.T) {
		out, err := runPython(t, t.TempDir(), penv, "", filepath.Join(sdk, "..", "..", "examples", "python", "fork_test_promote.py"))
		if err != nil || !strings.Contains(out, "winner: candidate 1;") || !strings.Contains(out, "parent's test after promote: pass") {
			t.Errorf("fork_test_promote.py: %v\n%s", err, out)
		}
	})
}
