package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	echoOnce sync.Once
	echoPath string
	echoErr  error
)

// EchoServerBinary returns a static build of internal/testutil/echoserver,
// an HTTP server small enough (a few MiB) to write into a sandbox through
// the files API and start as a job there. It is built once per test
// process into the shared cache directory, under a lock, and renamed into
// place so another process never runs half a file.
func EchoServerBinary(t testing.TB) string {
	t.Helper()
	echoOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			echoErr = fmt.Errorf("the go tool is not on PATH: %w", err)
			return
		}
		dir := filepath.Join(os.TempDir(), "paddock-test-bin")
		if echoErr = privateCache(dir); echoErr != nil {
			return
		}
		unlock := lockFile(filepath.Join(dir, ".lock-echoserver"))
		defer unlock()
		out := filepath.Join(dir, "echoserver")
		tmp := fmt.Sprintf("%s.%d", out, os.Getpid())
		cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, "./internal/testutil/echoserver")
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			echoErr = &buildError{out: string(b), err: err}
			return
		}
		if echoErr = os.Rename(tmp, out); echoErr == nil {
			echoPath = out
		}
	})
	if echoErr != nil {
		t.Fatalf("build the echo server: %v", echoErr)
	}
	return echoPath
}
