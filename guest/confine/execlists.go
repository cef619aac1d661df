//go:build !paddock_guest_without_exec_lists

package confine

// execLists is true in every guest but one built with the
// paddock_guest_without_exec_lists tag. Tests build that guest to play
// one that does not enforce execute lists (as a guest older than them
// would): it leaves Confinement.Exec out and reports no execute list, and
// the daemon's create-time probe must refuse it. Release builds (make
// build, make guest) never set the tag.
const execLists = true
