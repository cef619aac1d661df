//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"paddock.dev/paddock/gateway"
	"paddock.dev/paddock/gateway/caddyfile"
)

// gatewayFlags are the gateway's settings, shared by `paddock serve` and
// `paddock gateway`.
type gatewayFlags struct {
	domain, email, caddyfilePath, accessLog, storage string
	corsOrigins                                      []string
}

func (f *gatewayFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.domain, "domain", caddyfile.LocalDomain, "the gateway's domain: localhost (HTTPS with Caddy's internal CA) or a real domain (a certificate from Let's Encrypt by ACME; listen on :443); previews' host form is <token>.preview.<domain>")
	fs.StringVar(&f.email, "acme-email", "", "contact address of the ACME account (with a real --domain)")
	fs.StringVar(&f.caddyfilePath, "caddyfile", "", "run this Caddyfile instead of the shipped one (rendered with the same values: see docs/gateway.md)")
	fs.StringVar(&f.accessLog, "access-log", "stderr", "where the gateway's access log goes: stderr, discard or a file (tokens are never written)")
	fs.StringArrayVar(&f.corsOrigins, "cors-origin", nil, "a web page's origin (exact scheme://host[:port], e.g. https://app.example.com) allowed to call the API from a browser (CORS; repeatable; no * or null; default none)")
	fs.StringVar(&f.storage, "gateway-storage", "", "Caddy's storage: its internal CA, certificates, ACME account (default <state-dir>/gateway)")
}

// config is the gateway for listen, in front of hostd's socket.
func (f gatewayFlags) config(g *globals, listen, socket string) (gateway.Config, error) {
	storage := f.storage
	if storage == "" {
		storage = filepath.Join(g.stateDir, "gateway")
	}
	sock, err := filepath.Abs(socket)
	if err != nil {
		return gateway.Config{}, err
	}
	if storage, err = filepath.Abs(storage); err != nil {
		return gateway.Config{}, err
	}
	return gateway.Config{CaddyfilePath: f.caddyfilePath, Options: caddyfile.Options{
		Listen: listen, Domain: f.domain, Email: f.email, HostdSocket: sock, StorageDir: storage, AccessLog: f.accessLog,
		CORSOrigins: f.corsOrigins,
	}}, nil
}

// isLocalDomain: the gateway uses Caddy's internal CA.
func (f gatewayFlags) isLocalDomain() bool {
	return f.domain == "" || f.domain == caddyfile.LocalDomain
}

// newGatewayCmd is `paddock gateway`: the gateway alone, in front of a
// hostd that serves its API on a unix socket (paddock serve --gateway=false).
func newGatewayCmd(g *globals) *cobra.Command {
	var socket, listen string
	var f gatewayFlags
	c := &cobra.Command{
		Use:   "gateway",
		Short: "Run the HTTPS gateway (Caddy) alone, in front of a hostd socket",
		Long: `Run Paddock's front door alone: Caddy with Paddock's modules, in front of
the API socket of a daemon started with ` + "`paddock serve --gateway=false --listen ''`" + `.
The part facing the network then needs no privileges: run it as its own
user, with a --state-dir it owns (Caddy's CA and certificates go there),
and let that user reach the socket:

  sudo paddock serve --gateway=false --listen '' \
      --socket /run/paddock/hostd.sock --socket-group paddock-gw
  sudo -u paddock-gw paddock gateway --state-dir /var/lib/paddock-gw \
      --hostd-socket /run/paddock/hostd.sock --listen 127.0.0.1:7788

Reaching the socket gives nothing a client of the gateway lacks: hostd
checks every bearer token itself and never trusts the gateway's
Paddock-Identity header. docs/gateway.md has the whole picture.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if socket == "" {
				return usageError{errors.New("--hostd-socket is required: the API socket of paddock serve (default <its state dir>/hostd.sock)")}
			}
			if _, err := os.Stat(socket); err != nil {
				return fmt.Errorf("hostd socket: %w (start paddock serve --gateway=false first)", err)
			}
			cfg, err := f.config(g, listen, socket)
			if err != nil {
				return err
			}
			if _, err := cfg.JSON(); err != nil {
				return usageError{err} // a flag that does not check (--cors-origin, --domain…)
			}
			gw, err := gateway.Start(cfg)
			if err != nil {
				return err
			}
			defer gw.Stop()
			printTrust(c.ErrOrStderr(), f, gw, listen)
			<-c.Context().Done()
			return nil
		},
	}
	c.Flags().StringVar(&socket, "hostd-socket", "", "the daemon's API socket (paddock serve --socket)")
	c.Flags().StringVar(&listen, "listen", caddyfile.DefaultLocalListen, "address to serve HTTPS on (:443 for a real --domain)")
	f.add(c.Flags())
	return c
}

// printTrust says where the gateway listens and, with the internal CA,
// where its root is and how a client trusts it.
func printTrust(w io.Writer, f gatewayFlags, gw *gateway.Gateway, listen string) {
	if !f.isLocalDomain() || f.caddyfilePath != "" {
		fmt.Fprintf(w, "paddock: gateway on %s (domain %s)\n", listen, f.domain)
		return
	}
	_, port, _ := net.SplitHostPort(listen)
	fmt.Fprintf(w, "paddock: gateway on https://127.0.0.1:%s; its certificates come from Caddy's internal CA, whose root is\n"+
		"paddock:   %s\n"+
		"paddock: the CLI on this machine trusts it by itself when it can read the state dir; elsewhere, copy it and\n"+
		"paddock:   export PADDOCK_URL=https://127.0.0.1:%s PADDOCK_CA=<the copy>\n", port, gw.RootCertPath(), port)
}

// hostdSocketPath is the API socket's default place.
func hostdSocketPath(stateDir string) string { return filepath.Join(stateDir, "hostd.sock") }

// listenHostdSocket listens on path for hostd's API. The socket is
// root's alone (0600), or with group also that group's (0660), for a
// gateway running as another user; a missing directory is made 0750 with
// that group. A socket left by an earlier daemon is replaced (the caller
// holds the state dir's lock).
func listenHostdSocket(path, group string) (net.Listener, error) {
	gid := -1
	if group != "" {
		gr, err := user.LookupGroup(group)
		if err != nil {
			return nil, usageError{fmt.Errorf("--socket-group: %w", err)}
		}
		if gid, err = strconv.Atoi(gr.Gid); err != nil {
			return nil, err
		}
	}
	if len(path) > 107 {
		return nil, usageError{fmt.Errorf("--socket %s: a unix socket path is at most 107 bytes", path)}
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		if gid >= 0 {
			if err := os.Chown(dir, -1, gid); err != nil {
				return nil, err
			}
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it or pick another --socket", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(0o600)
	if gid >= 0 {
		mode = 0o660
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, err
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// serveListeners opens what `paddock serve` serves hostd on: its socket,
// and with --gateway=false a plain-HTTP --listen (if not empty). With the
// gateway it checks the gateway's configuration and that --listen is
// free, so a daemon that could not serve fails before it adopts
// sandboxes; the gateway itself starts once hostd serves.
func serveListeners(g *globals, withGateway bool, listen, socket, group string, f gatewayFlags) ([]net.Listener, gateway.Config, error) {
	var cfg gateway.Config
	if !withGateway && len(f.corsOrigins) > 0 {
		return nil, cfg, usageError{errors.New("--cors-origin is answered by the gateway: it needs --gateway (the default), not --gateway=false")}
	}
	if withGateway {
		if listen == "" {
			return nil, cfg, usageError{errors.New("--listen '' (the socket alone) needs --gateway=false")}
		}
		var err error
		if cfg, err = f.config(g, listen, socket); err != nil {
			return nil, cfg, err
		}
		if _, err := cfg.JSON(); err != nil {
			return nil, cfg, usageError{err}
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, cfg, err
		}
		l.Close()
	}
	sock, err := listenHostdSocket(socket, group)
	if err != nil {
		return nil, cfg, err
	}
	lns := []net.Listener{sock}
	if !withGateway && listen != "" {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			sock.Close()
			return nil, cfg, err
		}
		lns = append(lns, l)
	}
	return lns, cfg, nil
}

// startGateway starts the embedded gateway (a seam for tests).
var startGateway = gateway.Start
