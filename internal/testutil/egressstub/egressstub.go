// Package egressstub serves stand-ins for the host's egress sockets, for
// backend tests that check a sandbox's side of egress without hostd.
package egressstub

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"paddock.dev/paddock/guest/api"
)

// Serve serves, on the three egress sockets in dir, what the host's
// egress would, each answer naming who: an HTTP proxy that answers
// "<who>-proxy METHOD URL", a resolver that answers any query with the
// query upper-cased, and a redirect socket that answers "<who> " and the
// header line it got. Everything closes with the test.
func Serve(t testing.TB, dir, who string) {
	t.Helper()
	listen := func(name string) net.Listener {
		l, err := net.Listen("unix", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	pl := listen(api.EgressProxySocket)
	go http.Serve(pl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s-proxy %s %s\n", who, r.Method, r.URL)
	}))
	accept := func(l net.Listener, h func(net.Conn)) {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); h(c) }()
			}
		}()
	}
	accept(listen(api.EgressDNSSocket), func(c net.Conn) {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		io.ReadFull(c, q)
		c.Write(append(l[:], []byte(strings.ToUpper(string(q)))...))
	})
	accept(listen(api.EgressRedirectSocket), func(c net.Conn) {
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		// Read the client's request head before answering: closing
		// while it still writes would hand it a SIGPIPE.
		for {
			l, err := br.ReadString('\n')
			if err != nil || l == "\r\n" {
				break
			}
		}
		io.WriteString(c, who+" "+line)
	})
}
