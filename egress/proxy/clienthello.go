package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// maxClientHello bounds the bytes read to find a ClientHello: a few TLS
// records, far above any real one (post-quantum key shares included).
const maxClientHello = 64 << 10

// errHelloRead stops crypto/tls once it has parsed the ClientHello.
var errHelloRead = errors.New("client hello read")

// readClientHello reads a TLS ClientHello from r and returns its server
// name ("" when it has none) and every byte it read, which the caller
// sends upstream before the rest of the connection. crypto/tls does the
// parsing (records, fragmentation, extensions): it runs a server handshake
// over a connection that only reads r, and is stopped by
// GetConfigForClient before it writes anything that matters (what it does
// write goes nowhere). The caller bounds the time with a read deadline.
func readClientHello(r io.Reader) (serverName string, consumed []byte, err error) {
	var seen bytes.Buffer
	conn := &helloConn{r: io.TeeReader(io.LimitReader(r, maxClientHello), &seen)}
	var got *tls.ClientHelloInfo
	srv := tls.Server(conn, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			got = hello
			return nil, errHelloRead
		},
	})
	herr := srv.Handshake()
	if got == nil && seen.Len() >= maxClientHello {
		return "", seen.Bytes(), fmt.Errorf("no TLS ClientHello in the first %d bytes", maxClientHello)
	}
	if got == nil {
		if herr == nil {
			herr = errors.New("handshake ended without a ClientHello")
		}
		return "", seen.Bytes(), fmt.Errorf("not a TLS ClientHello: %w", herr)
	}
	return got.ServerName, seen.Bytes(), nil
}

// helloConn is the read-only net.Conn readClientHello hands crypto/tls.
type helloConn struct{ r io.Reader }

func (c *helloConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return helloAddr{} }
func (c *helloConn) RemoteAddr() net.Addr             { return helloAddr{} }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }

type helloAddr struct{}

func (helloAddr) Network() string { return "tcp" }
func (helloAddr) String() string  { return "sandbox" }
