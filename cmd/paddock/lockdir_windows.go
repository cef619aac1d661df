package main

import (
	"errors"
	"os"
)

// lockDir refuses on Windows: the tenants file is edited under an flock of
// its directory, which Windows does not have, and the daemon that reads
// the file runs on Linux. Edit it on the daemon's host.
func lockDir(*os.File) (func(), error) {
	return nil, errors.New("paddock tenant edits a daemon's tenants file under a directory lock Windows does not have: run it on the daemon's host")
}
