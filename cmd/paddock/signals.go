package main

import "strings"

// linuxSignals numbers the signals a sandbox reports by name. Sandboxes
// are Linux whatever OS the CLI runs on, so a name means its Linux number
// (macOS numbers SIGUSR1 30, Linux 10); signals_test.go holds the table to
// the Linux headers.
var linuxSignals = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8,
	"SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15,
	"SIGSTKFLT": 16, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGTTIN": 21, "SIGTTOU": 22,
	"SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25, "SIGVTALRM": 26, "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29,
	"SIGPWR": 30, "SIGSYS": 31,
}

// sigKill is SIGKILL's number on Linux.
const sigKill = 9

// linuxSignalNum is the Linux number of a signal named "TERM" or
// "SIGTERM"; 0 for a name it does not know.
func linuxSignalNum(name string) int {
	return linuxSignals["SIG"+strings.TrimPrefix(name, "SIG")]
}
