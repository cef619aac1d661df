package api

// BackendInfo is one entry of GET /v1/backends.
type BackendInfo struct {
	Name         string       `json:"name"`
	Default      bool         `json:"default"`
	Capabilities Capabilities `json:"capabilities"`
}

// BackendList is the body of GET /v1/backends.
type BackendList struct {
	Backends []BackendInfo `json:"backends"`
}
