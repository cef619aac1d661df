package agent

import (
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"

	"paddock.dev/paddock/guest/api"
)

// probeTools are the programs the probe looks for on PATH.
var probeTools = []string{
	"git", "sha256sum", "python3", "node", "npm", "cargo", "go", "gcc", "cc", "make",
	"chromium", "chromium-browser", "google-chrome", "socat", "playwright",
}

// playwrightCacheTool is the Tools key of a Playwright browser cache.
const playwrightCacheTool = "playwright-browsers"

// handleProbe answers GET /v1/probe: which tools the image has (looked up
// inside Root on the commands' PATH) and what they make possible.
func (s *Server) handleProbe(w http.ResponseWriter, r *http.Request) error {
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	pathList := envValue(s.baseEnv, "PATH")
	tools := map[string]string{}
	for _, name := range probeTools {
		if p, ok := findTool(root, name, pathList); ok {
			tools[name] = p
		}
	}
	cache := path.Join(s.cfg.Home, ".cache", "ms-playwright")
	if _, rel, err := checkPath(cache); err == nil {
		if fi, err := root.Stat(rel); err == nil && fi.IsDir() {
			tools[playwrightCacheTool] = cache
		}
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := tools[n]; ok {
				return true
			}
		}
		return false
	}
	browser := has("chromium", "chromium-browser", "google-chrome")
	writeJSON(w, http.StatusOK, api.Probe{
		Tools: tools,
		ReadyFor: map[string]bool{
			"git":                         has("git"),
			"promote":                     has("sha256sum"),
			"build_node":                  has("node") && has("npm"),
			"build_python":                has("python3"),
			"build_rust":                  has("cargo"),
			"build_c":                     has("make") && has("gcc", "cc"),
			"browser_cdp":                 browser,
			"browser_cdp_through_preview": browser && has("socat"),
			"playwright":                  has("playwright", playwrightCacheTool),
		},
		OS:   runtime.GOOS,
		Arch: runtime.GOARCH,
	})
	return nil
}

// findTool looks for an executable name in the absolute directories of
// pathList, inside root. A symbolic link counts when its target is an
// executable file, or when the target cannot be followed inside the root
// (absolute links such as /etc/alternatives ones).
func findTool(root *os.Root, name, pathList string) (string, bool) {
	for _, dir := range filepath.SplitList(pathList) {
		clean, rel, err := checkPath(path.Join(dir, name))
		if err != nil || !path.IsAbs(dir) {
			continue
		}
		lfi, err := root.Lstat(rel)
		if err != nil {
			continue
		}
		fi := lfi
		if lfi.Mode()&fs.ModeSymlink != 0 {
			fi, err = root.Stat(rel)
			if isEscape(err) {
				return clean, true
			}
			if err != nil {
				continue
			}
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return clean, true
		}
	}
	return "", false
}
