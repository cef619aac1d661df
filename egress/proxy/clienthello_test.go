package proxy

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// clientHello is the first TLS record a crypto/tls client sends.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c2.Close()
	go func() {
		defer c1.Close()
		tls.Client(c1, cfg).Handshake()
	}()
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, 5)
	if _, err := io.ReadFull(c2, head); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(head[3:]))
	if _, err := io.ReadFull(c2, body); err != nil {
		t.Fatal(err)
	}
	return append(head, body...)
}

// fragment splits a one-record ClientHello into records of at most n
// payload bytes, as a client may.
func fragment(record []byte, n int) []byte {
	var out []byte
	payload := record[5:]
	for len(payload) > 0 {
		k := min(n, len(payload))
		out = append(out, record[0], record[1], record[2], byte(k>>8), byte(k))
		out = append(out, payload[:k]...)
		payload = payload[k:]
	}
	return out
}

func TestReadClientHello(t *testing.T) {
	named := clientHello(t, &tls.Config{ServerName: "allowed.test"})
	anonymous := clientHello(t, &tls.Config{InsecureSkipVerify: true})
	tls12 := clientHello(t, &tls.Config{ServerName: "old.test", MaxVersion: tls.VersionTLS12})
	cases := []struct {
		name    string
		in      []byte
		want    string
		wantErr bool
	}{
		{"SNI", named, "allowed.test", false},
		{"SNI, TLS 1.2 client", tls12, "old.test", false},
		{"no SNI", anonymous, "", false},
		{"fragmented over records", fragment(named, 40), "allowed.test", false},
		{"followed by more bytes", append(append([]byte{}, named...), "early data"...), "allowed.test", false},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"), "", true},
		{"truncated", named[:len(named)/2], "", true},
		{"empty", nil, "", true},
		{"oversized record", append([]byte{22, 3, 1, 0xff, 0xff}, make([]byte, 70000)...), "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name, consumed, err := readClientHello(bytes.NewReader(c.in))
			if (err != nil) != c.wantErr || name != c.want {
				t.Fatalf("got %q, %v; want %q, error %v", name, err, c.want, c.wantErr)
			}
			if !bytes.HasPrefix(c.in, consumed) {
				t.Errorf("consumed bytes are not a prefix of the input")
			}
			if c.name == "oversized record" && quietEnd(err) {
				t.Errorf("an oversized hello should be reported, not closed quietly: %v", err)
			}
			if len(consumed) > maxClientHello {
				t.Errorf("read %d bytes, over the %d bound", len(consumed), maxClientHello)
			}
		})
	}
}

// TestReadClientHelloTimesOut: a client that sends nothing is ended by the
// caller's read deadline.
func TestReadClientHelloTimesOut(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	c2.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	start := time.Now()
	_, _, err := readClientHello(c2)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if !quietEnd(err) {
		t.Errorf("a silent client should close quietly")
	}
}

func FuzzReadClientHello(f *testing.F) {
	f.Add(clientHello(f, &tls.Config{ServerName: "allowed.test"}))
	f.Add(clientHello(f, &tls.Config{InsecureSkipVerify: true}))
	f.Add(fragment(clientHello(f, &tls.Config{ServerName: "a.test"}), 16))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		name, consumed, err := readClientHello(bytes.NewReader(in))
		if !bytes.HasPrefix(in, consumed) {
			t.Fatalf("consumed bytes are not a prefix of the input")
		}
		if err != nil && name != "" {
			t.Fatalf("a name with an error")
		}
	})
}
