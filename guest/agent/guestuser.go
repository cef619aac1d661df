package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"

	"golang.org/x/sys/unix"

	"paddock.dev/paddock/errdefs"
	"paddock.dev/paddock/guest/api"
)

// The files routes act with the guest user's rights. The agent runs as
// root, and a write it made as root could replace anything in the
// sandbox: a program an execute allow-list lets start, the shell every
// command runs under, the agent itself. So every file operation a
// request asks for (list, read, write, delete, upload complete) runs on
// an OS thread of its own whose file-system identity is the guest user's:
// setfsuid and setfsgid to the guest user, no supplementary groups, and
// an empty capability set (no CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN,
// CAP_SYS_PTRACE, ...). All of these are per thread in Linux; the Go
// runtime never runs another goroutine on a locked thread, and a thread
// whose goroutine ends locked is destroyed instead of reused, so the
// lowered thread serves exactly one request and never the rest of the
// agent. The kernel then checks every path component with the guest
// user's permissions, which no symbolic link race can get around: a
// link the sandbox plants leads only where the guest user may go anyway.
//
// The guard (deny.go) adds what permissions cannot say: the image's
// system directories and the programs of an execute allow-list are never
// written, whoever owns them.
//
// The agent's own bookkeeping (upload parts, the spool, the workspace
// setup at create, manifests) stays root's.

// asGuest runs fn with the guest user's file rights (see above), or
// directly when the agent has no guest user to act as (not root, or no
// GuestUser). A permission refusal becomes a 403 that says whose rights
// apply; op and clean name the operation and path for it.
func (s *Server) asGuest(op, clean string, fn func() error) error {
	if !s.chown {
		return s.explainPermission(op, clean, fn())
	}
	errc := make(chan error, 1)
	lowered := func() {
		runtime.LockOSThread()
		// Never unlocked: see above.
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("%s %s: panic: %v", op, clean, r)
			}
		}()
		if err := lowerThread(s.uid, s.gid); err != nil {
			errc <- fmt.Errorf("act as the guest user %d:%d: %w", s.uid, s.gid, err)
			return
		}
		errc <- fn()
	}
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			lowered()
			return
		}
		// The main thread is never destroyed (the runtime parks it for
		// good instead), so it must not be the one lowered: while this
		// goroutine holds it, the lowered one runs on another thread.
		done := make(chan struct{})
		go func() { defer close(done); lowered() }()
		<-done
		runtime.UnlockOSThread()
	}()
	return s.explainPermission(op, clean, <-errc)
}

// lowerThread gives the calling thread, which must be locked and never
// unlocked, the guest user's file-system identity and no capabilities.
func lowerThread(uid, gid int) error {
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("drop supplementary groups: %w", err)
	}
	if _, err := unix.SetfsgidRetGid(gid); err != nil {
		return fmt.Errorf("setfsgid: %w", err)
	}
	if _, err := unix.SetfsuidRetUid(uid); err != nil {
		return fmt.Errorf("setfsuid: %w", err)
	}
	// setfsuid and setfsgid report no failure but EPERM: an invalid id
	// (-1) reads the current one back.
	if cur, _ := unix.SetfsgidRetGid(-1); cur != gid {
		return fmt.Errorf("fsgid is %d after setfsgid(%d)", cur, gid)
	}
	if cur, _ := unix.SetfsuidRetUid(-1); cur != uid {
		return fmt.Errorf("fsuid is %d after setfsuid(%d)", cur, uid)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	var got [2]unix.CapUserData
	if err := unix.Capget(&hdr, &got[0]); err != nil {
		return fmt.Errorf("read capabilities back: %w", err)
	}
	if got[0].Effective|got[1].Effective|got[0].Permitted|got[1].Permitted != 0 {
		return errors.New("capabilities remain after clearing them")
	}
	return nil
}

// explainPermission turns a permission refusal from the kernel into a 403
// (code permission_denied) that says the files routes act as the guest
// user; other errors pass unchanged.
func (s *Server) explainPermission(op, clean string, err error) error {
	var coded *errdefs.CodedError
	if err == nil || !errors.Is(err, fs.ErrPermission) || errors.As(err, &coded) {
		return err
	}
	who := "the agent's user"
	if s.chown {
		who = fmt.Sprintf("the guest user (uid %d)", s.uid)
	}
	return withCode(api.CodePermission, fmt.Errorf("%w: %s may not %s %s (%v), and the files routes act with its rights; write in the workspace, /tmp, /var/tmp or the guest's home",
		ErrForbidden, who, op, clean, unwrapErrno(err)))
}

// unwrapErrno is the errno inside err, or err itself.
func unwrapErrno(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
