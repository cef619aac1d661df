package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	prego "paddock.dev/paddock/rego"
)

// moduleFile is one Rego source before parsing.
type moduleFile struct {
	name string // as shown in errors, coverage and Status
	text string
	test bool // a _test.rego file: compiled for test runs only
}

// builtinPrefix names the embedded modules as they sit in the repository.
const builtinPrefix = "rego/"

// extRoot is where operator modules must live.
var extRoot = ast.MustParseRef("data.paddock.ext")

// builtinFiles returns the embedded modules.
func builtinFiles() []moduleFile {
	var out []moduleFile
	mods := prego.Modules()
	for _, name := range prego.Names() {
		out = append(out, moduleFile{name: builtinPrefix + name, text: mods[name], test: prego.IsTest(name)})
	}
	return out
}

// readExt reads an operator's modules: every .rego file below a directory
// (hidden directories skipped, symbolic links to directories not
// followed), or the modules of an OPA bundle (.tar.gz). "" is none.
func readExt(src string, key *BundleKey) ([]moduleFile, error) {
	if src == "" {
		return nil, nil
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("operator policy %s: %w", src, err)
	}
	if st.IsDir() {
		if key != nil {
			return nil, fmt.Errorf("operator policy %s is a directory, and a bundle signing key is set: only a signed OPA bundle is taken (opa build --bundle DIR --signing-key KEY)", src)
		}
		return readExtDir(src)
	}
	if strings.HasSuffix(src, ".tar.gz") || strings.HasSuffix(src, ".tgz") {
		return readBundle(src, key)
	}
	return nil, fmt.Errorf("operator policy %s is neither a directory of .rego files nor an OPA bundle (.tar.gz)", src)
}

func readExtDir(dir string) ([]moduleFile, error) {
	var out []moduleFile
	total := 0
	// The directory itself may be a link (a mounted configuration
	// volume often is); what is below it is walked without following
	// links to directories.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".rego") || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		st, err := os.Stat(p) // follows a link to a file
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return nil
		}
		if len(out) == MaxExtFiles {
			return fmt.Errorf("%s holds more than %d .rego files; split the policy or drop some", dir, MaxExtFiles)
		}
		b, err := readLimited(p, MaxExtFileBytes)
		if err != nil {
			return err
		}
		total += len(b)
		if total > MaxExtTotalBytes {
			return fmt.Errorf("the .rego files below %s are more than %d MiB together", dir, MaxExtTotalBytes>>20)
		}
		name := filepath.Join(dir, strings.TrimPrefix(p, root))
		out = append(out, moduleFile{name: name, text: string(b), test: strings.HasSuffix(p, "_test.rego")})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// readLimited reads a file of at most max bytes.
func readLimited(p string, max int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is more than %d KiB; split it", p, max>>10)
	}
	return b, nil
}

// readBundle reads an OPA bundle. The archive is checked against the
// limits first (its size, the number of files, each file's and the total
// unpacked size), then read by OPA's bundle reader. A bundle may carry
// Rego modules and a manifest; data files are refused. With a key, the
// bundle must carry a signature (.signatures.json) that the key verifies,
// covering every file; without one, signatures are not checked.
func readBundle(p string, key *BundleKey) ([]moduleFile, error) {
	raw, err := readLimited(p, MaxExtTotalBytes)
	if err != nil {
		return nil, err
	}
	if err := checkArchive(raw); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", p, err)
	}
	r := bundle.NewCustomReader(bundle.NewTarballLoaderWithBaseURL(bytes.NewReader(raw), "")).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxExtFileBytes)
	if key == nil {
		r = r.WithSkipBundleVerification(true)
	} else {
		r = r.WithBundleVerificationConfig(bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
			bundleKeyID: {Key: key.PEM, Algorithm: key.Algorithm},
		}, bundleKeyID, "", nil))
	}
	b, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", p, err)
	}
	if len(b.Data) > 0 {
		return nil, fmt.Errorf("bundle %s carries data (data.json or data.yaml); Paddock takes Rego modules only: write the data as rules in a paddock.ext package", p)
	}
	var out []moduleFile
	for _, m := range b.Modules {
		out = append(out, moduleFile{name: p + "#" + m.Path, text: string(m.Raw), test: strings.HasSuffix(m.Path, "_test.rego")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// checkArchive walks a gzipped tar within the limits.
func checkArchive(raw []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not a gzip file: %w", err)
	}
	tr := tar.NewReader(gz)
	files, total := 0, int64(0)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files++
		if files > MaxExtFiles {
			return fmt.Errorf("more than %d files", MaxExtFiles)
		}
		n, err := io.Copy(io.Discard, io.LimitReader(tr, MaxExtFileBytes+1))
		if err != nil {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		if n > MaxExtFileBytes {
			return fmt.Errorf("%s is more than %d KiB unpacked", h.Name, MaxExtFileBytes>>10)
		}
		total += n
		if total > MaxExtTotalBytes {
			return fmt.Errorf("more than %d MiB unpacked", MaxExtTotalBytes>>20)
		}
	}
}

// parseModules parses the files as Rego v1 and checks that operator
// modules stay in paddock.ext.
func parseModules(files []moduleFile, operator bool) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(files))
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.name, f.text, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, fmt.Errorf("%s: no package: an operator module starts with `package paddock.ext.<name>`", f.name)
		}
		if operator {
			p := m.Package.Path
			if len(p) <= len(extRoot) || !p.HasPrefix(extRoot) {
				return nil, fmt.Errorf("%s: package %s is outside paddock.ext; operator modules can only add rules under paddock.ext.<name> (see docs/policy.md)", f.name, pkgName(p))
			}
		}
		out[f.name] = m
	}
	return out, nil
}

// pkgName writes a package path as in source: paddock.ext.x.
func pkgName(p ast.Ref) string {
	return strings.TrimPrefix(p.String(), "data.")
}

// Categories of decision operator modules can narrow, and the rules each
// reads from package paddock.ext.<name>.<category>.
var extKinds = map[string][]string{
	"process":  {"deny", "ask"},
	"http":     {"deny", "inspect"},
	"grant":    {"deny"},
	"approval": {"deny"},
}

// extRule is one operator rule the engine consults.
type extRule struct {
	path     ast.Ref // data.paddock.ext.nocurl.process.deny
	category string  // process, http, grant, approval
	kind     string  // deny, ask, inspect
	name     string  // the rule a decision names: ext.nocurl.process
}

// findExtRules finds the deny, ask and inspect rules of the operator's
// (non-test) modules, and refuses those the engine would never consult
// or could not read.
func findExtRules(mods map[string]*ast.Module, g *ast.Graph) ([]extRule, error) {
	seen := map[string]bool{}
	// http packages with an inspect rule, and the first rule of each that
	// reads a request's method or path.
	inspects, readers := map[string]bool{}, map[string]string{}
	var out []extRule
	names := make([]string, 0, len(mods))
	for n := range mods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, file := range names {
		for _, r := range mods[file].Rules {
			path := r.Path()
			last := lastSegment(path)
			if last != "deny" && last != "ask" && last != "inspect" {
				continue
			}
			cat := ""
			if len(path) >= len(extRoot)+3 {
				cat = lastSegment(path[:len(path)-1])
			}
			kinds, ok := extKinds[cat]
			if !ok {
				return nil, fmt.Errorf("%s:%d: rule %s is never consulted: put %s rules in package paddock.ext.<name>.process, .http, .grant or .approval", file, r.Location.Row, pkgName(path), last)
			}
			if !slices.Contains(kinds, last) {
				return nil, fmt.Errorf("%s:%d: %s decisions read %s, not %s", file, r.Location.Row, cat, strings.Join(kinds, " and "), last)
			}
			ground := r.Head.Ref().IsGround()
			switch {
			case last == "inspect" && (r.Head.RuleKind() != ast.SingleValue || !ground):
				return nil, fmt.Errorf("%s:%d: inspect must be a boolean rule: write `inspect if { … }`", file, r.Location.Row)
			case last != "inspect" && (r.Head.RuleKind() != ast.MultiValue || !ground):
				return nil, fmt.Errorf("%s:%d: %s must be a set of reasons: write `%s contains reason if { … }`", file, r.Location.Row, last, last)
			}
			if cat == "http" {
				pkg := path[:len(path)-1].String()
				if last == "inspect" {
					inspects[pkg] = true
				} else if what := readsMethodOrPath(r, g); what != "" && readers[pkg] == "" {
					readers[pkg] = fmt.Sprintf("%s:%d: %s reads %s", file, r.Location.Row, pkgName(path), what)
				}
			}
			key := path.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, extRule{
				path:     path,
				category: cat,
				kind:     last,
				name:     "ext." + strings.TrimPrefix(pkgName(path[:len(path)-1]), "paddock.ext."),
			})
		}
	}
	pkgs := make([]string, 0, len(readers))
	for pkg := range readers {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		if !inspects[pkg] {
			return nil, fmt.Errorf("%s, which an HTTPS request only shows when its tunnel is intercepted: add `inspect if { … }` naming the hosts it judges, or the rule never sees their HTTPS requests (docs/policy.md)", readers[pkg])
		}
	}
	return out, nil
}

// readsMethodOrPath names the first of input.request.method and
// input.request.path that r reads, in its own body or in a rule or
// function it depends on (the compiler's graph: helper rules, the
// built-in module's values), or "". A reference reached through a
// variable (r := input.request; r.path) is not seen.
func readsMethodOrPath(r *ast.Rule, g *ast.Graph) string {
	found := ""
	seen := map[*ast.Rule]bool{}
	var visit func(r *ast.Rule)
	visit = func(r *ast.Rule) {
		if found != "" || seen[r] {
			return
		}
		seen[r] = true
		ast.WalkRefs(r, func(ref ast.Ref) bool {
			for _, f := range []string{"method", "path"} {
				if found == "" && ref.HasPrefix(ast.MustParseRef("input.request."+f)) {
					found = "input.request." + f
				}
			}
			return found != ""
		})
		if g == nil {
			return
		}
		for dep := range g.Dependencies(r) {
			if d, ok := dep.(*ast.Rule); ok {
				visit(d)
			}
		}
	}
	visit(r)
	return found
}

func lastSegment(r ast.Ref) string {
	if len(r) == 0 {
		return ""
	}
	s, ok := r[len(r)-1].Value.(ast.String)
	if !ok {
		return ""
	}
	return string(s)
}

// BundleKey is the public key operator bundles must be signed with
// (Options.BundleKey): PEM text and the JWS algorithm it signs with.
type BundleKey struct {
	PEM       string
	Algorithm string // RS256, ES256 or ES384, from the key's type
}

// bundleKeyID is the id the key is known by when a bundle's signature is
// checked: it is used whatever key id the signature names.
const bundleKeyID = "paddock"

// maxKeyBytes bounds a bundle key file.
const maxKeyBytes = 64 << 10

// LoadBundleKey reads a PEM public key (an RSA key of 2048 bits or more,
// or an ECDSA P-256 or P-384 key) for verifying operator bundles.
func LoadBundleKey(path string) (*BundleKey, error) {
	raw, err := readLimited(path, maxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("bundle key: %w", err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		return nil, fmt.Errorf("bundle key %s: no PEM block", path)
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("bundle key %s: want a PEM public key (PUBLIC KEY): %w", path, err)
	}
	k := &BundleKey{PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: blk.Bytes}))}
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < 2048 {
			return nil, fmt.Errorf("bundle key %s: an RSA key of %d bits; use 2048 or more", path, pub.N.BitLen())
		}
		k.Algorithm = "RS256"
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P256():
			k.Algorithm = "ES256"
		case elliptic.P384():
			k.Algorithm = "ES384"
		default:
			return nil, fmt.Errorf("bundle key %s: an ECDSA key on %s; use P-256 or P-384", path, pub.Curve.Params().Name)
		}
	default:
		return nil, fmt.Errorf("bundle key %s: a %T; use an RSA or ECDSA key", path, pub)
	}
	return k, nil
}
