// Package workspace is a session's workspace as the API serves it: the
// files routes (list, read, write, delete, ranged reads), resumable
// uploads, and the git verbs (status, diff, log, commit, branch). It is a
// sibling of the session core (hostd/session): it imports the core and
// works through the core's surface for siblings (hostd/session/core.go,
// walk.go), and the core never imports it. A file change (a write, a
// delete, an upload's completion) and every git verb walk the core's
// command pipeline (Manager.WalkVerb) through the steps they have, the
// same named steps and command hooks an exec walks; reads (list, read, a
// range, an upload's record) do not change the sandbox and go straight to
// the guest.
//
// The workspace's shape at create (its path and mode, the read-only
// confinement, the clone of workspace.git) stays in the core: it is part
// of create, and every exec and job needs the confinement it gives.
package workspace

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
)

// Service is the workspace of the sessions of one Manager.
type Service struct {
	m *session.Manager
}

// New makes the workspace service of m. It has no side effects;
// hostd/daemon hands it to the API.
func New(m *session.Manager) *Service { return &Service{m: m} }

// The core's names this package uses.
type (
	Session     = session.Session
	BudgetError = session.BudgetError
	Pipe        = session.Pipe
)

var (
	ErrBadRequest = session.ErrBadRequest
	ErrConflict   = session.ErrConflict
	ErrForbidden  = session.ErrForbidden
	ErrNotFound   = session.ErrNotFound
	ErrTooLarge   = session.ErrTooLarge

	bad      = session.BadRequest
	guestErr = session.GuestError
	clipText = session.ClipText
)

// The public wire types (package api), kept under these names here.
type (
	FileWrite = apiv1.FileWrite
	FileRead  = apiv1.FileRead
	FileRange = apiv1.FileRange
)

// MaxFileWriteBytes bounds one PUT of file content (decoded).
const MaxFileWriteBytes = apiv1.MaxFileWriteBytes

// reader returns a running session's guest client, for reading (a write
// walks the pipeline, or uses writeTarget or machineForWrite).
func (w *Service) reader(ctx context.Context, tenant, id string) (*client.Client, error) {
	_, mc, err := w.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return session.Guest(mc), nil
}

// machineForWrite is reader for a change to the sandbox's files outside
// the pipeline (an upload's chunk or abort): it is refused while a
// lifecycle operation holds the session, and counted in flight until done
// is called, so a restore or fork that comes while it runs is refused
// rather than replacing the machine under it.
func (w *Service) machineForWrite(ctx context.Context, tenant, id string) (c *client.Client, done func(), err error) {
	_, mc, err := w.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	done, err = w.m.WorkSlot(id)
	if err != nil {
		return nil, nil, err
	}
	return session.Guest(mc), done, nil
}

// ListFiles lists a directory or stats a file.
func (w *Service) ListFiles(ctx context.Context, tenant, id, path string) (*api.Listing, error) {
	c, err := w.reader(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	l, err := c.List(ctx, path)
	if err != nil {
		return nil, guestErr(err)
	}
	return l, nil
}

// ReadFile returns a file's content.
func (w *Service) ReadFile(ctx context.Context, tenant, id, path string) (*FileRead, error) {
	c, err := w.reader(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	f, err := c.ReadFile(ctx, path)
	if err != nil {
		return nil, guestErr(err)
	}
	return &FileRead{Path: f.Path, ContentBase64: base64.StdEncoding.EncodeToString(f.Content), Mode: f.Mode, Size: len(f.Content)}, nil
}

// WriteFile writes a file and ledgers its path and size (never content).
func (w *Service) WriteFile(ctx context.Context, tenant, id string, req FileWrite) (*api.FileInfo, error) {
	var (
		data []byte
		fi   *api.FileInfo
	)
	err := w.m.WalkVerb(ctx, session.CommandFile, tenant, id, "write", req.Path,
		session.NewStep(session.StepValidate, func(context.Context, Pipe) error {
			if base64.StdEncoding.DecodedLen(len(req.ContentBase64)) > MaxFileWriteBytes+3 {
				return fmt.Errorf("%w: content is larger than %d bytes; use uploads", ErrTooLarge, MaxFileWriteBytes)
			}
			var err error
			if data, err = base64.StdEncoding.DecodeString(req.ContentBase64); err != nil {
				return bad("content_base64 is not valid base64: %v", err)
			}
			return nil
		}),
		session.LoadRunningStep(),
		session.GateWriteStep(req.Path),
		session.NewStep(session.StepAdmit, func(ctx context.Context, p Pipe) error {
			return w.admitWrite(ctx, tenant, id, p.Guest(), int64(len(data)), "file write")
		}),
		session.HooksStep("file"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			deny, exec := session.WriteGuard(p.Session())
			var err error
			if fi, err = p.Guest().WriteFile(ctx, api.FileContent{Path: req.Path, Content: data, Mode: req.Mode, Parents: req.Parents, Deny: deny, Exec: exec}); err != nil {
				// Cut off on the way (not the agent's refusal), it may
				// have written the file: ledgered as interrupted.
				return p.RunCutOff(err)
			}
			p.Started()
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p Pipe) error {
			if p.CutOff() {
				w.m.LedgerAppend(ctx, id, "file.write", p.WithNotes(p.WithCutOff(map[string]any{"path": path.Clean(req.Path), "size": len(data)})))
				return nil
			}
			w.m.LedgerAppend(ctx, id, "file.write", p.WithNotes(map[string]any{"path": fi.Path, "size": len(data)}))
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// DeleteFile removes a file or (recursive) a directory.
func (w *Service) DeleteFile(ctx context.Context, tenant, id, path string, recursive bool) error {
	return w.m.WalkVerb(ctx, session.CommandFile, tenant, id, "delete", path,
		session.LoadRunningStep(),
		session.GateWriteStep(path),
		session.HooksStep("file"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			deny, exec := session.WriteGuard(p.Session())
			if err := p.Guest().DeleteFileGuarded(ctx, path, recursive, deny, exec); err != nil {
				return p.RunCutOff(err) // cut off, it may have deleted: ledgered as interrupted
			}
			p.Started()
			return nil
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p Pipe) error {
			w.m.LedgerAppend(ctx, id, "file.delete", p.WithNotes(p.WithCutOff(map[string]any{"path": path, "recursive": recursive})))
			return nil
		}),
	)
}

// ReadRange reads up to 4 MiB of a file.
func (w *Service) ReadRange(ctx context.Context, tenant, id, path string, offset, length int64, checksum bool) (*FileRange, error) {
	c, err := w.reader(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	r, err := c.ReadRange(ctx, path, offset, length, checksum)
	if err != nil {
		return nil, guestErr(err)
	}
	return &FileRange{Path: r.Path, Offset: r.Offset, DataBase64: base64.StdEncoding.EncodeToString(r.Data), Length: len(r.Data), Size: r.Size, EOF: r.EOF, SHA256: r.SHA256}, nil
}

// admitWrite is the budget's check of a write of n bytes into session
// id, as the caller with tenant sees it (Manager.AdmitWrite).
func (w *Service) admitWrite(ctx context.Context, tenant, id string, c *client.Client, n int64, what string) error {
	s, err := w.m.Load(ctx, tenant, id)
	if err != nil {
		return err
	}
	return w.m.AdmitWrite(ctx, s, c, n, what)
}

// writeTarget is reader for a write of p outside the pipeline (an
// upload's open): it also refuses paths that would change a read-only
// workspace (session.RefuseReadOnly, for a clear message); the write
// itself carries session.WriteGuard's lists to the agent, which is the
// check that holds against links changed in between. The agent itself
// writes as the guest user and never under the image's system
// directories (api.SystemDirs).
func (w *Service) writeTarget(ctx context.Context, tenant, id, p string) (c *client.Client, done func(), err error) {
	s, mc, err := w.m.Running(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	// Refused while a lifecycle operation holds the session, and counted
	// in flight until done, so a restore or fork waits for it.
	done, err = w.m.WorkSlot(id)
	if err != nil {
		return nil, nil, err
	}
	c = session.Guest(mc)
	if err := session.RefuseReadOnly(ctx, c, s, p); err != nil {
		done()
		return nil, nil, err
	}
	return c, done, nil
}

// pathWithin reports whether p is dir or lies under it (both clean and
// absolute).
func pathWithin(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
