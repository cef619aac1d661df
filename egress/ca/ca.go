// Package ca is the daemon's own certificate authority for TLS
// interception: the egress proxy presents a leaf it issues for the host a
// sandbox asked for, and the sandbox trusts the CA's certificate
// (CertPEM), installed in its trust store.
//
// The key is generated once per daemon and kept in a directory only the
// daemon can read; goproxy's built-in CA, whose key is public, is never
// used.
package ca

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// File names inside the CA directory.
const (
	CertFile = "ca.crt"
	KeyFile  = "ca.key"
)

// Validity of what the authority issues.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	// leafRenew: a cached leaf with less validity left than this is
	// issued again.
	leafRenew = time.Hour
	// backdate covers clocks a little behind the daemon's.
	backdate = time.Hour
)

// DefaultCacheSize bounds the number of leaves an Authority keeps.
const DefaultCacheSize = 1024

// ErrBadHost is returned by Leaf for a host no certificate should name.
var ErrBadHost = errors.New("not a host a certificate can name")

// Authority issues leaf certificates for intercepted hosts.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	now     func() time.Time

	mu    sync.Mutex
	max   int
	lru   *list.List               // of *leafEntry, most recently used first
	cache map[string]*list.Element // host → element of lru
}

type leafEntry struct {
	host string
	cert *tls.Certificate
}

// LoadOrCreate returns the authority kept in dir, creating dir (0700) and
// a new CA (key and certificate, 0600) the first time. A directory with
// only one of the two files gets a new pair: a certificate without its key
// is of no use, and a key without its certificate was never trusted.
func LoadOrCreate(dir string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress ca: creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress ca: making %s private: %w", dir, err)
	}
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		return load(keyPath, certPEM, keyPEM)
	case certErr != nil && !errors.Is(certErr, fs.ErrNotExist):
		return nil, fmt.Errorf("egress ca: %w", certErr)
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("egress ca: %w", keyErr)
	}
	return create(dir, certPath, keyPath)
}

func load(keyPath string, certPEM, keyPEM []byte) (*Authority, error) {
	if fi, err := os.Stat(keyPath); err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("egress ca: %s is readable by others (mode %v); chmod 600 it, or remove it to make a new CA", keyPath, fi.Mode().Perm())
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("egress ca: %s is not a PEM certificate; remove both CA files to make a new CA", CertFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %s: %w", CertFile, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("egress ca: %s is not a PEM private key; remove both CA files to make a new CA", KeyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %s: %w", KeyFile, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("egress ca: %s is not an ECDSA key", KeyFile)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("egress ca: %s and %s do not belong together; remove both to make a new CA", CertFile, KeyFile)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("egress ca: %s is not a CA certificate", CertFile)
	}
	if now := time.Now(); now.After(cert.NotAfter) {
		return nil, fmt.Errorf("egress ca: the CA certificate expired on %s; remove both CA files to make a new one (and reinstall it in sandboxes)", cert.NotAfter.Format(time.DateOnly))
	}
	return newAuthority(cert, certPEM, key), nil
}

func create(dir, certPath, keyPath string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown host"
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("Paddock egress CA (%s)", host), Organization: []string{"Paddock"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFile(dir, keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})); err != nil {
		return nil, err
	}
	if err := writeFile(dir, certPath, certPEM); err != nil {
		return nil, err
	}
	return newAuthority(cert, certPEM, key), nil
}

// writeFile writes b to path (0600) through a temporary file and a rename,
// so that a crash never leaves half a file.
func writeFile(dir, path string, b []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("egress ca: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename, there is nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("egress ca: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("egress ca: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("egress ca: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("egress ca: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("egress ca: %w", err)
	}
	return nil
}

func newAuthority(cert *x509.Certificate, certPEM []byte, key crypto.Signer) *Authority {
	return &Authority{
		cert:    cert,
		certPEM: certPEM,
		key:     key,
		now:     time.Now,
		max:     DefaultCacheSize,
		lru:     list.New(),
		cache:   map[string]*list.Element{},
	}
}

// CertPEM is the CA certificate in PEM, for a sandbox's trust store.
func (a *Authority) CertPEM() []byte { return append([]byte(nil), a.certPEM...) }

// Certificate is the CA certificate.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// Leaf returns a certificate for host (a DNS name, or an IP literal)
// signed by the CA, valid for a day. Leaves are cached, at most
// DefaultCacheSize of them, and issued again when they near their end.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	name, ip, err := leafName(host)
	if err != nil {
		return nil, err
	}
	now := a.now()
	a.mu.Lock()
	if el, ok := a.cache[name]; ok {
		e := el.Value.(*leafEntry)
		if e.cert.Leaf.NotAfter.Sub(now) > leafRenew {
			a.lru.MoveToFront(el)
			a.mu.Unlock()
			return e.cert, nil
		}
	}
	a.mu.Unlock()

	cert, err := a.issue(name, ip, now)
	if err != nil {
		return nil, err
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	if el, ok := a.cache[name]; ok {
		el.Value.(*leafEntry).cert = cert
		a.lru.MoveToFront(el)
		return cert, nil
	}
	a.cache[name] = a.lru.PushFront(&leafEntry{host: name, cert: cert})
	for a.lru.Len() > a.max {
		old := a.lru.Back()
		a.lru.Remove(old)
		delete(a.cache, old.Value.(*leafEntry).host)
	}
	return cert, nil
}

// cached is the number of leaves in the cache.
func (a *Authority) cached() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lru.Len()
}

func (a *Authority) issue(name string, ip netip.Addr, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if a.cert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = a.cert.NotAfter
	}
	if tmpl.NotAfter.Before(tmpl.NotBefore) || tmpl.NotAfter.Before(now) {
		return nil, fmt.Errorf("egress ca: the CA certificate expired on %s", a.cert.NotAfter.Format(time.DateOnly))
	}
	if ip.IsValid() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("egress ca: issuing for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress ca: %w", err)
	}
	return &tls.Certificate{
		Certificate: [][]byte{der, a.cert.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// leafName checks host and returns the name a leaf is issued for, or the
// IP address. Names are lower-cased with one trailing dot dropped;
// wildcards and anything but letters, digits, '-', '_' and dots are
// refused.
func leafName(host string) (string, netip.Addr, error) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("egress ca: %q: %w (a zoned address)", host, ErrBadHost)
		}
		ip = ip.Unmap()
		return ip.String(), ip, nil
	}
	if h == "" || len(h) > 253 {
		return "", netip.Addr{}, fmt.Errorf("egress ca: %q: %w (empty or over 253 bytes)", host, ErrBadHost)
	}
	for l := range strings.SplitSeq(h, ".") {
		if l == "" || len(l) > 63 {
			return "", netip.Addr{}, fmt.Errorf("egress ca: %q: %w (an empty or over-long label)", host, ErrBadHost)
		}
		for _, c := range []byte(l) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", netip.Addr{}, fmt.Errorf("egress ca: %q: %w (character %q)", host, ErrBadHost, c)
			}
		}
	}
	return h, netip.Addr{}, nil
}

// randomSerial is a random positive 128-bit serial number.
func randomSerial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b)
	b[0] &= 0x7f
	n := new(big.Int).SetBytes(b)
	if n.Sign() == 0 {
		n.SetInt64(1)
	}
	return n
}
