package api

import "time"

// Limits on credential grants.
const (
	MaxGrantsPerSession    = 16
	MaxGrantHosts          = 16
	MaxGrantValueBytes     = 8 << 10
	MaxGrantTTLSeconds     = 86400
	DefaultGrantTTLSeconds = 3600
	// DefaultGrantHeader is the header a grant sets when it names none.
	DefaultGrantHeader = "Authorization"
)

// GrantRequest is the body of POST .../grants. Exactly one of Value and
// SecretRef is given.
type GrantRequest struct {
	SecretRef  string   `json:"secret_ref,omitempty"`
	Value      string   `json:"value,omitempty"`
	Hosts      []string `json:"hosts"`
	Methods    []string `json:"methods,omitempty"`
	Paths      []string `json:"paths,omitempty"`
	Header     string   `json:"header,omitempty"`
	TTLSeconds int      `json:"ttl_seconds,omitempty"`
}

// Grant is a credential grant as the API shows it: never its value.
type Grant struct {
	ID        string    `json:"id"`
	SecretRef string    `json:"secret_ref,omitempty"`
	Hosts     []string  `json:"hosts"`
	Methods   []string  `json:"methods,omitempty"`
	Paths     []string  `json:"paths,omitempty"`
	Header    string    `json:"header"`
	ExpiresAt time.Time `json:"expires_at"`
}
