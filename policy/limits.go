package policy

import (
	"errors"

	"paddock.dev/paddock/errdefs"
)

// Bounds on what the engine takes in.
const (
	// Operator modules (a directory searched recursively, or a bundle).
	MaxExtFiles      = 256      // .rego files (in a bundle: files of any kind)
	MaxExtFileBytes  = 1 << 20  // per file
	MaxExtTotalBytes = 16 << 20 // all files together; a bundle's compressed size too

	// Process rules and commands.
	MaxPatterns     = 64       // per list (allow, deny, ask)
	MaxPatternBytes = 256      // per pattern
	MaxCommandBytes = 64 << 10 // a longer command is refused (rule process.limit)
	// MaxCommandSeparators bounds the pieces of a command: a command with
	// more separator characters (; & | and line breaks) is refused.
	MaxCommandSeparators = 1024
	// MaxEnvBytes bounds a command's environment (ProcessInput.Env, every
	// NAME=value together) and its directory; past it the command is
	// refused (rule process.limit), as a longer command would be. (A
	// sandbox's process takes at most 64 KiB of environment and a 4 KiB
	// directory, so its requests always fit.)
	MaxEnvBytes = 128 << 10

	// Credential grants.
	MaxGrantHosts = 32
)

// Sentinel errors, wrapped with %w; check them with errors.Is.
var (
	// ErrInvalidRules: a session's process rules cannot be used as
	// written; the message says what to change (an API answers 400).
	ErrInvalidRules = errdefs.New(errdefs.ErrInvalidArgument, "invalid process rules")
	// ErrInvalidInput: a decision's input is malformed (an unknown kind
	// or action, a grant whose limits do not check out).
	ErrInvalidInput = errdefs.New(errdefs.ErrInvalidArgument, "invalid policy input")
	// ErrLoad: the modules could not be loaded (read, parse, compile, a
	// package outside paddock.ext, a limit, or a failing test). The
	// previous set stays in force.
	// It never reaches the API (the daemon reports it on its policy
	// status), so it is of no kind: the CLI exits 1 with it.
	ErrLoad = errors.New("policy modules refused")
	// ErrEval: a module failed while deciding (a built-in function error,
	// a conflict, the time limit). The decision returned with it denies.
	ErrEval = errdefs.New(errdefs.ErrInternal, "policy evaluation failed")
)
