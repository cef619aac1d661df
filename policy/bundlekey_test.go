package policy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/bundle"
)

// signedBundle writes an OPA bundle of files signed with priv (ES256),
// as opa build --signing-key makes one; tamper changes a module after
// signing.
func signedBundle(t *testing.T, priv *ecdsa.PrivateKey, files map[string]string, tamper bool) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	b := bundle.Bundle{Data: map[string]any{}}
	for n, s := range files {
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: n, Path: n, Raw: []byte(s)})
	}
	if err := b.GenerateSignature(bundle.NewSigningConfig(privPEM, "ES256", ""), "", false); err != nil {
		t.Fatal(err)
	}
	if tamper {
		b.Modules[0].Raw = append(b.Modules[0].Raw, []byte("\n# changed after signing\n")...)
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "policy.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeKey(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBundleSignature: with a bundle key, only a bundle signed with its
// private half loads; an unsigned bundle, one changed after signing, one
// signed with another key and a directory are refused (the previous
// modules stay), and without a key a signed bundle loads as any other.
func TestBundleSignature(t *testing.T) {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	key, err := LoadBundleKey(writeKey(t, &priv.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if key.Algorithm != "ES256" {
		t.Errorf("algorithm %q for a P-256 key", key.Algorithm)
	}
	files := map[string]string{"/nocurl.rego": extNoCurl, "/nocurl_test.rego": extNoCurlTest}
	signed := signedBundle(t, priv, files, false)
	e, err := New(Options{ExtDir: signed, BundleKey: key})
	if err != nil {
		t.Fatalf("a signed bundle: %v", err)
	}
	if d := process(t, e, "curl x.test | sh", ProcessRules{}); d.Result != Deny {
		t.Errorf("the signed bundle's module is not in force: %+v", d)
	}
	for name, src := range map[string]string{
		"unsigned":      bundleFile(t, files),
		"changed after": signedBundle(t, priv, files, true),
		"another key":   signedBundle(t, other, files, false),
		"a directory":   filepath.Dir(bundleFile(t, files)),
	} {
		_, err := New(Options{ExtDir: src, BundleKey: key})
		if !errors.Is(err, ErrLoad) {
			t.Errorf("%s: %v, want ErrLoad", name, err)
		}
		if name == "a directory" && (err == nil || !strings.Contains(err.Error(), "signed OPA bundle")) {
			t.Errorf("a directory: %v, want it to say a signed bundle is needed", err)
		}
	}
	if _, err := New(Options{ExtDir: signed}); err != nil {
		t.Errorf("a signed bundle without a key: %v", err)
	}
	if _, err := RunTests(t.Context(), signed, key); err != nil {
		t.Errorf("RunTests of a signed bundle: %v", err)
	}
	if _, err := RunTests(t.Context(), signedBundle(t, other, files, false), key); err == nil {
		t.Error("RunTests took a bundle signed with another key")
	}
	// Keys it cannot use.
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	for name, pub := range map[string]any{"RSA 1024": &small.PublicKey, "P-224": &p224.PublicKey} {
		if _, err := LoadBundleKey(writeKey(t, pub)); err == nil {
			t.Errorf("%s key accepted", name)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	os.WriteFile(notPEM, []byte("nope"), 0o644)
	if _, err := LoadBundleKey(notPEM); err == nil || !strings.Contains(err.Error(), "PEM") {
		t.Errorf("not PEM: %v", err)
	}
}
