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

// OOMCounter is a machine that can say how many of its processes the
// kernel killed for want of memory since it last booted (a restore boots
// it again and starts from zero). The daemon turns a rise into an "oom"
// event of the session.
type OOMCounter interface {
	OOMKills() (int64, error)
}
