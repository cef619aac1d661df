package api

import "time"

// Rewind's limits and defaults.
const (
	// MaxRewindPoints bounds a session's ring of rewind points.
	MaxRewindPoints = 50
	// DefaultRewindPoints is the ring's size when config does not say.
	DefaultRewindPoints = 10
	// DefaultBisectTimeout and MaxBisectTimeout bound one run of a
	// bisect's test, in seconds.
	DefaultBisectTimeout = 60
	MaxBisectTimeout     = 600
)

// What takes a rewind point.
const (
	RewindTriggerExec = "exec" // an exec (and exec/stream)
	RewindTriggerJob  = "job"  // a background job's start
	RewindTriggerFile = "file" // a file write, delete or completed upload
	RewindTriggerGit  = "git"  // a git commit or branch
)

// RewindConfigRequest is POST .../rewind/config: each field left out
// keeps its value.
type RewindConfigRequest struct {
	Enabled   *bool    `json:"enabled,omitempty"`
	MaxPoints *int     `json:"max_points,omitempty"`
	Memory    *bool    `json:"memory,omitempty"`
	Triggers  []string `json:"triggers"`
}

// RewindConfig is a session's rewind settings.
type RewindConfig struct {
	Enabled   bool     `json:"enabled"`
	MaxPoints int      `json:"max_points"`
	Memory    bool     `json:"memory"`
	Triggers  []string `json:"triggers"`
}

// RewindPoint is one point of the ring: the machine just before a
// command ran.
type RewindPoint struct {
	Tag string `json:"tag"`
	// Trigger is what took it (exec, job, file, git); Command the
	// command that was about to run ("write /path" for a file change).
	Trigger   string    `json:"trigger"`
	Command   string    `json:"command"`
	Memory    bool      `json:"memory"`
	Pinned    bool      `json:"pinned"`
	CreatedAt time.Time `json:"created_at"`
}

// Rewind is GET .../rewind: the config and the points, oldest first.
type Rewind struct {
	Config RewindConfig  `json:"config"`
	Points []RewindPoint `json:"points"`
}

// RewindUndoRequest is POST .../rewind/undo: Steps back (default 1), or
// back To a point's tag; not both.
type RewindUndoRequest struct {
	Steps int    `json:"steps,omitempty"`
	To    string `json:"to,omitempty"`
}

// RewindUndo is the answer of an undo: the point restored, the points
// dropped with it (newest last) and the session's new revision.
type RewindUndo struct {
	Restored RewindPoint `json:"restored"`
	Dropped  []string    `json:"dropped"`
	Kept     []string    `json:"kept_pinned"`
	Revision int64       `json:"revision"`
}

// RewindPinRequest is POST .../rewind/pin: Pinned defaults to true.
type RewindPinRequest struct {
	Tag    string `json:"tag"`
	Pinned *bool  `json:"pinned,omitempty"`
}

// RewindBisectRequest is POST .../rewind/bisect: Good and Bad name
// points (Good defaults to the oldest point, Bad to the machine as it is
// now, written "now").
type RewindBisectRequest struct {
	Test           string `json:"test"`
	Good           string `json:"good,omitempty"`
	Bad            string `json:"bad,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// RewindBisectState is one state a bisect tested.
type RewindBisectState struct {
	State    string `json:"state"` // a point's tag, or "now"
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// RewindBisect is a bisect's answer: Command ran between LastGood and
// FirstBad (Point is the tag of the point taken just before it).
type RewindBisect struct {
	Command  string              `json:"command"`
	Trigger  string              `json:"trigger"`
	Point    string              `json:"point"`
	LastGood string              `json:"last_good"`
	FirstBad string              `json:"first_bad"`
	Tested   []RewindBisectState `json:"tested"`
	Restores int                 `json:"restores"`
}

// RewindNow names the machine as it is, as a bisect's state.
const RewindNow = "now"

// DefaultBranchCount is how many children a branch starts when count is
// left out; at most hypervisor.MaxForkChildren (32), as a fork.
const DefaultBranchCount = 1

// RewindBranchRequest is POST .../rewind/branch: start Count (default 1)
// child sessions from the point Tag, with Identity as a fork's.
type RewindBranchRequest struct {
	Tag      string `json:"tag"`
	Count    int    `json:"count,omitempty"`
	Identity string `json:"identity,omitempty"`
}

// RewindBranch is a branch's answer: a fork's answer (From is the
// point's tag) and the point the children started from. The children
// have no workspace baseline, so promote does not apply to them.
type RewindBranch struct {
	ForkResult
	Point RewindPoint `json:"point"`
}
