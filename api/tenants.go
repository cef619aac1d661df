package api

// TenantList is the body of GET /v1/admin/tenants: the tenants file's
// tenants in file order. No token or token hash is in it.
type TenantList struct {
	Tenants []TenantInfo `json:"tenants"`
}

// TenantInfo is one tenant as the admin sees it.
type TenantInfo struct {
	Name string `json:"name"`
	// Limits are what the tenant's live sandboxes may hold together, as
	// the file sets them (default_limits filled in); 0 is the daemon's
	// built-in default.
	Limits TenantLimits `json:"limits"`
	// Sessions counts the tenant's sessions and sandboxes not deleted.
	Sessions int `json:"sessions"`
}

// TenantLimits is a tenant's limits (hostd/auth.Limits).
type TenantLimits struct {
	DiskMB   int64   `json:"disk_mb,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
}
