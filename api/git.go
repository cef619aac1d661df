package api

import "time"

// Git limits.
const (
	MaxGitDiffBytes = 256 << 10
	MaxGitLog       = 200
	MaxCommitMsg    = 16 << 10
)

// GitRequest is the body of POST .../git/commit and .../git/branch, and the
// query of the GET verbs.
type GitRequest struct {
	Repo       string `json:"repo,omitempty"`
	Message    string `json:"message,omitempty"`
	Name       string `json:"name,omitempty"`
	StagedOnly bool   `json:"staged_only,omitempty"`
}

// GitResult answers every git verb.
type GitResult struct {
	Repo      string      `json:"repo"`
	Output    string      `json:"output"`
	Truncated bool        `json:"truncated,omitempty"`
	Commit    string      `json:"commit,omitempty"`
	Branch    string      `json:"branch,omitempty"`
	Entries   []GitCommit `json:"entries,omitempty"`
}

// GitCommit is one entry of git log.
type GitCommit struct {
	ID      string    `json:"id"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
}
