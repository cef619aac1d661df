//go:build linux

package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"paddock.dev/paddock/hostd/auth"
)

// loadTenants reads the --tenants file ("" means no tenants) and checks it
// against the admin token's hash, before the daemon touches anything.
func loadTenants(path string, adminHash [32]byte) (*auth.Tenants, error) {
	if path == "" {
		return nil, nil
	}
	t, err := auth.LoadTenants(path)
	if err != nil {
		return nil, usageError{err}
	}
	if err := auth.NewVerifier(adminHash, nil).SetTenants(t); err != nil {
		return nil, usageError{err}
	}
	return t, nil
}

// tenantReloader reads the tenants file again on every SIGHUP. It is
// listening from the moment it is made (a SIGHUP would otherwise end the
// process), and applies reloads once start gives it the verifier. A file
// that no longer reads or checks is refused with a log line naming the
// problem, and the tenants in use stay.
type tenantReloader struct {
	path string
	hup  chan os.Signal
	log  *slog.Logger
}

func newTenantReloader(path string, log *slog.Logger) *tenantReloader {
	r := &tenantReloader{path: path, hup: make(chan os.Signal, 1), log: log}
	signal.Notify(r.hup, syscall.SIGHUP)
	return r
}

// start reads the tenants file again on each SIGHUP; changed, when set,
// gets each set put in force.
func (r *tenantReloader) start(ctx context.Context, v *auth.Verifier, changed func(*auth.Tenants)) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.hup:
			}
			if r.path == "" {
				r.log.Warn("SIGHUP: no --tenants file to read again")
				continue
			}
			t, err := auth.LoadTenants(r.path)
			if err == nil {
				err = v.SetTenants(t)
			}
			if err != nil {
				r.log.Error("SIGHUP: tenants file refused; the tenants in use stay", "err", err, "tenants", v.Tenants().Len())
				continue
			}
			r.log.Info("SIGHUP: tenants file read again", "path", r.path, "tenants", t.Len())
			if changed != nil {
				changed(t)
			}
		}
	}()
}

func (r *tenantReloader) stop() { signal.Stop(r.hup) }
