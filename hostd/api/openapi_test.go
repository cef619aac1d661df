package api_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	apiv1 "paddock.dev/paddock/api"
	guestapi "paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/api"
	"paddock.dev/paddock/hostd/api/routes"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/speculate"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/procbox"
	"paddock.dev/paddock/internal/testutil"
	"paddock.dev/paddock/policy"
)

// The tests in this file keep docs/api/openapi.yaml and the code from
// drifting apart: the routes, every schema against the Go type it
// describes (json names both ways, required, types, nested schemas), the
// shape of every operation, the $refs, and the limits the code enforces.

// Bodies hostd/api builds as map literals. These structs mirror them so
// their schemas are checked like the others; the handler named beside
// each is what to compare when one changes.
type (
	errorBody struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	} // writeError, and SSE error events
	healthBody struct {
		OK bool `json:"ok"`
	} // GET /healthz
	sessionList struct {
		Sessions []*apiv1.Session `json:"sessions"` // list
	}
	uploadList struct {
		Uploads []*apiv1.Upload `json:"uploads"` // listUploads
	}
	jobList struct {
		Jobs []apiv1.Job `json:"jobs"` // listJobs
	}
	grantList struct {
		Grants []apiv1.Grant `json:"grants"` // listGrants
	}
	tokenList struct {
		Tokens []apiv1.SessionToken `json:"tokens"` // listTokens
	}
	previewList struct {
		Previews []apiv1.Preview `json:"previews"` // listPreviews
	}
	approvalList struct {
		Approvals []apiv1.Approval `json:"approvals"` // listApprovals
	}
	heldBody struct { // policyError, a command held for approval (428)
		Error string `json:"error"`
		Code  string `json:"code"`
		apiv1.Hold
	}
	refusedBody struct { // policyError, a command the process policy refuses (403)
		Error   string `json:"error"`
		Code    string `json:"code"`
		Rule    string `json:"rule,omitempty"`
		Pattern string `json:"pattern,omitempty"`
		Piece   string `json:"piece,omitempty"`
	}
	sandboxList struct {
		Sandboxes []*apiv1.Sandbox `json:"sandboxes"` // listSandboxes
	}
	budgetExceededBody struct { // budgetError, a budget limit reached (403)
		Error  string  `json:"error"`
		Code   string  `json:"code"`
		Budget string  `json:"budget"`
		Limit  int64   `json:"limit"`
		Used   float64 `json:"used"`
	}
	streamLimitedBody struct { // streamLimitError, a stream cap reached (429)
		Error string `json:"error"`
		Code  string `json:"code"`
		Limit int    `json:"limit"`
	}
	commandRefusedBody struct { // the 403 of exec and jobs: error, code, and one of the two above's fields
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	jobStartEvent struct { // execStream, event start
		Job string `json:"job"`
	}
	jobOutputEvent struct { // streamJob, event output
		Offset       int64  `json:"offset"`
		NextOffset   int64  `json:"next_offset"`
		Output       string `json:"output"`
		OutputBase64 string `json:"output_base64"`
	}
	jobStderrEvent struct { // streamJob, event stderr
		Offset     int64  `json:"offset"`
		NextOffset int64  `json:"next_offset"`
		Stderr     string `json:"stderr"`
	}
	jobExitEvent struct { // streamJob, event exit
		ExitCode *int   `json:"exit_code"`
		State    string `json:"state"`
		Signal   string `json:"signal"`
	}
)

// direction says which way a schema's body travels.
type direction int

const (
	// out: an answer. Its required list must be exactly the fields
	// without omitempty (they are always sent).
	out direction = iota + 1
	// in: a request body. Unknown fields are refused (400), so it must
	// say additionalProperties: false.
	in
	// both: a type used in requests and answers (additionalProperties:
	// false; required is left to the document).
	both
)

// openAPISchemas lists every entry of components/schemas with the Go
// value it describes. An entry with no Go value says why in note.
var openAPISchemas = []struct {
	name string
	goV  any
	dir  direction
	note string
}{
	{name: "Error", goV: errorBody{}, dir: out},
	{name: "Health", goV: healthBody{}, dir: out},
	{name: "QueryBool", note: "a query parameter's values (queryBool in api.go), not a body"},

	{name: "Session", goV: apiv1.Session{}, dir: out},
	{name: "Runtime", goV: apiv1.Runtime{}, dir: both},
	{name: "Workspace", goV: apiv1.Workspace{}, dir: out},
	{name: "Checkpoint", goV: apiv1.Checkpoint{}, dir: out},
	{name: "Usage", goV: apiv1.Usage{}, dir: out},
	{name: "Capabilities", goV: apiv1.Capabilities{}, dir: out},
	{name: "CreateRequest", goV: apiv1.CreateRequest{}, dir: in},
	{name: "WorkspaceRequest", goV: apiv1.WorkspaceRequest{}, dir: in},
	{name: "PolicyInput", goV: apiv1.PolicyRequest{}, dir: in},
	{name: "PolicyNetwork", goV: apiv1.Network{}, dir: in},
	{name: "AllowEntry", goV: apiv1.AllowEntry{}, dir: in},
	{name: "Policy", goV: apiv1.Policy{}, dir: out},
	{name: "ProcessRules", goV: apiv1.ProcessRules{}, dir: in},
	{name: "SessionList", goV: sessionList{}, dir: out},

	{name: "ExecRequest", goV: apiv1.ExecRequest{}, dir: in},
	{name: "Held", goV: heldBody{}, dir: out},
	{name: "PolicyStatus", goV: policy.Status{}, dir: out},
	{name: "PolicyRefused", goV: refusedBody{}, dir: out},
	{name: "Approval", goV: apiv1.Approval{}, dir: out},
	{name: "ApprovalList", goV: approvalList{}, dir: out},
	{name: "ApprovalDecision", goV: apiv1.Decision{}, dir: in},
	{name: "ExecResult", goV: apiv1.ExecResult{}, dir: out},
	{name: "SpeculateRequest", goV: apiv1.SpeculateRequest{}, dir: in},
	{name: "ChangesetFile", goV: apiv1.ChangesetFile{}, dir: out},
	{name: "SideEffects", goV: apiv1.SideEffects{}, dir: out},
	{name: "Changeset", goV: apiv1.Changeset{}, dir: out},
	{name: "ChangesetList", goV: apiv1.ChangesetList{}, dir: out},
	{name: "ChangesetDecision", goV: apiv1.ChangesetDecision{}, dir: in},
	{name: "ApplyResult", goV: apiv1.ApplyResult{}, dir: out},
	{name: "ReplayRequest", goV: apiv1.ReplayRequest{}, dir: in},
	{name: "ReplayStep", goV: apiv1.ReplayStep{}, dir: out},
	{name: "ReplaySkipped", goV: apiv1.ReplaySkipped{}, dir: out},
	{name: "ReplayStop", goV: apiv1.ReplayStop{}, dir: out},
	{name: "ReplayResult", goV: apiv1.ReplayResult{}, dir: out},
	{name: "Budget", goV: apiv1.Budget{}, dir: both},
	{name: "InterruptedOp", goV: apiv1.InterruptedOp{}, dir: out},
	{name: "BudgetExceeded", goV: budgetExceededBody{}, dir: out},
	{name: "CommandRefused", goV: commandRefusedBody{}, dir: out},
	{name: "StreamLimited", goV: streamLimitedBody{}, dir: out},

	{name: "CheckpointRequest", goV: apiv1.CheckpointRequest{}, dir: in},
	{name: "RestoreRequest", goV: apiv1.RestoreRequest{}, dir: in},
	{name: "ForkRequest", goV: apiv1.ForkRequest{}, dir: in},
	{name: "ForkResult", goV: apiv1.ForkResult{}, dir: out},
	{name: "ForkNotCarried", goV: apiv1.ForkNotCarried{}, dir: out},
	{name: "ChildIdentity", goV: apiv1.ChildIdentity{}, dir: out},
	{name: "VMEvent", goV: apiv1.VMEvent{}, dir: out},
	{name: "Artifacts", goV: apiv1.Artifacts{}, dir: out},
	{name: "PromoteRequest", goV: apiv1.PromoteRequest{}, dir: in},
	{name: "PromoteChange", goV: apiv1.PromoteChange{}, dir: out},
	{name: "PromoteConflict", goV: apiv1.PromoteConflict{}, dir: out},
	{name: "NotCarried", goV: apiv1.NotCarried{}, dir: out},
	{name: "PromotePlan", goV: apiv1.PromotePlan{}, dir: out},
	{name: "PromoteResult", goV: apiv1.PromoteResult{}, dir: out},

	{name: "LedgerEntry", goV: apiv1.LedgerEntry{}, dir: out},
	{name: "Events", goV: apiv1.Events{}, dir: out},
	{name: "Step", goV: apiv1.Step{}, dir: out},
	{name: "Trajectory", goV: apiv1.Trajectory{}, dir: out},

	{name: "GitRequest", goV: apiv1.GitRequest{}, dir: in},
	{name: "GitResult", goV: apiv1.GitResult{}, dir: out},
	{name: "GitCommit", goV: apiv1.GitCommit{}, dir: out},

	{name: "Probe", goV: guestapi.Probe{}, dir: out},

	{name: "UploadRequest", goV: apiv1.UploadRequest{}, dir: in},
	{name: "Upload", goV: apiv1.Upload{}, dir: out},
	{name: "UploadList", goV: uploadList{}, dir: out},

	{name: "GrantRequest", goV: apiv1.GrantRequest{}, dir: in},
	{name: "Grant", goV: apiv1.Grant{}, dir: out},
	{name: "GrantList", goV: grantList{}, dir: out},

	{name: "TokenRequest", goV: apiv1.TokenRequest{}, dir: in},
	{name: "SessionToken", goV: apiv1.SessionToken{}, dir: out},
	{name: "TokenList", goV: tokenList{}, dir: out},
	{name: "WhoAmI", goV: apiv1.WhoAmI{}, dir: out},
	{name: "BackendList", goV: apiv1.BackendList{}, dir: out},
	{name: "BackendInfo", goV: apiv1.BackendInfo{}, dir: out},
	{name: "PolicyCompileRequest", goV: apiv1.PolicyCompileRequest{}, dir: in},
	{name: "PolicyCompile", goV: apiv1.PolicyCompile{}, dir: out},
	{name: "PolicyRefusal", goV: apiv1.PolicyRefusal{}, dir: out},
	{name: "TenantList", goV: apiv1.TenantList{}, dir: out},
	{name: "TenantInfo", goV: apiv1.TenantInfo{}, dir: out},
	{name: "TenantLimits", goV: apiv1.TenantLimits{}, dir: out},

	{name: "PreviewRequest", goV: apiv1.PreviewRequest{}, dir: in},
	{name: "Preview", goV: apiv1.Preview{}, dir: out},
	{name: "PreviewList", goV: previewList{}, dir: out},

	{name: "RewindConfigRequest", goV: apiv1.RewindConfigRequest{}, dir: in},
	{name: "RewindConfig", goV: apiv1.RewindConfig{}, dir: out},
	{name: "RewindPoint", goV: apiv1.RewindPoint{}, dir: out},
	{name: "Rewind", goV: apiv1.Rewind{}, dir: out},
	{name: "RewindUndoRequest", goV: apiv1.RewindUndoRequest{}, dir: in},
	{name: "RewindUndo", goV: apiv1.RewindUndo{}, dir: out},
	{name: "RewindPinRequest", goV: apiv1.RewindPinRequest{}, dir: in},
	{name: "RewindBisectRequest", goV: apiv1.RewindBisectRequest{}, dir: in},
	{name: "RewindBisectState", goV: apiv1.RewindBisectState{}, dir: out},
	{name: "RewindBisect", goV: apiv1.RewindBisect{}, dir: out},
	{name: "RewindBranchRequest", goV: apiv1.RewindBranchRequest{}, dir: in},
	{name: "RewindBranch", goV: apiv1.RewindBranch{}, dir: out},

	{name: "TerminalTicket", goV: apiv1.TerminalTicket{}, dir: out},
	{name: "TerminalResize", goV: apiv1.TerminalResize{}, dir: in},
	{name: "TerminalSize", goV: apiv1.TerminalSize{}, dir: in},

	{name: "FileInfo", goV: guestapi.FileInfo{}, dir: out},
	{name: "Listing", goV: guestapi.Listing{}, dir: out},
	{name: "FileRead", goV: apiv1.FileRead{}, dir: out},
	{name: "FileWrite", goV: apiv1.FileWrite{}, dir: in},
	{name: "FileRange", goV: apiv1.FileRange{}, dir: out},

	{name: "JobStart", goV: apiv1.JobStart{}, dir: in},
	{name: "ConfineReport", goV: guestapi.ConfineReport{}, dir: out},
	{name: "Job", goV: apiv1.Job{}, dir: out},
	{name: "JobList", goV: jobList{}, dir: out},
	{name: "JobRead", goV: apiv1.JobRead{}, dir: out},
	{name: "JobStdin", goV: apiv1.JobStdin{}, dir: in},
	{name: "JobStartEvent", goV: jobStartEvent{}, dir: out},
	{name: "JobOutputEvent", goV: jobOutputEvent{}, dir: out},
	{name: "JobStderrEvent", goV: jobStderrEvent{}, dir: out},
	{name: "JobExitEvent", goV: jobExitEvent{}, dir: out},

	{name: "SandboxRequest", goV: apiv1.SandboxRequest{}, dir: in},
	{name: "Sandbox", goV: apiv1.Sandbox{}, dir: out},
	{name: "SandboxList", goV: sandboxList{}, dir: out},
	{name: "ProcessRequest", goV: apiv1.ProcessRequest{}, dir: in},
	{name: "ProcessResult", goV: apiv1.ProcessResult{}, dir: out},
	{name: "SandboxPath", goV: apiv1.SandboxPath{}, dir: in},
	{name: "SandboxFile", goV: apiv1.SandboxFile{}, dir: out},
	{name: "SandboxWrite", goV: apiv1.SandboxWrite{}, dir: in},
	{name: "SandboxWritten", goV: apiv1.SandboxWritten{}, dir: out},
}

// openAPILimits ties values in the document (by JSON pointer) to what the
// code enforces. Numbers compare as integers, []string as sets (enums).
// Literals stand where the code has no exported constant.
var openAPILimits = []struct {
	ptr  string
	want any
}{
	{"components/schemas/CreateRequest/properties/agent/maxLength", apiv1.MaxAgentName},
	{"components/schemas/SpeculateRequest/properties/command/maxLength", apiv1.MaxSpeculateCommandBytes},
	{"components/schemas/SpeculateRequest/properties/paths/maxItems", apiv1.MaxSpeculatePaths},
	{"components/schemas/SpeculateRequest/properties/paths/items/maxLength", speculate.MaxPathBytes},
	{"components/schemas/SpeculateRequest/properties/cwd/maxLength", speculate.MaxCwdBytes},
	{"components/schemas/SpeculateRequest/properties/timeout_seconds/maximum", apiv1.MaxSpeculateTimeoutSeconds},
	{"components/schemas/SpeculateRequest/properties/timeout_seconds/default", apiv1.DefaultSpeculateTimeoutSeconds},
	{"components/schemas/ChangesetDecision/properties/reason/maxLength", speculate.MaxReasonBytes},
	{"components/schemas/Changeset/properties/status/enum", []string{apiv1.ChangesetPending, apiv1.ChangesetApproved, apiv1.ChangesetRejected, apiv1.ChangesetApplied}},
	{"components/schemas/CreateRequest/properties/ttl_seconds/maximum", apiv1.MaxTTLSeconds},
	{"components/schemas/CreateRequest/properties/ttl_seconds/default", apiv1.DefaultTTLSeconds},
	{"components/schemas/WorkspaceRequest/properties/path/maxLength", apiv1.MaxWorkspacePath},
	{"components/schemas/WorkspaceRequest/properties/lower/maxLength", apiv1.MaxWorkspacePath},
	{"components/schemas/WorkspaceRequest/properties/git/maxLength", apiv1.MaxGitURL},
	{"components/schemas/WorkspaceRequest/properties/mode/enum", []string{"", apiv1.ModeWritable, apiv1.ModeClone, apiv1.ModeReadOnly, apiv1.ModeOverlay}},
	{"components/schemas/Workspace/properties/mode/enum", []string{"", apiv1.ModeWritable, apiv1.ModeReadOnly, apiv1.ModeOverlay}},
	{"components/schemas/Session/properties/state/enum", []string{apiv1.StateRunning, apiv1.StateExpired, apiv1.StateGone, apiv1.StateLost, apiv1.StateDeleted}},
	{"components/schemas/Session/properties/kind/enum", []string{apiv1.KindSandbox}},

	{"components/schemas/ExecRequest/properties/command/maxLength", apiv1.MaxCommandBytes},
	{"components/schemas/ExecRequest/properties/timeout_seconds/maximum", apiv1.MaxExecTimeout},
	{"components/schemas/ExecRequest/properties/timeout_seconds/default", apiv1.DefaultExecTimeout},

	{"components/schemas/Budget/properties/max_execs/maximum", apiv1.MaxBudgetExecs},
	{"components/schemas/Budget/properties/max_exec_seconds/maximum", apiv1.MaxBudgetSeconds},
	{"components/schemas/Budget/properties/max_compute_seconds/maximum", apiv1.MaxBudgetSeconds},
	{"components/schemas/Budget/properties/max_jobs/maximum", apiv1.MaxBudgetJobs},
	{"components/schemas/Budget/properties/max_concurrent_jobs/maximum", apiv1.MaxBudgetConcurrentJobs},
	{"components/schemas/Budget/properties/max_children/maximum", apiv1.MaxBudgetChildren},
	{"components/schemas/Budget/properties/max_output_bytes/maximum", apiv1.MaxBudgetOutputBytes},
	{"components/schemas/Budget/properties/max_workspace_bytes/maximum", apiv1.MaxBudgetWorkspaceBytes},

	{"components/schemas/CheckpointRequest/properties/tag/maxLength", apiv1.MaxTagLen},
	{"components/schemas/ForkRequest/properties/count/maximum", hypervisor.MaxForkChildren},
	{"components/schemas/PromoteRequest/properties/paths/maxItems", apiv1.MaxPromotePaths},
	{"components/schemas/PromotePlan/properties/apply/maxItems", apiv1.MaxPromoteChanges},
	{"components/schemas/PromoteChange/properties/op/enum", []string{apiv1.PromoteAdded, apiv1.PromoteModified, apiv1.PromoteDeleted}},

	{"components/schemas/GitRequest/properties/message/maxLength", apiv1.MaxCommitMsg},
	{"components/parameters/GitLogN/schema/maximum", apiv1.MaxGitLog},
	{"components/parameters/EventsLimit/schema/maximum", session.MaxEventsPage},
	{"components/parameters/EventsTail/schema/maximum", session.MaxEventsPage},

	{"components/schemas/UploadRequest/properties/size/maximum", apiv1.MaxUploadBytes},
	{"components/parameters/UploadOffset/schema/maximum", apiv1.MaxUploadBytes},
	{"components/schemas/Upload/properties/state/enum", []string{apiv1.UploadOpen, apiv1.UploadComplete}},

	{"components/schemas/FileWrite/properties/content_base64/maxLength", base64.StdEncoding.EncodedLen(apiv1.MaxFileWriteBytes)},
	{"components/schemas/FileRead/properties/size/maximum", guestapi.MaxFileReadBytes},
	{"components/parameters/RangeLength/schema/maximum", guestapi.MaxRangeBytes},
	{"components/parameters/RangeLength/schema/default", guestapi.MaxRangeBytes},
	{"components/schemas/FileRange/properties/length/maximum", guestapi.MaxRangeBytes},
	{"components/parameters/RangeOffset/schema/maximum", 1 << 40},
	{"components/schemas/FileInfo/properties/type/enum", []string{guestapi.TypeFile, guestapi.TypeDir, guestapi.TypeSymlink, guestapi.TypeOther}},
	{"components/schemas/Listing/properties/entries/maxItems", guestapi.MaxListEntries},

	{"components/schemas/JobStart/properties/command/maxLength", apiv1.MaxCommandBytes},
	{"components/schemas/JobStart/properties/max_output_bytes/maximum", guestapi.MaxMaxOutputBytes},
	{"components/schemas/JobStart/properties/timeout_seconds/maximum", guestapi.MaxTimeoutSeconds},
	{"components/schemas/JobStdin/properties/text/maxLength", guestapi.MaxStdinWriteBytes},
	{"components/schemas/JobStdin/properties/data_base64/maxLength", base64.StdEncoding.EncodedLen(guestapi.MaxStdinWriteBytes)},
	{"components/schemas/Job/properties/state/enum", []string{guestapi.JobRunning, guestapi.JobExited, guestapi.JobKilled, guestapi.JobSignaled, guestapi.JobTimedOut}},
	{"components/schemas/JobList/properties/jobs/maxItems", guestapi.MaxJobs},
	{"components/parameters/JobWaitMillis/schema/maximum", guestapi.MaxWaitMillis},
	{"components/parameters/JobOffset/schema/maximum", 1 << 40},
	{"components/parameters/JobStderrOffset/schema/maximum", 1 << 40},
	{"components/schemas/StreamLimited/properties/code/enum", []string{api.CodeJobStreamsSession, api.CodeJobStreamsTenant, api.CodeJobStreamsDaemon,
		api.CodeEventStreamsSession, api.CodeEventStreamsTenant, api.CodeEventStreamsDaemon}},

	{"components/schemas/GrantRequest/properties/value/maxLength", apiv1.MaxGrantValueBytes},
	{"components/schemas/GrantRequest/properties/hosts/maxItems", apiv1.MaxGrantHosts},
	{"components/schemas/GrantRequest/properties/ttl_seconds/maximum", apiv1.MaxGrantTTLSeconds},
	{"components/schemas/GrantRequest/properties/ttl_seconds/default", apiv1.DefaultGrantTTLSeconds},
	{"components/schemas/GrantRequest/properties/header/default", apiv1.DefaultGrantHeader},
	{"components/schemas/GrantList/properties/grants/maxItems", apiv1.MaxGrantsPerSession},

	{"components/schemas/TokenRequest/properties/ops/items/enum", apiv1.GrantableOps()},
	{"components/schemas/TokenRequest/properties/ttl_seconds/maximum", apiv1.MaxTokenTTLSeconds},
	{"components/schemas/TokenRequest/properties/ttl_seconds/default", apiv1.DefaultTokenTTLSeconds},
	{"components/schemas/TokenRequest/properties/label/maxLength", apiv1.MaxTokenLabel},
	{"components/schemas/TokenList/properties/tokens/maxItems", apiv1.MaxTokensPerSession},
	{"components/schemas/WhoAmI/properties/kind/enum", []string{apiv1.KindAdmin, apiv1.KindTenant, apiv1.KindSession}},

	{"components/schemas/SandboxRequest/properties/ttl_seconds/maximum", apiv1.MaxTTLSeconds},
	{"components/schemas/SandboxRequest/properties/ttl_seconds/default", apiv1.DefaultSandboxTTLSeconds},
	{"components/schemas/Sandbox/properties/id/pattern", "^" + apiv1.SandboxIDPrefix + "[0-9a-f]{16}$"},
	{"components/schemas/ProcessRequest/properties/command/maxLength", apiv1.MaxCommandBytes},
	{"components/schemas/ProcessRequest/properties/timeout_seconds/maximum", apiv1.MaxExecTimeout},
	{"components/schemas/ProcessRequest/properties/timeout_seconds/default", apiv1.DefaultExecTimeout},
	{"components/schemas/ProcessRequest/properties/env/maxProperties", apiv1.MaxSandboxEnvVars},
	{"components/schemas/ProcessRequest/properties/cwd/maxLength", 4096},
	{"components/schemas/SandboxPath/properties/path/maxLength", 4096},
	{"components/schemas/SandboxWrite/properties/path/maxLength", 4096},
	{"components/schemas/SandboxWrite/properties/content/maxLength", apiv1.MaxSandboxFileBytes},
	{"components/schemas/SandboxWrite/properties/content_base64/maxLength", base64.StdEncoding.EncodedLen(apiv1.MaxSandboxFileBytes)},
	{"components/schemas/SandboxFile/properties/size/maximum", apiv1.MaxSandboxFileBytes},

	{"components/parameters/IdempotencyKey/schema/maxLength", 255},

	{"components/schemas/PreviewRequest/properties/port/maximum", 65535},
	{"components/schemas/PreviewRequest/properties/ttl_seconds/maximum", apiv1.MaxPreviewTTLSeconds},
	{"components/schemas/PreviewRequest/properties/ttl_seconds/default", apiv1.DefaultPreviewTTLSeconds},
	{"components/schemas/PreviewList/properties/previews/maxItems", apiv1.MaxPreviewsPerSession},
	{"components/schemas/RewindConfigRequest/properties/max_points/maximum", apiv1.MaxRewindPoints},
	{"components/schemas/RewindConfig/properties/max_points/default", apiv1.DefaultRewindPoints},
	{"components/schemas/Rewind/properties/points/maxItems", apiv1.MaxRewindPoints},
	{"components/schemas/RewindUndoRequest/properties/steps/maximum", apiv1.MaxRewindPoints},
	{"components/schemas/RewindBisectRequest/properties/timeout_seconds/maximum", apiv1.MaxBisectTimeout},
	{"components/schemas/RewindBisectRequest/properties/timeout_seconds/default", apiv1.DefaultBisectTimeout},
	{"components/schemas/RewindBisectRequest/properties/test/maxLength", apiv1.MaxCommandBytes},
	{"components/schemas/RewindBranchRequest/properties/count/maximum", hypervisor.MaxForkChildren},
	{"components/schemas/RewindBranchRequest/properties/count/default", apiv1.DefaultBranchCount},

	{"components/parameters/TerminalCols/schema/maximum", apiv1.MaxTerminalDim},
	{"components/parameters/TerminalCols/schema/default", apiv1.DefaultTerminalCols},
	{"components/parameters/TerminalRows/schema/maximum", apiv1.MaxTerminalDim},
	{"components/parameters/TerminalRows/schema/default", apiv1.DefaultTerminalRows},
	{"components/parameters/TerminalCommand/schema/maxLength", apiv1.MaxTerminalCommandBytes},
	{"components/schemas/TerminalSize/properties/cols/maximum", apiv1.MaxTerminalDim},
	{"components/schemas/TerminalSize/properties/rows/maximum", apiv1.MaxTerminalDim},

	// The procbox backend's limits, the only backend today.
	{"components/schemas/Runtime/properties/cpus/maximum", procbox.MaxCPUs},
	{"components/schemas/Runtime/properties/memory_mb/maximum", procbox.MaxMemoryMB},
	{"components/schemas/Runtime/properties/disk_mb/maximum", procbox.MaxDiskMB},
	{"components/schemas/SandboxRequest/properties/cpus/maximum", procbox.MaxCPUs},
	{"components/schemas/SandboxRequest/properties/memory_mb/maximum", procbox.MaxMemoryMB},
}

// errorStatuses are the error statuses an operation may list.
var errorStatuses = []string{"400", "401", "403", "404", "409", "412", "413", "422", "428", "429", "500", "502"}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// openAPIDoc is the parsed document.
type openAPIDoc struct {
	root map[string]any
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "docs", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("docs/api/openapi.yaml does not parse: %v", err)
	}
	root, ok := normalize(v).(map[string]any)
	if !ok {
		t.Fatal("docs/api/openapi.yaml is not a mapping")
	}
	if got := root["openapi"]; got != "3.1.0" {
		t.Errorf("openapi: %v, want 3.1.0", got)
	}
	return &openAPIDoc{root: root}
}

// normalize turns every mapping into map[string]any (YAML allows other
// keys: a status written as 200 instead of "200").
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
	}
	return v
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// get follows a JSON pointer (without the leading "#/").
func (d *openAPIDoc) get(ptr string) (any, bool) {
	var cur any = d.root
	for _, seg := range strings.Split(ptr, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m := asMap(cur)
		if m == nil {
			return nil, false
		}
		next, ok := m[seg]
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// deref resolves node when it is a {$ref: ...}; it returns the target and
// the ref ("" when node was not one).
func (d *openAPIDoc) deref(node map[string]any) (map[string]any, string, error) {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node, "", nil
	}
	target, found := d.get(strings.TrimPrefix(ref, "#/"))
	if !strings.HasPrefix(ref, "#/") || !found || asMap(target) == nil {
		return nil, ref, fmt.Errorf("$ref %q does not resolve", ref)
	}
	return asMap(target), ref, nil
}

// schemaName is X for "#/components/schemas/X", else "".
func schemaName(ref string) string {
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok {
		return ""
	}
	return name
}

func (d *openAPIDoc) schemas() map[string]any {
	v, _ := d.get("components/schemas")
	return asMap(v)
}

// flatten returns a schema's properties and required names, with those of
// its allOf members (and $refs) merged in.
func (d *openAPIDoc) flatten(node map[string]any, depth int) (props map[string]map[string]any, required []string, err error) {
	if depth > 10 {
		return nil, nil, fmt.Errorf("allOf/$ref nests too deep")
	}
	node, _, err = d.deref(node)
	if err != nil {
		return nil, nil, err
	}
	props = map[string]map[string]any{}
	for _, member := range asSlice(node["allOf"]) {
		p, r, err := d.flatten(asMap(member), depth+1)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range p {
			props[k] = v
		}
		required = append(required, r...)
	}
	for k, v := range asMap(node["properties"]) {
		props[k] = asMap(v)
	}
	for _, r := range asSlice(node["required"]) {
		required = append(required, fmt.Sprint(r))
	}
	return props, required, nil
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// goField is one JSON field of a Go struct, as encoding/json sees it.
type goField struct {
	name      string
	goPath    string // Go field path, embedded structs included
	typ       reflect.Type
	omitempty bool
	asString  bool // ",string"
	untagged  bool // exported, not embedded, and without a json name
}

// jsonFields lists the JSON fields of struct type t the way encoding/json
// does: embedded structs without a name are followed, "-" is skipped,
// and of fields with one name the shallowest wins (a tagged one among
// equals; two tagged equals cancel out).
func jsonFields(t reflect.Type) map[string]goField {
	type cand struct {
		goField
		depth  int
		tagged bool
	}
	var all []cand
	var walk func(t reflect.Type, depth int, prefix string)
	walk = func(t reflect.Type, depth int, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				et := ft
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					walk(et, depth+1, prefix+t.Name()+".")
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			tagged := name != ""
			if !tagged {
				name = f.Name
			}
			optList := strings.Split(opts, ",")
			all = append(all, cand{goField{
				name: name, goPath: prefix + t.Name() + "." + f.Name, typ: ft,
				omitempty: slices.Contains(optList, "omitempty") || slices.Contains(optList, "omitzero"),
				asString:  slices.Contains(optList, "string"),
				untagged:  !tagged,
			}, depth, tagged})
		}
	}
	walk(t, 0, "")
	byName := map[string][]cand{}
	for _, c := range all {
		byName[c.name] = append(byName[c.name], c)
	}
	outFields := map[string]goField{}
	for name, cs := range byName {
		minDepth := cs[0].depth
		for _, c := range cs {
			minDepth = min(minDepth, c.depth)
		}
		var top, topTagged []cand
		for _, c := range cs {
			if c.depth == minDepth {
				top = append(top, c)
				if c.tagged {
					topTagged = append(topTagged, c)
				}
			}
		}
		switch {
		case len(top) == 1:
			outFields[name] = top[0].goField
		case len(topTagged) == 1:
			outFields[name] = topTagged[0].goField
		}
	}
	return outFields
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestOpenAPIListsEveryRoute compares the route table (hostd/api/routes,
// which the router serves row for row) with the paths
// and methods docs/api/openapi.yaml describes: neither may have one the
// other lacks.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented []string
	paths := asMap(doc.root["paths"])
	for _, p := range sortedKeys(paths) {
		for _, m := range httpMethods {
			if _, ok := asMap(paths[p])[m]; ok {
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	// The route table is what the router serves (TestRouteTableBound).
	var served []string
	for _, rt := range routes.All() {
		served = append(served, rt.Pattern)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if len(served) < 20 {
		t.Fatalf("only %d routes served: the router is wrong", len(served))
	}
	if d := cmp.Diff(served, documented); d != "" {
		t.Errorf("the route table, hostd/api/routes (-), and openapi.yaml (+) differ:\n%s", d)
	}
}

// schemaChecker compares schemas with Go types.
type schemaChecker struct {
	t      *testing.T
	doc    *openAPIDoc
	byType map[reflect.Type]string // Go type → schema name
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// TestOpenAPISchemasMatchGo compares every components/schemas entry with
// the Go type in openAPISchemas: the json names both ways, required (for
// answers), additionalProperties: false (for requests), and each
// property's type, with struct-typed fields $ref-ing their own schema.
func TestOpenAPISchemasMatchGo(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := doc.schemas()
	c := &schemaChecker{t: t, doc: doc, byType: map[reflect.Type]string{}}
	listed := map[string]bool{}
	for _, e := range openAPISchemas {
		if listed[e.name] {
			t.Errorf("openAPISchemas lists %s twice", e.name)
		}
		listed[e.name] = true
		if e.goV != nil {
			c.byType[reflect.TypeOf(e.goV)] = e.name
		} else if e.note == "" {
			t.Errorf("openAPISchemas: %s has neither a Go value nor a note saying why", e.name)
		}
		if _, ok := schemas[e.name]; !ok {
			t.Errorf("openapi.yaml: components/schemas has no %s (openAPISchemas maps it to %T); add it", e.name, e.goV)
		}
	}
	for _, name := range sortedKeys(schemas) {
		if !listed[name] {
			t.Errorf("openapi.yaml: components/schemas/%s is not in openAPISchemas in hostd/api/openapi_test.go; add it with the Go value it describes", name)
		}
	}
	for _, e := range openAPISchemas {
		node := asMap(schemas[e.name])
		if e.goV == nil || node == nil {
			continue
		}
		c.checkSchema(e.name, node, reflect.TypeOf(e.goV), e.dir)
	}
}

func (c *schemaChecker) checkSchema(name string, node map[string]any, gt reflect.Type, dir direction) {
	t := c.t
	where := "components/schemas/" + name
	props, required, err := c.doc.flatten(node, 0)
	if err != nil {
		t.Errorf("openapi.yaml %s: %v", where, err)
		return
	}
	fields := jsonFields(gt)
	for _, fname := range sortedKeys(fields) {
		f := fields[fname]
		if f.untagged {
			t.Errorf("Go %s (%s) has no json tag, so it is sent as %q; give it one", f.goPath, gt, f.name)
		}
		if _, ok := props[fname]; !ok {
			t.Errorf("openapi.yaml %s: property %q is missing (Go field %s of %s)", where, fname, f.goPath, gt)
		}
	}
	for _, pname := range sortedKeys(props) {
		f, ok := fields[pname]
		if !ok {
			t.Errorf("openapi.yaml %s: property %q has no json field in Go type %s; remove it or add the field", where, pname, gt)
			continue
		}
		c.checkType(where+"/properties/"+pname, props[pname], f.typ, f.asString)
	}
	req := map[string]bool{}
	for _, r := range required {
		req[r] = true
		if _, ok := props[r]; !ok {
			t.Errorf("openapi.yaml %s: required names %q, which is not a property", where, r)
		}
	}
	switch dir {
	case out:
		for _, fname := range sortedKeys(fields) {
			f := fields[fname]
			switch {
			case !f.omitempty && !req[fname]:
				t.Errorf("openapi.yaml %s: %q is always sent (Go %s has no omitempty) but is not in required", where, fname, f.goPath)
			case f.omitempty && req[fname]:
				t.Errorf("openapi.yaml %s: %q is in required but Go %s is omitempty, so it may be absent", where, fname, f.goPath)
			}
		}
	case in, both:
		if ap, ok := node["additionalProperties"]; !ok || ap != false {
			t.Errorf("openapi.yaml %s: a request body refuses unknown fields (400), so it needs additionalProperties: false", where)
		}
	}
}

// jsonTypes is the schema's type keyword as a set, without "null".
func jsonTypes(node map[string]any) (types []string, null bool) {
	switch v := node["type"].(type) {
	case string:
		types = []string{v}
	case []any:
		for _, e := range v {
			types = append(types, fmt.Sprint(e))
		}
	}
	types = slices.DeleteFunc(types, func(s string) bool {
		if s == "null" {
			null = true
			return true
		}
		return false
	})
	return types, null
}

// checkType compares one schema node with Go type gt.
func (c *schemaChecker) checkType(where string, node map[string]any, gt reflect.Type, asString bool) {
	t := c.t
	if node == nil {
		t.Errorf("openapi.yaml %s: not a schema object (Go %s)", where, gt)
		return
	}
	nullable := false
	for gt.Kind() == reflect.Pointer {
		gt, nullable = gt.Elem(), true
	}
	if alts, ok := node["oneOf"].([]any); ok {
		// A value with more than one JSON form (an allow entry is a host
		// string or an object): one of the forms must be its schema.
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				if ref, _ := m["$ref"].(string); ref != "" && schemaName(ref) == c.byType[gt] {
					return
				}
			}
		}
		t.Errorf("openapi.yaml %s: oneOf without a $ref to the schema of Go %s", where, gt)
		return
	}
	types, null := jsonTypes(node)
	switch gt.Kind() {
	case reflect.Slice, reflect.Map, reflect.Interface:
		nullable = true
	}
	if null && !nullable {
		t.Errorf("openapi.yaml %s: allows null, but Go %s is never null", where, gt)
	}
	if gt == rawType || gt.Kind() == reflect.Interface {
		return // any JSON value
	}
	ref, _ := node["$ref"].(string)
	want, tabled := c.byType[gt]
	isStruct := gt.Kind() == reflect.Struct && gt != timeType
	switch {
	case ref != "" && !isStruct:
		t.Errorf("openapi.yaml %s: $ref %s, but Go %s is not a struct with a schema", where, ref, gt)
		return
	case ref != "" && !tabled:
		t.Errorf("openapi.yaml %s: $ref %s, but Go %s has no schema in openAPISchemas", where, ref, gt)
		return
	case ref != "" && schemaName(ref) != want:
		t.Errorf("openapi.yaml %s: $ref %s, but Go %s is schema %s", where, ref, gt, want)
		return
	case ref != "":
		return
	case isStruct && tabled:
		t.Errorf("openapi.yaml %s: should be {$ref: \"#/components/schemas/%s\"} (Go %s)", where, want, gt)
		return
	case isStruct:
		t.Errorf("Go %s (at openapi.yaml %s) is a struct with no schema: add one to components/schemas and to openAPISchemas", gt, where)
		return
	}
	var expect string
	switch {
	case asString, gt == timeType, gt.Kind() == reflect.String:
		expect = "string"
	case gt.Kind() == reflect.Slice && gt.Elem().Kind() == reflect.Uint8:
		expect = "string" // base64
	case gt.Kind() == reflect.Bool:
		expect = "boolean"
	case gt.Kind() >= reflect.Int && gt.Kind() <= reflect.Uint64:
		expect = "integer"
	case gt.Kind() == reflect.Float32 || gt.Kind() == reflect.Float64:
		expect = "number"
	case gt.Kind() == reflect.Slice || gt.Kind() == reflect.Array:
		expect = "array"
	case gt.Kind() == reflect.Map:
		expect = "object"
	default:
		t.Errorf("openapi.yaml %s: the test does not know how Go %s (kind %s) is sent as JSON", where, gt, gt.Kind())
		return
	}
	if len(types) != 1 || types[0] != expect {
		t.Errorf("openapi.yaml %s: type %v, but Go %s is sent as %s", where, types, gt, expect)
		return
	}
	switch {
	case gt == timeType:
		if node["format"] != "date-time" {
			t.Errorf("openapi.yaml %s: Go time.Time needs format: date-time", where)
		}
	case expect == "array":
		items := asMap(node["items"])
		if items == nil {
			t.Errorf("openapi.yaml %s: an array needs items (Go %s)", where, gt)
			return
		}
		c.checkType(where+"/items", items, gt.Elem(), false)
	case expect == "object":
		if gt.Key().Kind() != reflect.String {
			t.Errorf("openapi.yaml %s: Go map %s does not have string keys", where, gt)
		}
		ap := asMap(node["additionalProperties"])
		if ap == nil {
			t.Errorf("openapi.yaml %s: a map needs additionalProperties with the values' schema (Go %s)", where, gt)
			return
		}
		c.checkType(where+"/additionalProperties", ap, gt.Elem(), false)
	}
}

// TestOpenAPIOperations checks each operation: an operationId, its path
// parameters, a request body that $refs a request schema, one success
// answer that $refs an answer schema (or is an empty 204, or an event
// stream whose events $ref schemas), and error answers that are the Error
// schema and include what the operation's parameters and body imply.
func TestOpenAPIOperations(t *testing.T) {
	doc := loadOpenAPI(t)
	dirs := map[string]direction{}
	for _, e := range openAPISchemas {
		if e.goV != nil {
			dirs[e.name] = e.dir
		}
	}
	opIDs := map[string]string{}
	paramRE := regexp.MustCompile(`\{([^}/]+)\}`)
	paths := asMap(doc.root["paths"])
	for _, p := range sortedKeys(paths) {
		item := asMap(paths[p])
		for _, method := range httpMethods {
			op := asMap(item[method])
			if op == nil {
				continue
			}
			where := strings.ToUpper(method) + " " + p
			if id, _ := op["operationId"].(string); id == "" {
				t.Errorf("openapi.yaml %s: no operationId", where)
			} else if prev, dup := opIDs[id]; dup {
				t.Errorf("openapi.yaml %s: operationId %s is also %s's", where, id, prev)
			} else {
				opIDs[id] = where
			}

			// Parameters: the path's and the operation's.
			inPath := map[string]bool{}
			headers := map[string]bool{}
			for _, raw := range append(asSlice(item["parameters"]), asSlice(op["parameters"])...) {
				prm, _, err := doc.deref(asMap(raw))
				if err != nil || prm == nil {
					t.Errorf("openapi.yaml %s: parameter: %v", where, err)
					continue
				}
				name, _ := prm["name"].(string)
				switch prm["in"] {
				case "path":
					inPath[name] = true
					if prm["required"] != true {
						t.Errorf("openapi.yaml %s: path parameter %s needs required: true", where, name)
					}
				case "header":
					headers[name] = true
				case "query", "cookie":
				default:
					t.Errorf("openapi.yaml %s: parameter %s has in: %v", where, name, prm["in"])
				}
				if asMap(prm["schema"]) == nil {
					t.Errorf("openapi.yaml %s: parameter %s has no schema", where, name)
				}
			}
			var want []string
			for _, m := range paramRE.FindAllStringSubmatch(p, -1) {
				want = append(want, m[1])
			}
			if !sameSet(want, sortedKeys(inPath)) {
				t.Errorf("openapi.yaml %s: the path has parameters %v but declares %v (in: path)", where, want, sortedKeys(inPath))
			}

			responses := asMap(op["responses"])
			need := map[string]string{} // status → why it must be listed

			// The request body.
			if rb := asMap(op["requestBody"]); rb != nil {
				content := asMap(rb["content"])
				if len(content) == 0 {
					t.Errorf("openapi.yaml %s: requestBody has no content", where)
				}
				for _, mt := range sortedKeys(content) {
					schema := asMap(asMap(content[mt])["schema"])
					switch mt {
					case "application/json":
						ref, _ := schema["$ref"].(string)
						name := schemaName(ref)
						switch dir, ok := dirs[name]; {
						case name == "":
							t.Errorf("openapi.yaml %s: the JSON request body must be {$ref: \"#/components/schemas/...\"}", where)
						case !ok:
							t.Errorf("openapi.yaml %s: the request body $refs %s, which has no Go type in openAPISchemas", where, name)
						case dir == out:
							t.Errorf("openapi.yaml %s: the request body $refs %s, an answer schema (direction out in openAPISchemas)", where, name)
						}
						need["400"] = "a JSON body can be invalid"
						need["413"] = "a JSON body can be over its limit"
					case "application/octet-stream":
						if schema["type"] != "string" {
							t.Errorf("openapi.yaml %s: a raw body's schema needs type: string", where)
						}
					default:
						t.Errorf("openapi.yaml %s: request body of type %s: the test knows application/json and application/octet-stream", where, mt)
					}
				}
			}

			// The success answer (101 for a WebSocket).
			var ok2xx []string
			for code := range responses {
				if isSuccess(code) {
					ok2xx = append(ok2xx, code)
				}
			}
			if len(ok2xx) != 1 {
				t.Errorf("openapi.yaml %s: %d success answers %v, want exactly one", where, len(ok2xx), ok2xx)
			}
			for _, code := range ok2xx {
				if code == "101" {
					checkWebSocket(t, doc, dirs, where, asMap(responses[code]), asMap(op["x-websocket"]))
					continue
				}
				checkSuccess(t, doc, dirs, where+" "+code, code, asMap(responses[code]))
			}

			// What parameters and security imply.
			if headers["If-Match"] {
				need["412"] = "it takes If-Match"
			}
			if headers["Idempotency-Key"] {
				need["409"] = "it takes Idempotency-Key (a first request still running)"
				need["422"] = "it takes Idempotency-Key (reused with another request)"
			}
			if len(want) > 0 {
				need["404"] = "its path has an id"
			}
			if sec, set := op["security"]; !set || len(asSlice(sec)) > 0 {
				need["401"] = "it needs the bearer token"
			}
			for _, code := range sortedKeys(need) {
				if _, ok := responses[code]; !ok {
					t.Errorf("openapi.yaml %s: no %s answer, but %s", where, code, need[code])
				}
			}

			// The error answers.
			for _, code := range sortedKeys(responses) {
				if isSuccess(code) {
					continue
				}
				if !slices.Contains(errorStatuses, code) {
					t.Errorf("openapi.yaml %s: answer %s is not one of %v", where, code, errorStatuses)
					continue
				}
				resp, _, err := doc.deref(asMap(responses[code]))
				if err != nil {
					t.Errorf("openapi.yaml %s %s: %v", where, code, err)
					continue
				}
				// Error, or a schema that carries more beside its message
				// (Held, PolicyRefused): every error body has "error".
				ref, _ := asMap(asMap(asMap(resp["content"])["application/json"])["schema"])["$ref"].(string)
				sch, _ := doc.get("components/schemas/" + schemaName(ref))
				req, _ := asMap(sch)["required"].([]any)
				if len(asMap(resp["content"])) != 1 || ref == "" || !slices.Contains(req, any("error")) {
					t.Errorf("openapi.yaml %s %s: an error answer must be application/json with schema {$ref: \"#/components/schemas/Error\"} (or one whose required fields include error)", where, code)
				}
			}
		}
	}
}

// isSuccess: a 2xx, or 101 (a WebSocket upgrade).
func isSuccess(code string) bool { return strings.HasPrefix(code, "2") || code == "101" }

// checkWebSocket checks a WebSocket operation: a 101 without content, and
// x-websocket describing the messages each way (a text message's schema a
// request schema) and the close codes with their reasons.
func checkWebSocket(t *testing.T, doc *openAPIDoc, dirs map[string]direction, where string, resp, ws map[string]any) {
	t.Helper()
	if len(asMap(resp["content"])) > 0 {
		t.Errorf("openapi.yaml %s 101: a WebSocket upgrade has no content", where)
	}
	if ws == nil {
		t.Errorf("openapi.yaml %s: a 101 needs x-websocket: the messages each way (client, server) and the close codes (close)", where)
		return
	}
	for _, side := range []string{"client", "server"} {
		msgs := asMap(ws[side])
		if len(msgs) == 0 {
			t.Errorf("openapi.yaml %s: x-websocket/%s lists no messages", where, side)
		}
		for _, kind := range sortedKeys(msgs) {
			m := asMap(msgs[kind])
			if kind != "binary" && kind != "text" {
				t.Errorf("openapi.yaml %s: x-websocket/%s/%s: a message is binary or text", where, side, kind)
			}
			if d, _ := m["description"].(string); d == "" {
				t.Errorf("openapi.yaml %s: x-websocket/%s/%s has no description", where, side, kind)
			}
			if sch := asMap(m["schema"]); sch != nil {
				name := schemaName(fmt.Sprint(sch["$ref"]))
				want := in
				if side == "server" {
					want = out
				}
				if dir, ok := dirs[name]; !ok || (dir != want && dir != both) {
					t.Errorf("openapi.yaml %s: x-websocket/%s/%s must $ref a schema with a Go type travelling that way, not %v", where, side, kind, sch["$ref"])
				}
			}
		}
	}
	closes := asSlice(ws["close"])
	if len(closes) == 0 {
		t.Errorf("openapi.yaml %s: x-websocket/close lists no close codes", where)
	}
	for i, c := range closes {
		c := asMap(c)
		code, _ := c["code"].(int)
		r, _ := c["reason"].(string)
		d, _ := c["description"].(string)
		if code < 1000 || code > 4999 || r == "" || d == "" {
			t.Errorf("openapi.yaml %s: x-websocket/close/%d needs a code (1000-4999), a reason and a description", where, i)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// checkSuccess checks one 2xx answer.
func checkSuccess(t *testing.T, doc *openAPIDoc, dirs map[string]direction, where, code string, resp map[string]any) {
	t.Helper()
	resp, _, err := doc.deref(resp)
	if err != nil {
		t.Errorf("openapi.yaml %s: %v", where, err)
		return
	}
	content := asMap(resp["content"])
	if code == "204" {
		if len(content) > 0 {
			t.Errorf("openapi.yaml %s: a 204 has no content", where)
		}
		return
	}
	if len(content) != 1 {
		t.Errorf("openapi.yaml %s: want one media type (application/json or text/event-stream), have %v", where, sortedKeys(content))
		return
	}
	answer := func(what string, node map[string]any) {
		ref, _ := node["$ref"].(string)
		name := schemaName(ref)
		switch dir, ok := dirs[name]; {
		case name == "":
			t.Errorf("openapi.yaml %s: %s must be {$ref: \"#/components/schemas/...\"}", where, what)
		case !ok:
			t.Errorf("openapi.yaml %s: %s $refs %s, which has no Go type in openAPISchemas", where, what, name)
		case dir == in:
			t.Errorf("openapi.yaml %s: %s $refs %s, a request schema (direction in in openAPISchemas)", where, what, name)
		}
	}
	for mt, media := range content {
		media := asMap(media)
		switch mt {
		case "application/json":
			answer("the schema", asMap(media["schema"]))
		case "text/event-stream":
			if asMap(media["schema"])["type"] != "string" {
				t.Errorf("openapi.yaml %s: an event stream's schema needs type: string", where)
			}
			events := asMap(media["x-sse-events"])
			if len(events) == 0 {
				t.Errorf("openapi.yaml %s: an event stream needs x-sse-events: each event's name, description and data schema", where)
			}
			for _, ev := range sortedKeys(events) {
				e := asMap(events[ev])
				if s, _ := e["description"].(string); s == "" {
					t.Errorf("openapi.yaml %s: event %s has no description", where, ev)
				}
				answer("event "+ev+"'s data", asMap(e["data"]))
			}
		default:
			t.Errorf("openapi.yaml %s: media type %s: the test knows application/json and text/event-stream", where, mt)
		}
	}
}

// TestOpenAPIRefs checks that every $ref resolves and every component is
// used.
func TestOpenAPIRefs(t *testing.T) {
	doc := loadOpenAPI(t)
	used := map[string]bool{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				used[ref] = true
				if _, _, err := doc.deref(v); err != nil {
					t.Errorf("openapi.yaml %s: %v", where, err)
				}
			}
			for _, k := range sortedKeys(v) {
				walk(where+"/"+k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", where, i), e)
			}
		}
	}
	walk("", doc.root)
	for _, kind := range []string{"schemas", "parameters", "responses", "headers"} {
		comps, _ := doc.get("components/" + kind)
		for _, name := range sortedKeys(asMap(comps)) {
			if !used["#/components/"+kind+"/"+name] {
				t.Errorf("openapi.yaml components/%s/%s is never $ref'd; use it or remove it", kind, name)
			}
		}
	}
}

// TestOpenAPILimits compares the limits the document states with the
// code's.
func TestOpenAPILimits(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, l := range openAPILimits {
		got, ok := doc.get(l.ptr)
		if !ok {
			t.Errorf("openapi.yaml %s: missing; the code's value is %v", l.ptr, l.want)
			continue
		}
		switch want := l.want.(type) {
		case []string:
			var gotS []string
			for _, e := range asSlice(got) {
				gotS = append(gotS, fmt.Sprint(e))
			}
			sort.Strings(gotS)
			want = slices.Clone(want)
			sort.Strings(want)
			if d := cmp.Diff(want, gotS); d != "" {
				t.Errorf("openapi.yaml %s: the code's values (-) and the document's (+) differ:\n%s", l.ptr, d)
			}
		case string:
			if got != want {
				t.Errorf("openapi.yaml %s: %v, the code's is %q", l.ptr, got, want)
			}
		default:
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("openapi.yaml %s: %v, the code's is %v", l.ptr, got, want)
			}
		}
	}
}

// TestOpenAPIBodiesServed checks the Error and Health schemas against
// bodies the server really sends (they need no session manager).
func TestOpenAPIBodiesServed(t *testing.T) {
	doc := loadOpenAPI(t)
	srv := api.New(nil, sha256.Sum256([]byte("openapi-test-token")), nil)
	for _, tc := range []struct {
		schema, method, path string
		status               int
	}{
		{"Error", http.MethodGet, "/v1/agents/sessions", http.StatusUnauthorized},
		{"Error", http.MethodGet, "/no/such/route", http.StatusNotFound},
		{"Health", http.MethodGet, "/healthz", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.status)
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("%s %s: body %q is not a JSON object: %v", tc.method, tc.path, rec.Body.String(), err)
			continue
		}
		props, _, err := doc.flatten(asMap(doc.schemas()[tc.schema]), 0)
		if err != nil {
			t.Errorf("openapi.yaml components/schemas/%s: %v", tc.schema, err)
			continue
		}
		// Every field sent is a property, and every required property
		// is sent (Error's code among them).
		for k := range body {
			if _, ok := props[k]; !ok {
				t.Errorf("%s %s: sent %q, which components/schemas/%s does not have", tc.method, tc.path, k, tc.schema)
			}
		}
		_, required, _ := doc.flatten(asMap(doc.schemas()[tc.schema]), 0)
		for _, r := range required {
			if _, ok := body[r]; !ok {
				t.Errorf("%s %s: components/schemas/%s requires %s, which was not sent", tc.method, tc.path, tc.schema, r)
			}
		}
	}
}
