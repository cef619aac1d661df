// Package rewind is a session's rewind: a ring of automatic points (a
// snapshot of the machine just before a command ran), an undo that puts
// the machine back to one of them, pins that keep a point through
// eviction and undo, and a bisect that finds which command broke a test.
//
// It is a sibling of the session core (hostd/session). Points are taken
// by a command hook (Manager.AddCommandHook), the pipeline's before-run
// step, so every entry that walks the pipeline (exec, exec/stream, a job,
// a file change, a git verb) is covered by one place, and the ring lives
// here, outside the session record: taking a point does not change the
// session's revision. Each change to a ring is written to the store
// (migration 12), so a daemon that adopts the session after a restart
// loads the ring again (an OnAdopt hook) and its points still undo.
package rewind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/hostd/session"
	"paddock.dev/paddock/hostd/store"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/policy"
)

// The public wire types, kept under these names here.
type (
	Config        = apiv1.RewindConfig
	ConfigRequest = apiv1.RewindConfigRequest
	Point         = apiv1.RewindPoint
	Rewind        = apiv1.Rewind
	UndoRequest   = apiv1.RewindUndoRequest
	Undo          = apiv1.RewindUndo
	PinRequest    = apiv1.RewindPinRequest
	BisectRequest = apiv1.RewindBisectRequest
	Bisect        = apiv1.RewindBisect
	BisectState   = apiv1.RewindBisectState
	BranchRequest = apiv1.RewindBranchRequest
	Branch        = apiv1.RewindBranch
)

// Limits.
const (
	MaxPoints     = apiv1.MaxRewindPoints
	DefaultPoints = apiv1.DefaultRewindPoints
	// maxTestOutput is how much of a bisect test's output is read (only
	// its exit code is used).
	maxTestOutput = 4096
)

var (
	tagRE       = regexp.MustCompile(`^rw-[0-9]{1,12}$`)
	allTriggers = []string{apiv1.RewindTriggerExec, apiv1.RewindTriggerJob, apiv1.RewindTriggerFile, apiv1.RewindTriggerGit}
)

// point is a ring entry: what the API shows and the snapshot behind it.
type point struct {
	Point
	snap hypervisor.Snapshot
}

// ring is one session's rewind state. mu is held while a point is taken,
// an undo restores or a bisect runs; a point that finds it held is
// skipped (rewind.skipped), never waited for.
type ring struct {
	mu  sync.Mutex
	cfg Config
	// on mirrors cfg.Enabled and triggers cfg.Triggers (a bit per
	// trigger, by its place in allTriggers) for the hook's first look,
	// without mu.
	on       atomic.Bool
	triggers atomic.Uint32
	points   []*point // oldest first
	seq      int64
	// gone is set when the session stopped: the ring is no longer
	// written to the store, so a holder that finishes after the stop
	// does not bring the deleted rows back.
	gone atomic.Bool
}

// Service is the rewind of every session on one Manager.
type Service struct {
	m *session.Manager

	mu    sync.Mutex
	rings map[string]*ring
}

// New makes the service, adds its command hook (named "rewind"), has a
// session's points deleted when it stops and its stored ring loaded when
// a restarted daemon adopts it.
func New(m *session.Manager) *Service {
	s := &Service{m: m, rings: map[string]*ring{}}
	m.AddCommandHook("rewind", s.hook)
	m.OnStop(s.stopped)
	m.OnAdopt(s.adopted)
	return s
}

// save writes session id's ring to the store; the caller holds r.mu. A
// failure does not undo what was done (the machine already changed): it
// is ledgered as rewind.store_failed, and a restart would then load the
// ring as it was last written.
func (s *Service) save(ctx context.Context, id string, r *ring) {
	if r.gone.Load() {
		return
	}
	cfg, _ := json.Marshal(r.cfg)
	row := store.RewindRing{Session: id, Config: cfg, Seq: r.seq, Points: make([]store.RewindPointRow, len(r.points))}
	for i, p := range r.points {
		snap, _ := json.Marshal(p.snap)
		row.Points[i] = store.RewindPointRow{Tag: p.Tag, Kind: p.Trigger, Command: p.Command, Memory: p.Memory,
			Pinned: p.Pinned, Snapshot: snap, CreatedAt: p.CreatedAt}
	}
	if err := s.m.Store().PutRewindRing(context.WithoutCancel(ctx), row); err != nil {
		s.m.LedgerAppend(ctx, id, "rewind.store_failed", map[string]any{"reason": session.ClipText(err.Error(), 300)})
	}
}

// stored reads session id's ring from the store (nil when it has none).
func (s *Service) stored(ctx context.Context, id string) (*ring, error) {
	row, err := s.m.Store().GetRewindRing(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &ring{cfg: defaultConfig(), seq: row.Seq}
	if err := json.Unmarshal(row.Config, &r.cfg); err != nil {
		return nil, fmt.Errorf("rewind config of %s: %w", id, err)
	}
	for _, pr := range row.Points {
		p := &point{Point: Point{Tag: pr.Tag, Trigger: pr.Kind, Command: pr.Command, Memory: pr.Memory, Pinned: pr.Pinned, CreatedAt: pr.CreatedAt}}
		if err := json.Unmarshal(pr.Snapshot, &p.snap); err != nil {
			return nil, fmt.Errorf("rewind point %s of %s: %w", pr.Tag, id, err)
		}
		r.points = append(r.points, p)
	}
	return r, nil
}

// adopted is the adopt hook: a session a restarted daemon took over gets
// its stored ring back. A point whose snapshot is gone (deleted or lost
// while no daemon ran) is dropped from the ring with a rewind.point_lost
// ledger entry; the others count their disk again and undo as before.
func (s *Service) adopted(ctx context.Context, id string) {
	r, err := s.stored(ctx, id)
	if err != nil {
		s.m.LedgerAppend(ctx, id, "rewind.store_failed", map[string]any{"reason": session.ClipText(err.Error(), 300)})
		return
	}
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.points[:0]
	var lost []string
	for _, p := range r.points {
		if err := s.m.AdoptPoint(ctx, id, p.snap); err != nil {
			lost = append(lost, p.Tag)
			s.m.LedgerAppend(ctx, id, "rewind.point_lost", map[string]any{"tag": p.Tag, "snapshot_id": p.snap.ID,
				"reason": session.ClipText(session.RedactSecrets(err.Error()), 300)})
			continue
		}
		kept = append(kept, p)
	}
	r.points = kept
	r.on.Store(r.cfg.Enabled)
	r.triggers.Store(triggerBits(r.cfg.Triggers))
	s.mu.Lock()
	s.rings[id] = r
	s.mu.Unlock()
	if len(lost) > 0 {
		s.save(ctx, id, r)
	}
	s.m.LedgerAppend(ctx, id, "rewind.adopt", map[string]any{"points": tags(r.points), "lost": lost, "enabled": r.cfg.Enabled})
}

func defaultConfig() Config {
	return Config{MaxPoints: DefaultPoints, Memory: true, Triggers: []string{apiv1.RewindTriggerExec}}
}

// ringOf returns session id's ring; create makes one when it has none.
func (s *Service) ringOf(id string, create bool) *ring {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[id]
	if r == nil && create {
		r = &ring{cfg: defaultConfig()}
		s.rings[id] = r
	}
	return r
}

// load is the session as the caller sees it (404 for another tenant's).
func (s *Service) load(ctx context.Context, tenant, id string) (*session.Session, error) {
	return s.m.LoadSession(ctx, tenant, id)
}

// Get is GET .../rewind.
func (s *Service) Get(ctx context.Context, tenant, id string) (*Rewind, error) {
	if _, err := s.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	r := s.ringOf(id, false)
	if r == nil {
		return &Rewind{Config: defaultConfig(), Points: []Point{}}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view(), nil
}

func (r *ring) view() *Rewind {
	out := &Rewind{Config: r.cfg, Points: make([]Point, len(r.points))}
	out.Config.Triggers = slices.Clone(r.cfg.Triggers)
	for i, p := range r.points {
		out.Points[i] = p.Point
	}
	return out
}

func (r *ring) pinned() int {
	n := 0
	for _, p := range r.points {
		if p.Pinned {
			n++
		}
	}
	return n
}

// SetConfig is POST .../rewind/config.
func (s *Service) SetConfig(ctx context.Context, tenant, id string, req ConfigRequest) (*Rewind, error) {
	if req.MaxPoints != nil && (*req.MaxPoints < 1 || *req.MaxPoints > MaxPoints) {
		return nil, session.BadRequest("max_points %d must be from 1 to %d", *req.MaxPoints, MaxPoints)
	}
	var triggers []string
	if req.Triggers != nil {
		if len(req.Triggers) == 0 || len(req.Triggers) > len(allTriggers) {
			return nil, session.BadRequest("triggers must name from 1 to %d of %s", len(allTriggers), strings.Join(allTriggers, ", "))
		}
		for _, t := range req.Triggers {
			if !slices.Contains(allTriggers, t) {
				return nil, session.BadRequest("trigger %q is unknown; use %s", session.ClipText(t, 40), strings.Join(allTriggers, ", "))
			}
			if !slices.Contains(triggers, t) {
				triggers = append(triggers, t)
			}
		}
		sort.Strings(triggers)
	}
	sess, err := s.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sess.State != session.StateRunning {
		return nil, fmt.Errorf("%w: session %s is %s", session.ErrConflict, id, sess.State)
	}
	r := s.ringOf(id, true)
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := r.cfg
	cfg.Triggers = slices.Clone(cfg.Triggers)
	if req.Enabled != nil {
		cfg.Enabled = *req.Enabled
	}
	if req.Memory != nil {
		cfg.Memory = *req.Memory
	}
	if triggers != nil {
		cfg.Triggers = triggers
	}
	if req.MaxPoints != nil {
		cfg.MaxPoints = *req.MaxPoints
		// One slot always stays free for the next point.
		if n := r.pinned(); n >= cfg.MaxPoints {
			return nil, fmt.Errorf("%w: %d points are pinned, so max_points must be at least %d (unpin some first)", session.ErrConflict, n, n+1)
		}
	}
	r.cfg = cfg
	r.on.Store(cfg.Enabled)
	r.triggers.Store(triggerBits(cfg.Triggers))
	evicted := r.trim(cfg.MaxPoints)
	s.drop(id, evicted)
	s.save(ctx, id, r)
	s.m.LedgerAppend(ctx, id, "rewind.config", map[string]any{"enabled": cfg.Enabled, "max_points": cfg.MaxPoints,
		"memory": cfg.Memory, "triggers": cfg.Triggers, "evicted": tags(evicted)})
	return r.view(), nil
}

// trim removes the oldest unpinned points until at most n are left, and
// returns them.
func (r *ring) trim(n int) []*point {
	var out []*point
	for len(r.points) > n {
		i := slices.IndexFunc(r.points, func(p *point) bool { return !p.Pinned })
		if i < 0 {
			break // cannot happen: a slot always stays unpinned
		}
		out = append(out, r.points[i])
		r.points = slices.Delete(r.points, i, i+1)
	}
	return out
}

func tags(ps []*point) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Tag
	}
	return out
}

// drop deletes points' snapshots.
func (s *Service) drop(id string, ps []*point) {
	for _, p := range ps {
		s.m.DropPoint(id, p.snap)
	}
}

// triggerBits is a set of triggers as bits.
func triggerBits(ts []string) uint32 {
	var b uint32
	for _, t := range ts {
		if i := slices.Index(allTriggers, t); i >= 0 {
			b |= 1 << i
		}
	}
	return b
}

// trigger is what a command takes a point as ("" for none) and the
// command the point records.
func trigger(c *session.Command) (string, string) {
	switch c.Kind {
	case session.CommandExec, session.CommandStream:
		return apiv1.RewindTriggerExec, c.Text
	case session.CommandJob:
		return apiv1.RewindTriggerJob, c.Text
	case session.CommandFile:
		return apiv1.RewindTriggerFile, c.Verb + " " + c.Text
	case session.CommandGit:
		if c.Verb == "commit" || c.Verb == "branch" {
			return apiv1.RewindTriggerGit, c.Text
		}
	}
	return "", ""
}

// hook is the command hook: for a session with rewind on and a command
// its triggers name, a point is taken before the command runs. It never
// refuses a command: a point that cannot be taken is ledgered
// (rewind.skipped when something else holds the session or its ring,
// rewind.capture_failed when the snapshot failed) and the command runs.
func (s *Service) hook(ctx context.Context, c *session.Command) error {
	r := s.ringOf(c.Session, false)
	if r == nil || !r.on.Load() {
		return nil // rewind is off: nothing to take
	}
	trig, text := trigger(c)
	if trig == "" || r.triggers.Load()&triggerBits([]string{trig}) == 0 {
		return nil
	}
	if !r.mu.TryLock() {
		s.m.LedgerAppend(ctx, c.Session, "rewind.skipped", map[string]any{"trigger": trig, "command": session.ClipText(text, 300),
			"reason": "another rewind point, undo or bisect holds the session"})
		c.Annotate("rewind", "rewind.skipped")
		return nil
	}
	defer r.mu.Unlock()
	if !r.cfg.Enabled || !slices.Contains(r.cfg.Triggers, trig) {
		return nil
	}
	r.seq++
	tag := fmt.Sprintf("rw-%d", r.seq)
	start := time.Now()
	snap, err := s.m.TakePoint(ctx, c.Session, tag, r.cfg.Memory)
	if err != nil {
		kind := "rewind.capture_failed"
		if errors.Is(err, session.ErrConflict) {
			kind = "rewind.skipped"
		}
		s.m.LedgerAppend(ctx, c.Session, kind, map[string]any{"trigger": trig, "command": session.ClipText(text, 300),
			"reason": session.ClipText(session.RedactSecrets(err.Error()), 300)})
		c.Annotate("rewind", kind)
		return nil
	}
	p := &point{Point: Point{Tag: tag, Trigger: trig, Command: session.ClipText(text, 1024), Memory: snap.Memory,
		CreatedAt: s.m.Now().UTC()}, snap: snap}
	r.points = append(r.points, p)
	evicted := r.trim(r.cfg.MaxPoints)
	s.drop(c.Session, evicted)
	s.save(ctx, c.Session, r)
	ms := time.Since(start).Milliseconds()
	c.Annotate("rewind_point", tag)
	s.m.LedgerAppend(ctx, c.Session, "rewind.point", map[string]any{"tag": tag, "trigger": trig, "command": session.ClipText(text, 300), "memory": snap.Memory,
		"snapshot_id": snap.ID, "ms": ms, "evicted": tags(evicted)})
	return nil
}

// stopped deletes a stopped session's points and its stored ring. (A
// daemon that stops and leaves its sandboxes for the next one to adopt
// runs no stop hook: their points stay, on disk and in the store.) A
// session this daemon has no ring for (one found lost after a restart,
// now deleted) has the points of its stored ring deleted. It never waits
// for the ring: the stop may come from inside a call that holds it (an
// undo or a point whose session load finds the session expired runs the
// sweep, and so this hook, on its own goroutine), so when the ring is
// held its points go once the holder lets go of it.
func (s *Service) stopped(ctx context.Context, id string, _ session.StopReason) {
	s.mu.Lock()
	r := s.rings[id]
	delete(s.rings, id)
	s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	if r == nil {
		if r, _ = s.stored(ctx, id); r == nil {
			return
		}
	}
	r.gone.Store(true)
	if err := s.m.Store().DeleteRewindRing(ctx, id); err != nil {
		s.m.LedgerAppend(ctx, id, "rewind.store_failed", map[string]any{"reason": session.ClipText(err.Error(), 300)})
	}
	r.on.Store(false)
	dropAll := func() {
		s.drop(id, r.points)
		r.points = nil
		r.mu.Unlock()
	}
	if r.mu.TryLock() {
		dropAll()
		return
	}
	go func() {
		r.mu.Lock()
		dropAll()
	}()
}

// index is the position of the point tagged tag, or -1.
func (r *ring) index(tag string) int {
	return slices.IndexFunc(r.points, func(p *point) bool { return p.Tag == tag })
}

// find is the position of the point tagged tag in session id's ring, or
// a not-found error naming it.
func (r *ring) find(id, tag string) (int, error) {
	if i := r.index(tag); i >= 0 {
		return i, nil
	}
	return -1, fmt.Errorf("%w: session %s has no rewind point %q", session.ErrNotFound, id, tag)
}

// lockRing loads the session as the caller sees it (404 for another
// tenant's) and returns its ring locked, or nil when it has none. The
// caller unlocks a ring it gets.
func (s *Service) lockRing(ctx context.Context, tenant, id string) (*ring, error) {
	if _, err := s.load(ctx, tenant, id); err != nil {
		return nil, err
	}
	r := s.ringOf(id, false)
	if r != nil {
		r.mu.Lock()
	}
	return r, nil
}

// lockPoint is lockRing for a verb on one point: the ring locked and the
// point's position, or 404 when the session has no ring or no such
// point (the ring is then not left locked).
func (s *Service) lockPoint(ctx context.Context, tenant, id, tag string) (*ring, int, error) {
	r, err := s.lockRing(ctx, tenant, id)
	if err != nil {
		return nil, -1, err
	}
	if r == nil {
		return nil, -1, fmt.Errorf("%w: session %s has no rewind point %q", session.ErrNotFound, id, tag)
	}
	i, err := r.find(id, tag)
	if err != nil {
		r.mu.Unlock()
		return nil, -1, err
	}
	return r, i, nil
}

// checkTag refuses a tag that cannot be a point's.
func checkTag(field, tag string) error {
	if !tagRE.MatchString(tag) {
		return session.BadRequest("%s %q: name a rewind point (rw-N, as GET .../rewind lists them)", field, session.ClipText(tag, 40))
	}
	return nil
}

// Undo is POST .../rewind/undo: the machine goes back to a point, and
// that point and every newer one but the pinned ones are dropped.
func (s *Service) Undo(ctx context.Context, tenant, id string, req UndoRequest) (*Undo, error) {
	switch {
	case req.Steps != 0 && req.To != "":
		return nil, session.BadRequest("give steps or to, not both")
	case req.To != "":
		if err := checkTag("to", req.To); err != nil {
			return nil, err
		}
	case req.Steps == 0:
		req.Steps = 1
	case req.Steps < 0 || req.Steps > MaxPoints:
		return nil, session.BadRequest("steps %d must be from 1 to %d", req.Steps, MaxPoints)
	}
	r, err := s.lockRing(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: session %s has no rewind points (turn rewind on with POST .../rewind/config)", session.ErrConflict, id)
	}
	defer r.mu.Unlock()
	at := len(r.points) - req.Steps
	if req.To != "" {
		if at, err = r.find(id, req.To); err != nil {
			return nil, err
		}
	} else if at < 0 {
		return nil, fmt.Errorf("%w: steps %d goes past the oldest point: session %s has %d rewind points", session.ErrConflict, req.Steps, id, len(r.points))
	}
	target := r.points[at]
	var dropped, kept []*point
	for _, p := range r.points[at:] {
		if p.Pinned {
			kept = append(kept, p)
		} else {
			dropped = append(dropped, p)
		}
	}
	out, err := s.m.RestorePoint(ctx, tenant, id, target.snap, "rewind.undo", map[string]any{
		"to": target.Tag, "command": session.ClipText(target.Command, 300), "dropped": tags(dropped), "kept_pinned": tags(kept)})
	if err != nil {
		return nil, err
	}
	r.points = append(r.points[:at:at], kept...)
	s.drop(id, dropped)
	s.save(ctx, id, r)
	return &Undo{Restored: target.Point, Dropped: tags(dropped), Kept: tags(kept), Revision: out.Revision}, nil
}

// Pin is POST .../rewind/pin.
func (s *Service) Pin(ctx context.Context, tenant, id string, req PinRequest) (*Point, error) {
	if err := checkTag("tag", req.Tag); err != nil {
		return nil, err
	}
	r, i, err := s.lockPoint(ctx, tenant, id, req.Tag)
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	p := r.points[i]
	pin := req.Pinned == nil || *req.Pinned
	if pin && !p.Pinned && r.pinned()+1 >= r.cfg.MaxPoints {
		return nil, fmt.Errorf("%w: pinning %s would leave no free slot in a ring of %d (unpin another or raise max_points)", session.ErrConflict, req.Tag, r.cfg.MaxPoints)
	}
	if p.Pinned != pin {
		p.Pinned = pin
		s.save(ctx, id, r)
		s.m.LedgerAppend(ctx, id, "rewind.pin", map[string]any{"tag": p.Tag, "pinned": pin})
	}
	out := p.Point
	return &out, nil
}

// judge runs the test through the pipeline's load and judge steps only:
// the session's process policy decides on it as on an exec (a command it
// would hold for an operator is refused, since a bisect cannot wait).
func (s *Service) judge(ctx context.Context, tenant, id, test string, timeout int) error {
	return s.m.Walk(ctx, session.CommandExec, tenant, id,
		session.LoadRunningStep(),
		session.JudgeWithoutApprovalsStep(func(session.Pipe) session.ProcessCheck {
			return session.ProcessCheck{Kind: policy.KindExec, Command: test, Params: map[string]any{"timeout_seconds": timeout}}
		}))
}

// Bisect is POST .../rewind/bisect: which command broke test. The
// states are the points, oldest first, and the machine as it is now; the
// test (exit 0 passes) decides good or bad, and a binary search between
// a good state and a bad one finds the two that are next to each other:
// the command of the good one is the answer. The machine is snapshotted
// first and restored last, so the session ends as it started, and the
// ring is not changed.
func (s *Service) Bisect(ctx context.Context, tenant, id string, req BisectRequest) (*Bisect, error) {
	if strings.TrimSpace(req.Test) == "" {
		return nil, session.BadRequest("test is empty")
	}
	if len(req.Test) > session.MaxCommandBytes || strings.ContainsRune(req.Test, 0) {
		return nil, session.BadRequest("test must be at most %d bytes without NUL", session.MaxCommandBytes)
	}
	if req.TimeoutSeconds == 0 {
		req.TimeoutSeconds = apiv1.DefaultBisectTimeout
	}
	if req.TimeoutSeconds < 1 || req.TimeoutSeconds > apiv1.MaxBisectTimeout {
		return nil, session.BadRequest("timeout_seconds %d must be from 1 to %d", req.TimeoutSeconds, apiv1.MaxBisectTimeout)
	}
	if req.Good != "" {
		if err := checkTag("good", req.Good); err != nil {
			return nil, err
		}
	}
	if req.Bad != "" && req.Bad != apiv1.RewindNow {
		if err := checkTag("bad", req.Bad); err != nil {
			return nil, err
		}
	}
	if err := s.judge(ctx, tenant, id, req.Test, req.TimeoutSeconds); err != nil {
		return nil, err
	}
	r := s.ringOf(id, false)
	if r == nil {
		return nil, fmt.Errorf("%w: session %s has no rewind points to bisect", session.ErrConflict, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.points)
	if n == 0 {
		return nil, fmt.Errorf("%w: session %s has no rewind points to bisect", session.ErrConflict, id)
	}
	// States 0..n-1 are the points, n is now.
	good, bad := 0, n
	var err error
	if req.Good != "" {
		if good, err = r.find(id, req.Good); err != nil {
			return nil, err
		}
	}
	if req.Bad != "" && req.Bad != apiv1.RewindNow {
		if bad, err = r.find(id, req.Bad); err != nil {
			return nil, err
		}
	}
	if good >= bad {
		return nil, session.BadRequest("good must be an older state than bad")
	}
	h, err := s.m.HoldRestoring(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer h.Release()
	// The ring's tags are not used up by the bisect's own snapshot.
	now, err := h.Snapshot(ctx, fmt.Sprintf("bisect-%d", time.Now().UnixNano()), r.cfg.Memory)
	if err != nil {
		return nil, fmt.Errorf("snapshot the machine before the bisect: %w", err)
	}
	defer s.m.DropPoint(id, now)
	out := &Bisect{Tested: []BisectState{}}
	name := func(i int) string {
		if i == n {
			return apiv1.RewindNow
		}
		return r.points[i].Tag
	}
	// current is the state the machine is in (n: as it was at the start).
	current := n
	test := func(i int) (bool, error) {
		if i != current {
			snap := now
			if i < n {
				snap = r.points[i].snap
			}
			if err := h.Restore(ctx, snap); err != nil {
				return false, fmt.Errorf("restore %s: %w", name(i), err)
			}
			current = i
		}
		res, err := h.Exec(ctx, req.Test, req.TimeoutSeconds, maxTestOutput)
		if err != nil {
			return false, err
		}
		pass := res.ExitCode == 0 && !res.TimedOut
		out.Tested = append(out.Tested, BisectState{State: name(i), Passed: pass, ExitCode: res.ExitCode, TimedOut: res.TimedOut})
		return pass, nil
	}
	// The machine goes back to how it was, whatever happened; a failure
	// to do so is the answer's error.
	err = func() error {
		// The bad end first: when it is now, no restore is needed.
		if pass, err := test(bad); err != nil {
			return err
		} else if pass {
			return fmt.Errorf("%w: the test passes at %s, the bad end: nothing to bisect", session.ErrConflict, name(bad))
		}
		if pass, err := test(good); err != nil {
			return err
		} else if !pass {
			return fmt.Errorf("%w: the test fails at %s, the good end: nothing to bisect (name an older good point)", session.ErrConflict, name(good))
		}
		for bad-good > 1 {
			mid := (good + bad) / 2
			pass, err := test(mid)
			if err != nil {
				return err
			}
			if pass {
				good = mid
			} else {
				bad = mid
			}
		}
		return nil
	}()
	if current != n {
		if rerr := h.Restore(context.WithoutCancel(ctx), now); rerr != nil {
			return nil, fmt.Errorf("put the machine back after the bisect: %w", rerr)
		}
	}
	out.Restores = h.Restores
	if err != nil {
		return nil, err
	}
	p := r.points[good]
	out.Command, out.Trigger, out.Point, out.LastGood, out.FirstBad = p.Command, p.Trigger, p.Tag, name(good), name(bad)
	s.m.LedgerAppend(ctx, id, "rewind.bisect", map[string]any{"command": session.ClipText(p.Command, 300), "point": p.Tag,
		"last_good": out.LastGood, "first_bad": out.FirstBad, "tested": len(out.Tested), "restores": out.Restores})
	return out, nil
}

// Branch is POST .../rewind/branch: child sessions start from a point's
// snapshot while the session carries on as it is. The ring is held for
// the fork, so the point cannot be evicted or undone under it; the point
// stays in the ring, and the session's machine and points are not
// touched. The core's fork (Manager.ForkPoint) does the rest under fork's
// rules: max_children, admission, the identity mode, the ledger.
func (s *Service) Branch(ctx context.Context, tenant, id string, req BranchRequest) (*Branch, error) {
	if err := checkTag("tag", req.Tag); err != nil {
		return nil, err
	}
	if req.Count == 0 {
		req.Count = apiv1.DefaultBranchCount
	}
	if req.Count < 1 || req.Count > hypervisor.MaxForkChildren {
		return nil, session.BadRequest("count %d must be from 1 to %d", req.Count, hypervisor.MaxForkChildren)
	}
	if _, err := session.ForkIdentityMode(req.Identity); err != nil {
		return nil, err
	}
	r, i, err := s.lockPoint(ctx, tenant, id, req.Tag)
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	p := r.points[i]
	res, err := s.m.ForkPoint(ctx, tenant, id, p.snap, p.Tag, req.Count, req.Identity)
	if err != nil {
		return nil, err
	}
	return &Branch{ForkResult: *res, Point: p.Point}, nil
}
