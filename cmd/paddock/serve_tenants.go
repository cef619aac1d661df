//go:build linux

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"paddock.dev/paddock/hostd/daemon"
)

// tenantReloader has the daemon read its tenants file again on every
// SIGHUP. It is listening from the moment it is made (a SIGHUP would
// otherwise end the process), and reloads once start gives it the
// daemon. A file that no longer reads or checks is refused with a log
// line naming the problem, and the tenants in use stay.
type tenantReloader struct {
	hup chan os.Signal
	log *slog.Logger
}

func newTenantReloader(log *slog.Logger) *tenantReloader {
	r := &tenantReloader{hup: make(chan os.Signal, 1), log: log}
	signal.Notify(r.hup, syscall.SIGHUP)
	return r
}

// start calls d.Reload on each SIGHUP until ctx ends.
func (r *tenantReloader) start(ctx context.Context, d *daemon.Daemon) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.hup:
			}
			switch err := d.Reload(); {
			case errors.Is(err, daemon.ErrNoTenantsFile):
				r.log.Warn("SIGHUP: no --tenants file to read again")
			case err != nil:
				r.log.Error("SIGHUP: tenants file refused; the tenants in use stay", "err", err, "tenants", d.Tenants())
			}
		}
	}()
}

func (r *tenantReloader) stop() { signal.Stop(r.hup) }
