package session

// LeftRunning is a sandbox Detach left running for the next daemon on the
// state dir to adopt.
type LeftRunning struct {
	Session string `json:"session"`
	Sandbox string `json:"sandbox_id"`
	Backend string `json:"backend"` // "" when its record could not be read
}
