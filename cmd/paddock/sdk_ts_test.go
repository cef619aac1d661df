package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The TypeScript SDK (sdk/ts) is tested with node's own test runner; these
// Go tests set it up (npm ci from the lock file, tsc strict), run its
// suites and hold them to "no test skipped", so `make test` runs them.

var tsSDKDir = filepath.Join("..", "..", "sdk", "ts")

var (
	tsSetupOnce sync.Once
	tsSetupErr  error
)

// tsRun runs a command in dir with env added and a time limit, failing the
// test with its output when it fails.
func tsRun(t *testing.T, dir string, env []string, limit time.Duration, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	done := make(chan struct{})
	timer := time.AfterFunc(limit, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		close(done)
	})
	out, err := cmd.CombinedOutput()
	if !timer.Stop() {
		<-done
		t.Fatalf("%s %s: still running after %s:\n%s", name, strings.Join(args, " "), limit, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tsSetup installs the SDK's dev dependencies (npm's cache makes a second
// install offline) and compiles it with tsc, strict.
func tsSetup(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/install-deps.sh installs it)", tool)
		}
	}
	tsSetupOnce.Do(func() {
		var log strings.Builder
		run := func(name string, args ...string) {
			if tsSetupErr != nil {
				return
			}
			cmd := exec.Command(name, args...)
			cmd.Dir = tsSDKDir
			out, err := cmd.CombinedOutput()
			log.Write(out)
			if err != nil {
				tsSetupErr = fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, log.String())
			}
		}
		if _, err := os.Stat(filepath.Join(tsSDKDir, "node_modules", ".bin", "tsc")); err != nil {
			run("npm", "ci", "--prefer-offline", "--no-audit", "--no-fund")
		}
		run(filepath.Join("node_modules", ".bin", "tsc"), "-p", "tsconfig.json")
	})
	if tsSetupErr != nil {
		t.Fatal(tsSetupErr)
	}
}

var tapCount = regexp.MustCompile(`(?m)^# (pass|fail|skipped|cancelled|todo) (\d+)$`)

// tsTestRun runs node --test on files and requires at least min passes and
// no failure, skip, cancel or todo.
func tsTestRun(t *testing.T, env []string, min int, files ...string) {
	t.Helper()
	args := append([]string{"--test", "--test-reporter=tap"}, files...)
	cmd := exec.Command("node", args...)
	cmd.Dir = tsSDKDir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	counts := map[string]int{}
	for _, m := range tapCount.FindAllStringSubmatch(string(out), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	if err != nil || counts["pass"] < min || counts["fail"]+counts["skipped"]+counts["cancelled"]+counts["todo"] > 0 {
		t.Fatalf("node --test %s: %v, counts %v (want at least %d passes, nothing else):\n%s", strings.Join(files, " "), err, counts, min, out)
	}
	t.Logf("node --test %s: %d passed", strings.Join(files, " "), counts["pass"])
}

// tsPackInstall packs the SDK with npm pack and installs the tarball into
// an empty project, returning the project's directory.
func tsPackInstall(t *testing.T) string {
	t.Helper()
	packDir := t.TempDir()
	out := tsRun(t, tsSDKDir, nil, 2*time.Minute, "npm", "pack", "--pack-destination", packDir)
	tgzs, _ := filepath.Glob(filepath.Join(packDir, "*.tgz"))
	if len(tgzs) != 1 {
		t.Fatalf("npm pack made %d tarballs, want 1:\n%s", len(tgzs), out)
	}
	tgz := tgzs[0]
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"empty","private":true,"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The package has no run-time dependencies, so the install needs no registry.
	tsRun(t, proj, nil, 2*time.Minute, "npm", "install", "--offline", "--no-audit", "--no-fund", tgz)
	return proj
}

// TestTSSDKPack runs the SDK's offline suites (errors, SSE, orchestration
// rules, uploads against a fake, coverage of openapi.yaml, freshness of
// the generated types), then packs it, installs it into an empty project,
// imports it there, and type-checks code using it with `await using` and
// the browser's library alone (no Node types).
func TestTSSDKPack(t *testing.T) {
	tsSetup(t)
	tsTestRun(t, nil, 12, "test/unit.test.mjs", "test/routes.test.mjs")
	proj := tsPackInstall(t)
	out := tsRun(t, proj, nil, time.Minute, "node", "--input-type=module", "-e",
		`import { Paddock, ApprovalRequired, ROUTES } from "@paddock/sdk"; console.log(typeof Paddock, typeof ApprovalRequired, Object.keys(ROUTES).length > 60)`)
	if strings.TrimSpace(out) != "function function true" {
		t.Fatalf("import of the installed package: %q", out)
	}
	src := `import { Paddock, ApprovalRequired } from "@paddock/sdk";
const pd = new Paddock({ url: "https://127.0.0.1:7788", token: "t" });
export async function run(): Promise<number> {
  await using s = await pd.createSession({ ttl_seconds: 60 });
  try {
    return (await s.exec("true")).exitCode;
  } catch (e) {
    if (e instanceof ApprovalRequired) return (await s.exec("true", { approvalId: e.approvalId })).exitCode;
    throw e;
  }
}
`
	cfg := `{"compilerOptions":{"target":"ES2022","module":"ES2022","moduleResolution":"Bundler","lib":["ES2022","DOM","ESNext.Disposable"],"strict":true,"noEmit":true,"types":[]},"include":["use.ts"]}`
	for name, body := range map[string]string{"use.ts": src, "tsconfig.json": cfg} {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tsc, err := filepath.Abs(filepath.Join(tsSDKDir, "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	tsRun(t, proj, nil, 2*time.Minute, tsc, "-p", "tsconfig.json")
}

// TestTSSDK runs the SDK's live suite (test/live.test.mjs) against a real
// `paddock serve` on procbox through its gateway with TLS, with
// PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA set and NODE_EXTRA_CA_CERTS
// naming the same CA (Node's fetch takes a CA no other way); then builds
// examples/ts (fork into 3, test each, promote the winner) against the
// packed package and runs it.
func TestTSSDK(t *testing.T) {
	tsSetup(t)
	bin, state, addr, env := daemonSetup(t)
	srv := startServe(t, bin, state, addr, env, "--stop-sandboxes")
	defer stopServe(t, srv)
	nodeEnv := append([]string{}, env...)
	nodeEnv = append(nodeEnv, "NODE_EXTRA_CA_CERTS="+gatewayRoot(state))
	cmdEnv := nodeEnv[len(os.Environ()):]
	tsTestRun(t, cmdEnv, 13, "test/live.test.mjs")

	proj := tsPackInstall(t)
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "ts", "fork-three.ts"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", "..", "examples", "ts", "tsconfig.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(proj, "fork-three.ts"), example, 0o644)
	os.WriteFile(filepath.Join(proj, "tsconfig.json"), cfg, 0o644)
	tsc, _ := filepath.Abs(filepath.Join(tsSDKDir, "node_modules", ".bin", "tsc"))
	tsRun(t, proj, nil, 2*time.Minute, tsc, "-p", "tsconfig.json")
	out := tsRun(t, proj, cmdEnv, 5*time.Minute, "node", filepath.Join("dist", "fork-three.js"))
	for _, want := range []string{"candidate 0: failed", "candidate 1: passed", "candidate 2: failed", "promoted candidate 1: add.sh", "parent now says 2+3 = 5"} {
		if !strings.Contains(out, want) {
			t.Errorf("example output lacks %q:\n%s", want, out)
		}
	}
	if t.Failed() {
		t.Logf("serve logs:\n%s", serveLogs(srv))
	}
}
