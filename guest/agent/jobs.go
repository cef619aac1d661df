package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"paddock.dev/paddock/guest/api"
)

const (
	defaultReadLimit = 1 << 20
	// stdinWriteTimeout bounds one stdin write to a job that is not reading.
	stdinWriteTimeout = 5 * time.Second
	// confineReportTimeout bounds the wait for confine to exec the job.
	confineReportTimeout = 10 * time.Second
)

// supervisor runs and remembers background jobs.
type supervisor struct {
	s      *Server
	mu     sync.Mutex
	jobs   map[string]*job
	closed bool
}

func newSupervisor(s *Server) *supervisor {
	return &supervisor{s: s, jobs: map[string]*job{}}
}

// stream is one output stream's spool; its counters are guarded by job.mu.
type stream struct {
	path     string
	limit    int64
	retained int64
	dropped  int64
}

// job is one supervised command. Everything but the immutable fields set
// at start is guarded by mu.
type job struct {
	id        string
	argv      []string
	shell     string
	startedAt time.Time
	hasStdin  bool
	dir       string

	mu            sync.Mutex
	pid           int
	state         string
	exitCode      *int
	signal        string
	endedAt       *time.Time
	out, errs     stream
	streamsDone   bool
	killRequested bool
	timedOut      bool
	stdinW        *os.File
	stdinClosed   bool
	report        *api.ConfineReport
	timer         *time.Timer
	changed       chan struct{} // closed and replaced on every change
	exited        chan struct{} // closed when the process has exited

	stdinMu sync.Mutex // one stdin write at a time
}

// notifyLocked wakes every long poll waiting on j.
func (j *job) notifyLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *job) finishedLocked() bool { return j.state != api.JobRunning && j.streamsDone }

func (j *job) snapshotLocked() api.Job {
	return api.Job{
		ID:           j.id,
		Argv:         j.argv,
		Shell:        j.shell,
		State:        j.state,
		ExitCode:     j.exitCode,
		Signal:       j.signal,
		PID:          j.pid,
		StartedAt:    j.startedAt,
		EndedAt:      j.endedAt,
		StdoutBytes:  j.out.retained,
		StderrBytes:  j.errs.retained,
		DroppedBytes: j.out.dropped + j.errs.dropped,
		Stdin:        j.hasStdin,
		StdinClosed:  j.stdinClosed,
		Confinement:  j.report,
	}
}

func (j *job) snapshot() api.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snapshotLocked()
}

// reserve adds j to the table, evicting the oldest finished job when full.
func (sv *supervisor) reserve(j *job) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.closed {
		return fmt.Errorf("%w: the agent is shutting down", ErrConflict)
	}
	if len(sv.jobs) >= api.MaxJobs {
		var oldest *job
		for _, o := range sv.jobs {
			o.mu.Lock()
			done := o.finishedLocked()
			o.mu.Unlock()
			if done && (oldest == nil || o.startedAt.Before(oldest.startedAt)) {
				oldest = o
			}
		}
		if oldest == nil {
			return fmt.Errorf("%w: %d jobs are running, the most the agent keeps; kill one first", ErrConflict, api.MaxJobs)
		}
		delete(sv.jobs, oldest.id)
		_ = os.RemoveAll(oldest.dir)
	}
	sv.jobs[j.id] = j
	return nil
}

func (sv *supervisor) forget(j *job) {
	sv.mu.Lock()
	delete(sv.jobs, j.id)
	sv.mu.Unlock()
	_ = os.RemoveAll(j.dir)
}

func (sv *supervisor) get(id string) (*job, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	j, ok := sv.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w: no job %q", ErrNotFound, id)
	}
	return j, nil
}

func (sv *supervisor) list() []api.Job {
	sv.mu.Lock()
	all := make([]*job, 0, len(sv.jobs))
	for _, j := range sv.jobs {
		all = append(all, j)
	}
	sv.mu.Unlock()
	out := make([]api.Job, 0, len(all))
	for _, j := range all {
		out = append(out, j.snapshot())
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// close kills every running job's group and waits briefly for them.
func (sv *supervisor) close() {
	sv.mu.Lock()
	sv.closed = true
	var waits []chan struct{}
	for _, j := range sv.jobs {
		j.mu.Lock()
		if j.state == api.JobRunning {
			j.killRequested = true
			_ = killGroup(j.pid, syscall.SIGKILL)
			waits = append(waits, j.exited)
		}
		j.mu.Unlock()
	}
	sv.mu.Unlock()
	deadline := time.After(pipeGrace)
	for _, c := range waits {
		select {
		case <-c:
		case <-deadline:
			return
		}
	}
}

// start runs req as a new job.
func (sv *supervisor) start(req *api.JobRequest) (*job, error) {
	limit, err := outputCap(req.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	timeout, err := commandTimeout(req.TimeoutSeconds, 0)
	if err != nil {
		return nil, err
	}
	p, err := sv.s.newProcess(nil, &req.Command)
	if err != nil {
		return nil, err
	}
	id := "j" + randomHex(6)
	j := &job{
		id:       id,
		argv:     req.Argv,
		shell:    req.Shell,
		hasStdin: req.Stdin,
		dir:      filepath.Join(sv.s.cfg.SpoolDir, id),
		state:    api.JobRunning,
		out:      stream{path: filepath.Join(sv.s.cfg.SpoolDir, id, "stdout"), limit: limit},
		errs:     stream{path: filepath.Join(sv.s.cfg.SpoolDir, id, "stderr"), limit: limit},
		changed:  make(chan struct{}),
		exited:   make(chan struct{}),
	}
	var closeOnFail []*os.File
	started := false
	fail := func(err error) (*job, error) {
		if !started {
			p.abort()
		}
		for _, f := range closeOnFail {
			f.Close()
		}
		_ = os.RemoveAll(j.dir)
		return nil, err
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fail(fmt.Errorf("create job spool: %w", err))
	}
	outF, err := os.OpenFile(j.out.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, outF)
	errF, err := os.OpenFile(j.errs.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, errF)
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closeOnFail = append(closeOnFail, errR, errW)
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	p.childEnds = append(p.childEnds, outW, errW)
	if req.Stdin {
		inR, inW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		closeOnFail = append(closeOnFail, inR, inW)
		p.cmd.Stdin = inR
		p.childEnds = append(p.childEnds, inR)
		j.stdinW = inW
	}
	j.startedAt = time.Now().UTC()
	if err := sv.reserve(j); err != nil {
		return fail(err)
	}
	if err := p.start(); err != nil {
		started = true // start released the process's pipes
		sv.forget(j)
		return fail(err)
	}
	j.mu.Lock()
	j.pid = p.cmd.Process.Pid
	j.mu.Unlock()

	var drains sync.WaitGroup
	drains.Add(2)
	go j.drain(outR, outF, &j.out, &drains)
	go j.drain(errR, errF, &j.errs, &drains)
	if timeout > 0 {
		j.mu.Lock()
		j.timer = time.AfterFunc(timeout, j.timeOut)
		j.mu.Unlock()
	}
	go sv.wait(j, p.cmd, &drains, outR, errR)
	sv.s.log.Info("job started", "job", id, "pid", p.cmd.Process.Pid, "path", p.cmd.Path)

	if p.confine {
		rep := p.waitReport(confineReportTimeout)
		if rep == nil {
			return nil, sv.confineFailed(j)
		}
		j.mu.Lock()
		j.report = rep
		j.mu.Unlock()
	}
	return j, nil
}

// confineFailed handles a confined job whose confine wrote no report: it
// refused, crashed or hung. The job is removed and the reason returned.
func (sv *supervisor) confineFailed(j *job) error {
	select {
	case <-j.exited:
	case <-time.After(pipeGrace):
		_ = killGroup(j.pid, syscall.SIGKILL)
		<-j.exited
	}
	j.mu.Lock()
	code := -1
	if j.exitCode != nil {
		code = *j.exitCode
	}
	j.mu.Unlock()
	// Let the stderr drain catch up before reading the reason.
	deadline := time.Now().Add(pipeGrace)
	for time.Now().Before(deadline) {
		j.mu.Lock()
		done := j.streamsDone
		j.mu.Unlock()
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stderr, _ := readSpool(j.errs.path, 0, 4096)
	sv.forget(j)
	return confineFailure(code, stderr)
}

func (j *job) timeOut() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.state == api.JobRunning {
		j.timedOut = true
		_ = killGroup(j.pid, syscall.SIGKILL)
	}
}

// drain copies one pipe to its spool, keeping at most the stream's limit
// and counting the rest, and never stops reading before EOF (or the grace
// deadline after exit), so the job is never given SIGPIPE by the cap.
func (j *job) drain(r, spool *os.File, st *stream, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	defer spool.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			j.mu.Lock()
			room := st.limit - st.retained
			j.mu.Unlock()
			keep := int64(0)
			if room > 0 {
				w, _ := spool.Write(buf[:min(int64(n), room)])
				keep = int64(w)
			}
			j.mu.Lock()
			st.retained += keep
			st.dropped += int64(n) - keep
			j.notifyLocked()
			j.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait records the job's end, then gives background holders of its pipes
// pipeGrace before it stops reading them.
func (sv *supervisor) wait(j *job, cmd *exec.Cmd, drains *sync.WaitGroup, readers ...*os.File) {
	_ = cmd.Wait()
	code, sig := exitStatus(cmd.ProcessState)
	now := time.Now().UTC()
	j.mu.Lock()
	if j.timer != nil {
		j.timer.Stop()
	}
	j.exitCode, j.signal, j.endedAt = &code, sig, &now
	switch {
	case j.timedOut:
		j.state = api.JobTimedOut
	case j.killRequested:
		j.state = api.JobKilled
	case sig != "":
		j.state = api.JobSignaled
	default:
		j.state = api.JobExited
	}
	if j.stdinW != nil {
		j.stdinW.Close()
	}
	close(j.exited)
	j.notifyLocked()
	state := j.state
	j.mu.Unlock()
	sv.s.log.Info("job ended", "job", j.id, "state", state, "exit", code, "signal", sig)

	done := make(chan struct{})
	go func() { drains.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(pipeGrace):
		for _, r := range readers {
			_ = r.SetReadDeadline(time.Now())
		}
		<-done
	}
	j.mu.Lock()
	j.streamsDone = true
	j.notifyLocked()
	j.mu.Unlock()
}

// readSpool reads up to n bytes of a spool file from off.
func readSpool(path string, off, n int64) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// read returns output from the given offsets, waiting up to wait for
// something new (output, exit or end of streams) when nothing is there.
func (sv *supervisor) read(ctx context.Context, j *job, off, errOff, limit int64, wait time.Duration) (*api.JobRead, error) {
	j.mu.Lock()
	outEnd, errEnd := j.out.retained, j.errs.retained
	wasRunning := j.state == api.JobRunning
	j.mu.Unlock()
	if off > outEnd {
		return nil, fmt.Errorf("%w: offset %d is past the %d bytes of stdout retained", ErrBadRequest, off, outEnd)
	}
	if errOff > errEnd {
		return nil, fmt.Errorf("%w: stderr_offset %d is past the %d bytes of stderr retained", ErrBadRequest, errOff, errEnd)
	}
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
	poll:
		for {
			j.mu.Lock()
			ready := off < j.out.retained || errOff < j.errs.retained || j.streamsDone ||
				(wasRunning && j.state != api.JobRunning)
			changed := j.changed
			j.mu.Unlock()
			if ready {
				break
			}
			select {
			case <-changed:
			case <-timer.C:
				break poll
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	j.mu.Lock()
	snap := j.snapshotLocked()
	outEnd, errEnd = j.out.retained, j.errs.retained
	done := j.streamsDone && j.state != api.JobRunning
	j.mu.Unlock()
	out, err := readSpool(j.out.path, off, min(limit, outEnd-off))
	if err != nil {
		return nil, fmt.Errorf("read stdout spool of job %s: %w", j.id, err)
	}
	errb, err := readSpool(j.errs.path, errOff, min(limit, errEnd-errOff))
	if err != nil {
		return nil, fmt.Errorf("read stderr spool of job %s: %w", j.id, err)
	}
	next, errNext := off+int64(len(out)), errOff+int64(len(errb))
	return &api.JobRead{
		Job:              snap,
		Output:           out,
		NextOffset:       next,
		Stderr:           errb,
		StderrNextOffset: errNext,
		More:             next < outEnd || errNext < errEnd,
		EOF:              done && next == outEnd && errNext == errEnd,
		Truncated:        snap.DroppedBytes > 0,
	}, nil
}

// writeStdin writes to the job's stdin and closes it when asked.
func (sv *supervisor) writeStdin(j *job, in *api.JobStdin) (api.Job, error) {
	if len(in.Data) > api.MaxStdinWriteBytes {
		return api.Job{}, fmt.Errorf("%w: %d bytes of stdin, more than %d per write; split it", ErrTooLarge, len(in.Data), api.MaxStdinWriteBytes)
	}
	j.stdinMu.Lock()
	defer j.stdinMu.Unlock()
	j.mu.Lock()
	var err error
	switch {
	case !j.hasStdin:
		err = fmt.Errorf("%w: job %s was started without stdin; start jobs with stdin: true to write to them", ErrConflict, j.id)
	case j.state != api.JobRunning:
		err = fmt.Errorf("%w: job %s has exited", ErrConflict, j.id)
	case j.stdinClosed:
		err = fmt.Errorf("%w: stdin of job %s is already closed", ErrConflict, j.id)
	}
	w := j.stdinW
	j.mu.Unlock()
	if err != nil {
		return api.Job{}, err
	}
	if len(in.Data) > 0 {
		_ = w.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
		_, err := w.Write(in.Data)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return api.Job{}, fmt.Errorf("%w: job %s did not read its stdin for %s; some data may have been written", ErrConflict, j.id, stdinWriteTimeout)
		case errors.Is(err, syscall.EPIPE):
			return api.Job{}, fmt.Errorf("%w: job %s closed its stdin", ErrConflict, j.id)
		case errors.Is(err, os.ErrClosed):
			return api.Job{}, fmt.Errorf("%w: job %s has exited", ErrConflict, j.id)
		case err != nil:
			return api.Job{}, fmt.Errorf("write stdin of job %s: %w", j.id, err)
		}
	}
	if in.Close {
		w.Close()
		j.mu.Lock()
		j.stdinClosed = true
		j.notifyLocked()
		j.mu.Unlock()
	}
	return j.snapshot(), nil
}

// signal sends sig to the job's process group and waits briefly for it to
// end. Signalling a job that has ended does nothing.
func (sv *supervisor) signal(ctx context.Context, j *job, sig syscall.Signal) (api.Job, error) {
	j.mu.Lock()
	if j.state == api.JobRunning {
		j.killRequested = true
		if err := killGroup(j.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			j.mu.Unlock()
			return api.Job{}, fmt.Errorf("signal job %s: %w", j.id, err)
		}
	}
	exited := j.exited
	j.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(pipeGrace):
	case <-ctx.Done():
	}
	return j.snapshot(), nil
}

func (s *Server) handleStartJob(w http.ResponseWriter, r *http.Request) error {
	var req api.JobRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	j, err := s.jobs.start(&req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, j.snapshot())
	return nil
}

func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.jobs.list())
	return nil
}

func (s *Server) handleReadJob(w http.ResponseWriter, r *http.Request) error {
	j, err := s.jobs.get(r.PathValue("id"))
	if err != nil {
		return err
	}
	off, err := queryInt(r, "offset", 0, 0, api.MaxMaxOutputBytes)
	if err != nil {
		return err
	}
	errOff, err := queryInt(r, "stderr_offset", 0, 0, api.MaxMaxOutputBytes)
	if err != nil {
		return err
	}
	wait, err := queryInt(r, "wait_ms", 0, 0, api.MaxWaitMillis)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", defaultReadLimit, 1, api.MaxRangeBytes)
	if err != nil {
		return err
	}
	res, err := s.jobs.read(r.Context(), j, off, errOff, limit, time.Duration(wait)*time.Millisecond)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleJobStdin(w http.ResponseWriter, r *http.Request) error {
	j, err := s.jobs.get(r.PathValue("id"))
	if err != nil {
		return err
	}
	var in api.JobStdin
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	res, err := s.jobs.writeStdin(j, &in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleSignalJob(w http.ResponseWriter, r *http.Request) error {
	j, err := s.jobs.get(r.PathValue("id"))
	if err != nil {
		return err
	}
	sig, err := parseSignal(r.URL.Query().Get("signal"))
	if err != nil {
		return err
	}
	res, err := s.jobs.signal(r.Context(), j, sig)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
