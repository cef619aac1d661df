package api

import (
	"time"

	guestapi "paddock.dev/paddock/guest/api"
)

// MaxFileWriteBytes bounds one PUT of file content (decoded).
const MaxFileWriteBytes = guestapi.MaxFileWriteBytes

// Upload limits and states.
const (
	MaxUploadBytes = guestapi.MaxUploadBytes // 2 GiB
	MaxUploadChunk = guestapi.MaxPartBytes   // 4 MiB, one PUT of an upload
	UploadOpen     = "open"
	UploadComplete = "complete"
)

// FileWrite is the body of PUT .../files/content.
type FileWrite struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
	Mode          string `json:"mode,omitempty"`
	Parents       *bool  `json:"parents,omitempty"`
}

// FileRead answers GET .../files/content.
type FileRead struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64"`
	Mode          string `json:"mode"`
	Size          int    `json:"size"`
}

// FileRange answers GET .../files/range.
type FileRange struct {
	Path       string `json:"path"`
	Offset     int64  `json:"offset"`
	DataBase64 string `json:"data_base64"`
	Length     int    `json:"length"`
	Size       int64  `json:"size"`
	EOF        bool   `json:"eof"`
	SHA256     string `json:"sha256,omitempty"`
}

// JobStart is the body of POST .../jobs.
type JobStart struct {
	Command        string `json:"command"`
	Stdin          bool   `json:"stdin,omitempty"`
	MaxOutputBytes int64  `json:"max_output_bytes,omitempty"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
	// ApprovalID and ApprovalWaitSeconds: as on ExecRequest.
	ApprovalID          string `json:"approval_id,omitempty"`
	ApprovalWaitSeconds int    `json:"approval_wait_seconds,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	guestapi.Job
	Command string `json:"command"`
	Engine  string `json:"engine"`
}

// JobRead answers GET .../jobs/{job}.
type JobRead struct {
	Job
	Output           string `json:"output"`
	OutputBase64     string `json:"output_base64"`
	NextOffset       int64  `json:"next_offset"`
	Stderr           string `json:"stderr"`
	StderrNextOffset int64  `json:"stderr_next_offset"`
	More             bool   `json:"more"`
	EOF              bool   `json:"eof"`
	Truncated        bool   `json:"truncated"`
}

// JobStdin is the body of POST .../jobs/{job}/stdin.
type JobStdin struct {
	Text       string `json:"text,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
	Close      bool   `json:"close,omitempty"`
}

// UploadRequest is the body of POST .../uploads.
type UploadRequest struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Parents *bool  `json:"parents,omitempty"`
}

// Upload is an upload's record, kept on the host so it survives a daemon
// restart; Received is the byte to continue from.
type Upload struct {
	ID        string    `json:"id"`
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	Parents   *bool     `json:"parents,omitempty"`
	Received  int64     `json:"received"`
	Parts     int       `json:"parts"`
	State     string    `json:"state"`
	Verified  bool      `json:"verified"`
	CreatedAt time.Time `json:"created_at"`
}
