package api

import "time"

// Limits on preview URLs.
const (
	MaxPreviewsPerSession    = 16
	MaxPreviewTTLSeconds     = 86400
	DefaultPreviewTTLSeconds = 3600
)

// PreviewTokenPrefix starts every preview token; PreviewPathPrefix every
// preview URL's path (PreviewPathPrefix + token + "/").
const (
	PreviewTokenPrefix = "pvw-"
	PreviewPathPrefix  = "/preview/"
)

// PreviewRequest is the body of POST .../preview.
type PreviewRequest struct {
	Port       int `json:"port"`
	TTLSeconds int `json:"ttl_seconds,omitempty"`
}

// Preview is a preview URL as the API shows it. Token and URL, which
// carries it, are in the answer to the create only; nothing keeps them.
type Preview struct {
	ID        string    `json:"id"`
	Token     string    `json:"token,omitempty"`
	URL       string    `json:"url,omitempty"`
	Port      int       `json:"port"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}
