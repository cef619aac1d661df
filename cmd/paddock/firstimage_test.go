package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"paddock.dev/paddock/hypervisor/image"
)

// TestCLIServeBuildsDefaultImage: a daemon on an empty state dir creates
// sessions without a `paddock image build` first. Two creates at once
// build the built-in image once, and one log line says so; an image that
// was never built is still refused (400, saying how to build it) and is
// not built.
func TestCLIServeBuildsDefaultImage(t *testing.T) {
	bin, state, addr, env := daemonSetupFresh(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	_, se, code := runCLI(t, bin, env, nil, "sandboxes", "create", "--image", "nosuch")
	if code != exitUsage || !strings.Contains(se, "paddock image build nosuch") {
		t.Errorf("create on an unbuilt image: code %d (want %d), stderr %q", code, exitUsage, se)
	}
	if ms, err := (image.Store{Dir: filepath.Join(state, "images")}).List(); len(ms) != 0 || err != nil {
		t.Errorf("a create on an unbuilt image built %d images (%v)", len(ms), err)
	}
	var wg sync.WaitGroup
	ids := make([]string, 2)
	errs := make([]error, 2)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command(bin, "--json", "session", "run")
			c.Env = env
			out, err := c.Output()
			var s struct{ ID string }
			if err == nil {
				err = json.Unmarshal(out, &s)
			}
			if err == nil && s.ID == "" {
				err = fmt.Errorf("no id in %q", out)
			}
			ids[i], errs[i] = s.ID, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session run %d on a fresh state dir: %v\n%s", i, err, serveLogs(srv))
		}
	}
	if n := strings.Count(serveLogs(srv), "built the default image on first use"); n != 1 {
		t.Errorf("%d log lines say the image was built, want 1:\n%s", n, serveLogs(srv))
	}
	if builds, _ := os.ReadDir(filepath.Join(state, "images", "mini", "builds")); len(builds) != 1 {
		t.Errorf("%d builds of mini, want 1", len(builds))
	}
	for _, id := range ids {
		if out, _, code := runCLI(t, bin, env, nil, "session", "exec", id, "--", "echo ok"); code != 0 || out != "ok\n" {
			t.Errorf("exec in %s: code %d, %q", id, code, out)
		}
	}
}
