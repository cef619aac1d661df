package hypervisor

import (
	"context"
	"time"
)

// CPUMeter is a machine that can say how much CPU time everything in it
// has used, the guest agent included, since it was created: across
// restores (each reboot's time is kept) and across an adoption by
// another process. The daemon charges it to a session's compute budget,
// so a process a command leaves running in the background is paid for.
type CPUMeter interface {
	CPUTime() (time.Duration, error)
}

// CommandStopper is a machine whose commands can be ended from outside:
// StopCommands kills every process in it that runs as a user other than
// root (commands, jobs, and whatever they left behind, however they
// detached), leaving the guest agent running. It returns how many
// processes it killed.
type CommandStopper interface {
	StopCommands(ctx context.Context) (int, error)
}
