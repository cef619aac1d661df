package speculate

// What a speculation records: the files under its paths before and after
// the command in the copy, and the difference between the two.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path"
	"sort"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hostd/session"
)

// entry is one thing found under a path: a file, a directory, a link.
type entry struct {
	typ, mode, sha, target string
	size                   int64
}

// state is what a scan found: entries by absolute path, and whether a
// path held more than one scan reads.
type state struct {
	entries   map[string]entry
	truncated bool
}

func notFound(err error) bool { return errors.Is(err, errdefs.ErrNotFound) }

// scan reads what is under each of paths in the machine of c. Links are
// listed, never followed.
func scan(ctx context.Context, c *client.Client, paths []string) (*state, error) {
	st := &state{entries: map[string]entry{}}
	for _, p := range paths {
		l, err := c.List(ctx, p)
		if notFound(err) {
			continue
		}
		if err != nil {
			return nil, session.GuestError(err)
		}
		self := l.Self
		if self == nil && l.Kind != "dir" && len(l.Entries) == 1 {
			self = &l.Entries[0]
		}
		if self != nil && self.Type != api.TypeDir {
			e := entry{typ: self.Type, mode: self.Mode, size: self.Size, target: self.Target}
			if e.typ == api.TypeFile {
				r, err := c.ReadRange(ctx, p, 0, 1, true)
				if err != nil && !notFound(err) {
					return nil, session.GuestError(err)
				}
				if err == nil {
					e.sha = r.SHA256
				}
			}
			st.entries[p] = e
			continue
		}
		m, err := c.Manifest(ctx, api.ManifestRequest{Path: p, MaxFiles: maxScanEntries})
		if notFound(err) {
			continue
		}
		if err != nil {
			return nil, session.GuestError(err)
		}
		st.truncated = st.truncated || m.Truncated
		st.entries[p] = entry{typ: api.TypeDir}
		for _, e := range m.Entries {
			st.entries[path.Join(p, e.Path)] = entry{typ: e.Type, mode: e.Mode, size: e.Size, sha: e.SHA256, target: e.Target}
		}
	}
	return st, nil
}

// same reports whether a and b are the same thing with the same content.
func same(a, b entry) bool {
	if a.typ != b.typ || a.mode != b.mode {
		return false
	}
	switch a.typ {
	case api.TypeFile:
		return a.sha == b.sha && a.sha != ""
	case api.TypeSymlink:
		return a.target == b.target
	}
	return true
}

// diff records in cs the files the command added, modified or deleted
// between before and after, with the new contents read from c. What it
// cannot carry (a link, a file that became a directory, a file too large,
// files past the limits) is listed without content and makes the
// changeset incomplete: it can be read, never applied.
func diff(ctx context.Context, c *client.Client, before, after *state, cs *Changeset) error {
	cs.Complete = !before.truncated && !after.truncated
	var names []string
	for p := range after.entries {
		names = append(names, p)
	}
	for p := range before.entries {
		if _, ok := after.entries[p]; !ok {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	var kept int64
	for _, p := range names {
		b, had := before.entries[p]
		a, has := after.entries[p]
		if had && has && same(a, b) {
			continue
		}
		// A directory that came or went is seen through its files.
		if (!had || b.typ == api.TypeDir) && (!has || a.typ == api.TypeDir) {
			continue
		}
		if len(cs.Files) == apiv1.MaxChangesetFiles {
			cs.Complete = false
			break
		}
		f := File{Path: p}
		switch {
		case !had || b.typ == api.TypeDir:
			f.Op = apiv1.PromoteAdded
		case !has || a.typ == api.TypeDir:
			f.Op = apiv1.PromoteDeleted
		default:
			f.Op = apiv1.PromoteModified
		}
		if had && b.typ == api.TypeFile {
			f.BaseSHA256 = b.sha
		}
		// Only regular files on both sides (or on the side that exists)
		// can be carried to the target.
		carried := (!had || b.typ == api.TypeFile || (b.typ == api.TypeDir && f.Op == apiv1.PromoteAdded)) &&
			(!has || a.typ == api.TypeFile || (a.typ == api.TypeDir && f.Op == apiv1.PromoteDeleted))
		if f.Op == apiv1.PromoteAdded && had && b.typ == api.TypeDir {
			carried = false // a directory replaced by a file
		}
		if f.Op == apiv1.PromoteDeleted && has && a.typ == api.TypeDir {
			carried = false // a file replaced by a directory
		}
		if has && a.typ != api.TypeDir {
			f.Mode, f.Size, f.SHA256 = a.mode, a.size, a.sha
			if a.typ == api.TypeSymlink {
				f.Mode = "symlink"
			}
		}
		if !carried {
			f.ContentOmitted, cs.Complete = true, false
			cs.Files = append(cs.Files, f)
			continue
		}
		if f.Op != apiv1.PromoteDeleted {
			if a.size > apiv1.MaxChangesetFileBytes || kept+a.size > apiv1.MaxChangesetBytes || a.sha == "" {
				f.ContentOmitted, cs.Complete = true, false
				cs.Files = append(cs.Files, f)
				continue
			}
			r, err := c.ReadRange(ctx, p, 0, apiv1.MaxChangesetFileBytes, false)
			if err != nil {
				if notFound(err) {
					f.ContentOmitted, cs.Complete = true, false
					cs.Files = append(cs.Files, f)
					continue
				}
				return session.GuestError(err)
			}
			sum := sha256.Sum256(r.Data)
			if hex.EncodeToString(sum[:]) != a.sha || !r.EOF && int64(len(r.Data)) < r.Size {
				// Changed while it was read: what was read is not what
				// was listed.
				f.ContentOmitted, cs.Complete = true, false
				cs.Files = append(cs.Files, f)
				continue
			}
			f.Content = r.Data
			if f.Content == nil {
				f.Content = []byte{}
			}
			kept += int64(len(r.Data))
		}
		cs.Files = append(cs.Files, f)
	}
	return nil
}
