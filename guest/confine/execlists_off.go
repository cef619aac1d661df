//go:build paddock_guest_without_exec_lists

package confine

// execLists: see execlists.go. This guest ignores execute lists.
const execLists = false
