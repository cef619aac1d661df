package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
)

// Upload limits.
const (
	MaxUploadBytes = apiv1.MaxUploadBytes
	MaxUploadChunk = apiv1.MaxUploadChunk
	MaxOpenUploads = 8
	UploadOpen     = apiv1.UploadOpen
	UploadComplete = apiv1.UploadComplete
)

// The public wire types (package api), kept under these names here.
type (
	UploadRequest = apiv1.UploadRequest
	Upload        = apiv1.Upload
)

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (w *Service) getUpload(ctx context.Context, id, up string) (*Upload, error) {
	row, err := w.m.Store().GetUpload(ctx, id, up)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: upload %s", ErrNotFound, up)
	}
	if err != nil {
		return nil, err
	}
	var u Upload
	return &u, json.Unmarshal(row.Record, &u)
}

func (w *Service) putUpload(ctx context.Context, id string, u *Upload) error {
	raw, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return w.m.Store().PutUpload(ctx, store.UploadRow{SessionID: id, UploadID: u.ID, Record: raw})
}

// OpenUpload starts a resumable upload.
func (w *Service) OpenUpload(ctx context.Context, tenant, id string, req UploadRequest) (*Upload, error) {
	if req.Size < 1 || req.Size > MaxUploadBytes {
		return nil, bad("size %d must be from 1 to %d", req.Size, MaxUploadBytes)
	}
	req.SHA256 = strings.ToLower(req.SHA256)
	if req.SHA256 != "" && !sha256RE.MatchString(req.SHA256) {
		return nil, bad("sha256 must be 64 hexadecimal digits")
	}
	if !strings.HasPrefix(req.Path, "/") || strings.Contains(req.Path, "..") || strings.ContainsAny(req.Path, "\x00\n") || len(req.Path) > 4096 {
		return nil, bad("path %q must be absolute, without .., NUL or newline", req.Path)
	}
	c, done, err := w.writeTarget(ctx, tenant, id, req.Path)
	if err != nil {
		return nil, err
	}
	err = w.admitWrite(ctx, tenant, id, c, req.Size, "upload")
	done() // a check only: nothing is written yet
	if err != nil {
		return nil, err
	}
	rows, err := w.m.Store().ListUploads(ctx, id)
	if err != nil {
		return nil, err
	}
	open := 0
	for _, r := range rows {
		var u Upload
		if json.Unmarshal(r.Record, &u) == nil && u.State == UploadOpen {
			open++
		}
	}
	if open >= MaxOpenUploads {
		return nil, fmt.Errorf("%w: %d uploads are open on session %s, the most allowed; complete or abort one", ErrConflict, open, id)
	}
	var b [8]byte
	rand.Read(b[:])
	u := &Upload{ID: "up-" + hex.EncodeToString(b[:]), Path: req.Path, Size: req.Size, SHA256: req.SHA256, Mode: req.Mode,
		Parents: req.Parents, State: UploadOpen, CreatedAt: w.m.Now().UTC()}
	if err := w.putUpload(ctx, id, u); err != nil {
		return nil, err
	}
	w.m.LedgerAppend(ctx, id, "upload.open", map[string]any{"upload": u.ID, "path": u.Path, "size": u.Size})
	return u, nil
}

// UploadChunk stores the bytes at offset; offset must be what was received.
func (w *Service) UploadChunk(ctx context.Context, tenant, id, up string, offset int64, data []byte) (*Upload, error) {
	if len(data) == 0 || len(data) > MaxUploadChunk {
		return nil, bad("a chunk is 1 to %d bytes", MaxUploadChunk)
	}
	c, done, err := w.machineForWrite(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer done()
	u, err := w.getUpload(ctx, id, up)
	if err != nil {
		return nil, err
	}
	if u.State != UploadOpen {
		return nil, fmt.Errorf("%w: upload %s is %s", ErrConflict, up, u.State)
	}
	if offset != u.Received {
		return nil, fmt.Errorf("%w: offset %d, but %d bytes were received: continue at offset=%d", ErrConflict, offset, u.Received, u.Received)
	}
	if offset+int64(len(data)) > u.Size {
		return nil, bad("the chunk ends at %d, past the upload's size %d", offset+int64(len(data)), u.Size)
	}
	part, err := c.UploadPart(ctx, up, offset, data)
	if err != nil {
		return nil, guestErr(err)
	}
	u.Received, u.Parts = part.Received, u.Parts+1
	return u, w.putUpload(ctx, id, u)
}

// GetUpload returns an upload's record.
func (w *Service) GetUpload(ctx context.Context, tenant, id, up string) (*Upload, error) {
	if _, err := w.m.Load(ctx, tenant, id); err != nil {
		return nil, err
	}
	return w.getUpload(ctx, id, up)
}

// ListUploads lists the session's uploads.
func (w *Service) ListUploads(ctx context.Context, tenant, id string) ([]*Upload, error) {
	if _, err := w.m.Load(ctx, tenant, id); err != nil {
		return nil, err
	}
	rows, err := w.m.Store().ListUploads(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []*Upload{}
	for _, r := range rows {
		var u Upload
		if json.Unmarshal(r.Record, &u) == nil {
			out = append(out, &u)
		}
	}
	return out, nil
}

// CompleteUpload assembles, verifies and renames the file into place. A
// second call after success answers the same record.
func (w *Service) CompleteUpload(ctx context.Context, tenant, id, up string) (*Upload, error) {
	var u *Upload
	err := w.m.WalkVerb(ctx, session.CommandFile, tenant, id, "upload", "",
		session.LoadRunningStep(),
		session.NewStep(session.StepGate, func(ctx context.Context, p Pipe) error {
			// In flight like a command: a restore or fork must not
			// replace the machine under it.
			done, err := w.m.WorkSlot(id)
			if err != nil {
				return err
			}
			p.AtEnd(done)
			if u, err = w.getUpload(ctx, id, up); err != nil {
				return err
			}
			if u.State == UploadComplete {
				p.Answered() // completed already: the same record
				return nil
			}
			p.Command().Text = u.Path
			// Checked again: the links on the way to the path may have
			// changed since the upload was opened.
			if err := session.RefuseReadOnly(ctx, p.Guest(), p.Session(), u.Path); err != nil {
				return err
			}
			if u.Received != u.Size {
				return fmt.Errorf("%w: %d of %d bytes received; continue at offset=%d", ErrConflict, u.Received, u.Size, u.Received)
			}
			return nil
		}),
		// Measured again: the workspace may have grown since the open.
		session.AdmitWriteStep(func() int64 { return u.Size }, "upload"),
		session.HooksStep("file"),
		session.NewStep(session.StepRun, func(ctx context.Context, p Pipe) error {
			deny, exec := session.WriteGuard(p.Session())
			res, err := p.Guest().CompleteUpload(ctx, up, api.UploadComplete{Path: u.Path, Size: u.Size, SHA256: u.SHA256, Mode: u.Mode, Parents: u.Parents, Deny: deny, Exec: exec})
			if err != nil {
				// Cut off on the way (not the agent's refusal), it may
				// have moved the file into place: ledgered as interrupted.
				return p.RunCutOff(err)
			}
			// The file is in place: its record is saved even if the
			// caller has hung up meanwhile, and it is ledgered even if
			// that save fails.
			p.Started()
			u.State, u.Verified = UploadComplete, res.Verified
			if u.SHA256 == "" {
				u.SHA256 = res.SHA256
			}
			return w.putUpload(context.WithoutCancel(ctx), id, u)
		}),
		session.NewStep(session.StepRecord, func(ctx context.Context, p Pipe) error {
			if p.CutOff() {
				w.m.LedgerAppend(ctx, id, "file.upload", p.WithNotes(p.WithCutOff(map[string]any{"upload": up, "path": u.Path, "size": u.Size})))
				return nil
			}
			w.m.LedgerAppend(ctx, id, "file.upload", p.WithNotes(map[string]any{"upload": up, "path": u.Path, "size": u.Size, "verified": u.Verified}))
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	return u, nil
}

// AbortUpload drops an upload and its parts in the guest.
func (w *Service) AbortUpload(ctx context.Context, tenant, id, up string) error {
	c, done, err := w.machineForWrite(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer done()
	if _, err := w.getUpload(ctx, id, up); err != nil {
		return err
	}
	if err := c.AbortUpload(ctx, up); err != nil && !errors.Is(guestErr(err), ErrNotFound) {
		return guestErr(err)
	}
	if err := w.m.Store().DeleteUpload(ctx, id, up); err != nil {
		return err
	}
	w.m.LedgerAppend(ctx, id, "upload.abort", map[string]any{"upload": up})
	return nil
}
