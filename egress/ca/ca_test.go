package ca

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLoadOrCreatePersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Fatal("a second LoadOrCreate made a new CA instead of reusing the first")
	}
	c := b.Certificate()
	host, _ := os.Hostname()
	if want := fmt.Sprintf("Paddock egress CA (%s)", host); c.Subject.CommonName != want {
		t.Errorf("subject CN %q, want %q", c.Subject.CommonName, want)
	}
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a path-length-0 signing CA: IsCA %v MaxPathLen %d zero %v usage %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.KeyUsage)
	}
	if d := c.NotAfter.Sub(c.NotBefore); d < 9*365*24*time.Hour {
		t.Errorf("CA valid for %v, want about ten years", d)
	}
	// A leaf from the reloaded CA verifies against the first one's pool.
	leaf, err := b.Leaf("example.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "example.test", Roots: pool(t, a.CertPEM())}); err != nil {
		t.Errorf("a leaf of the reloaded CA does not verify against the first: %v", err)
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700 | os.ModeDir, CertFile: 0o600, KeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != want {
			t.Errorf("%q: mode %v, want %v", name, got, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want just the two CA files", len(entries))
	}
	// A key others can read is refused, not used.
	os.Chmod(filepath.Join(dir, KeyFile), 0o644)
	if _, err := LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key: %v, want a refusal that says chmod 600", err)
	}
}

func TestHalfAPairIsReplaced(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, KeyFile))
	b, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Error("a certificate without its key was kept")
	}
}

func TestLeafVerifies(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := pool(t, a.CertPEM())
	for _, tc := range []struct{ host, verifyAs, other string }{
		{"api.example.test", "api.example.test", "evil.example.test"},
		{"API.Example.Test.", "api.example.test", "example.test"},
		{"203.0.113.10", "203.0.113.10", "203.0.113.11"},
		{"2001:db8::1", "2001:db8::1", "2001:db8::2"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			c, err := a.Leaf(tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Certificate) != 2 {
				t.Errorf("chain of %d certificates, want leaf and CA", len(c.Certificate))
			}
			opts := x509.VerifyOptions{DNSName: tc.verifyAs, Roots: roots}
			if _, err := c.Leaf.Verify(opts); err != nil {
				t.Errorf("does not verify for %s: %v", tc.verifyAs, err)
			}
			opts.DNSName = tc.other
			if _, err := c.Leaf.Verify(opts); err == nil {
				t.Errorf("verifies for %s too", tc.other)
			}
			if c.Leaf.IsCA {
				t.Error("a leaf is a CA")
			}
			if d := c.Leaf.NotAfter.Sub(time.Now()); d > 25*time.Hour {
				t.Errorf("leaf valid for %v more; want about a day", d)
			}
		})
	}
	other, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := a.Leaf("api.example.test")
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "api.example.test", Roots: pool(t, other.CertPEM())}); err == nil {
		t.Error("a leaf verifies against another daemon's CA")
	}
	for _, bad := range []string{"", "*.example.test", "a b", "fe80::1%eth0", "a..b", strings.Repeat("a", 64) + ".test"} {
		if _, err := a.Leaf(bad); !errors.Is(err, ErrBadHost) {
			t.Errorf("Leaf(%q): %v, want ErrBadHost", bad, err)
		}
	}
}

func TestLeafCache(t *testing.T) {
	a, err := LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.max = 8
	first, _ := a.Leaf("h0.test")
	again, _ := a.Leaf("H0.test.")
	if first != again {
		t.Error("the same host was issued twice")
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Leaf(fmt.Sprintf("h%d.test", i%20)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := a.cached(); n > 8 {
		t.Errorf("%d leaves cached, bound is 8", n)
	}
	// Least recently used goes first.
	for i := range 8 {
		a.Leaf(fmt.Sprintf("k%d.test", i))
	}
	a.Leaf("k0.test")
	a.Leaf("k8.test") // evicts k1
	a.mu.Lock()
	_, k0 := a.cache["k0.test"]
	_, k1 := a.cache["k1.test"]
	a.mu.Unlock()
	if !k0 || k1 {
		t.Errorf("after touching k0 and adding k8: k0 cached %v (want true), k1 cached %v (want false)", k0, k1)
	}
	// A leaf near its end is issued again.
	c, _ := a.Leaf("k0.test")
	a.now = func() time.Time { return time.Now().Add(leafValidity - 30*time.Minute) }
	d, _ := a.Leaf("k0.test")
	if c == d {
		t.Error("a leaf with half an hour left was served from the cache")
	}
}

func pool(t *testing.T, certPEM []byte) *x509.CertPool {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}
