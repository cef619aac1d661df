package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations is the schema history. Entry i is version i+1. Append new
// versions at the end; never edit one that has shipped. Each is applied with
// its version row in the one transaction Open runs, so a database is never
// left between two versions.
//
// The ledger table lives here too, so the database has one schema version,
// and so does ledger_heads, each session's recorded head (migration 9).
// Their rows are written and read only by package ledger (which imports this
// package, never the other way round); they have no foreign key to sessions
// because a session's ledger outlives the session row. The two triggers make
// it append-only for anything going through SQLite's normal paths; someone
// with the file can still drop them, which is what the hash chain detects.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE sessions (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL,
	revision   INTEGER NOT NULL CHECK (revision >= 0),
	state      TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	record     TEXT NOT NULL CHECK (json_valid(record))
);
CREATE INDEX sessions_tenant_created ON sessions (tenant, created_at, id);
CREATE INDEX sessions_created ON sessions (created_at, id);

CREATE TABLE checkpoints (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	tag        TEXT NOT NULL,
	snapshot   TEXT NOT NULL CHECK (json_valid(snapshot)),
	created_at TEXT NOT NULL,
	PRIMARY KEY (session_id, tag)
);

CREATE TABLE jobs (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	job_id     TEXT NOT NULL,
	command    TEXT NOT NULL,
	record     TEXT NOT NULL CHECK (json_valid(record)),
	PRIMARY KEY (session_id, job_id)
);

CREATE TABLE uploads (
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	upload_id  TEXT NOT NULL,
	record     TEXT NOT NULL CHECK (json_valid(record)),
	PRIMARY KEY (session_id, upload_id)
);

CREATE TABLE idempotency (
	scope        TEXT NOT NULL,
	key          TEXT NOT NULL,
	request_hash TEXT NOT NULL,
	done         INTEGER NOT NULL DEFAULT 0,
	response     BLOB,
	created_at   TEXT NOT NULL,
	PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);

CREATE TABLE ledger (
	session TEXT NOT NULL,
	seq     INTEGER NOT NULL CHECK (seq >= 1),
	time    TEXT NOT NULL,
	kind    TEXT NOT NULL,
	actor   TEXT NOT NULL,
	data    TEXT NOT NULL,
	prev    TEXT NOT NULL,
	hash    TEXT NOT NULL,
	PRIMARY KEY (session, seq)
);
CREATE INDEX ledger_session_time ON ledger (session, time);
CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'ledger is append-only'); END;
CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger
BEGIN SELECT RAISE(ABORT, 'ledger is append-only'); END;
`,
	// 2: usage counters, apart from the record so counting never bumps
	// the session's revision.
	`
CREATE TABLE usage (
	session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	execs      INTEGER NOT NULL DEFAULT 0 CHECK (execs >= 0),
	exec_ms    INTEGER NOT NULL DEFAULT 0 CHECK (exec_ms >= 0),
	jobs       INTEGER NOT NULL DEFAULT 0 CHECK (jobs >= 0)
);
`,
	// 3: session tokens (issue 5, identity): bearer tokens for one
	// session and some operations. Only the SHA-256 of a token is kept
	// (hex); id is the token's public part. A revoked token keeps its row
	// (revoked_at set) until its session row goes.
	`
CREATE TABLE tokens (
	id         TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	hash       TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),
	ops        TEXT NOT NULL CHECK (json_valid(ops)),
	label      TEXT NOT NULL DEFAULT '',
	created_by TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	revoked_at TEXT
);
CREATE INDEX tokens_session ON tokens (session_id, expires_at);
`,
	// 4: budgets and interrupted operations. The usage row gains the
	// counters budgets need (fork children, the time of finished jobs, the
	// last workspace measure). lifecycle_ops holds one marker per session
	// while a checkpoint, restore, fork or delete runs; a marker left by a
	// daemon that died mid-way is how the next one reports the
	// interruption (reported: ledgered already).
	`
ALTER TABLE usage ADD COLUMN children INTEGER NOT NULL DEFAULT 0 CHECK (children >= 0);
ALTER TABLE usage ADD COLUMN job_ms INTEGER NOT NULL DEFAULT 0 CHECK (job_ms >= 0);
ALTER TABLE usage ADD COLUMN workspace_bytes INTEGER NOT NULL DEFAULT 0 CHECK (workspace_bytes >= 0);
CREATE TABLE lifecycle_ops (
	session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	op         TEXT NOT NULL CHECK (op IN ('checkpoint', 'restore', 'fork', 'delete')),
	started_at TEXT NOT NULL,
	daemon     TEXT NOT NULL,
	reported   INTEGER NOT NULL DEFAULT 0 CHECK (reported IN (0, 1))
);
`,
	// 5: approval requests: commands held for an operator, bound by
	// digest; at most one live pending request per (session, digest) is
	// kept by the code, which finds it before making another.
	`
CREATE TABLE approvals (
	id          TEXT NOT NULL,
	session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	kind        TEXT NOT NULL CHECK (kind IN ('exec', 'job')),
	digest      TEXT NOT NULL,
	command     TEXT NOT NULL,
	summary     TEXT NOT NULL,
	matched     TEXT NOT NULL,
	state       TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'consumed')),
	requester   TEXT NOT NULL,
	decider     TEXT NOT NULL DEFAULT '',
	note        TEXT NOT NULL DEFAULT '',
	created_at  TEXT NOT NULL,
	expires_at  TEXT NOT NULL,
	decided_at  TEXT NOT NULL DEFAULT '',
	consumed_at TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (session_id, id)
);
CREATE INDEX approvals_by_digest ON approvals (session_id, digest, state);
`,
	// 6: preview URLs (issue 6): an expiring URL that reaches one TCP
	// port of a session's sandbox. Only the SHA-256 of the URL's token is
	// kept (hex); a revoked preview's row is deleted, an expired one's
	// when its session next mints one or ends.
	`
CREATE TABLE previews (
	id         TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	hash       TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),
	port       INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
	created_by TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL
);
CREATE INDEX previews_session ON previews (session_id, expires_at);
`,
	// 7: the egress log (issue 16): the proxy's and resolver's decisions
	// kept apart from the hash-chained ledger, so they can be pruned
	// (paddock serve --egress-log-retention) without breaking a chain.
	// A row is one decision, or (summary = 1) the count of those like it
	// that a window folded together. No foreign key: like the ledger,
	// the log outlives the session row; retention removes it.
	`
CREATE TABLE egress_log (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	session   TEXT NOT NULL,
	time      TEXT NOT NULL,
	last_time TEXT NOT NULL,
	kind      TEXT NOT NULL,
	host      TEXT NOT NULL,
	reason    TEXT NOT NULL,
	count     INTEGER NOT NULL CHECK (count >= 1),
	summary   INTEGER NOT NULL CHECK (summary IN (0, 1)),
	data      TEXT NOT NULL CHECK (json_valid(data))
);
CREATE INDEX egress_log_session ON egress_log (session, id);
CREATE INDEX egress_log_time ON egress_log (last_time);
`,
	// 8: the CPU time of a session's sandbox (issue 16): cpu_ms is what
	// was charged to it, cpu_seen_ms the machine's reading it was last
	// charged up to (the machine counts from its creation).
	`
ALTER TABLE usage ADD COLUMN cpu_ms INTEGER NOT NULL DEFAULT 0 CHECK (cpu_ms >= 0);
ALTER TABLE usage ADD COLUMN cpu_seen_ms INTEGER NOT NULL DEFAULT 0 CHECK (cpu_seen_ms >= 0);
`,
	// 9: each session's ledger head (issue 16): how many entries its
	// ledger holds and the hash of the last, written by package ledger in
	// the transaction of every append, so a verify can tell a ledger
	// whose newest entries (or all of them) were removed from a whole
	// one. Like the ledger it outlives the session row (a sandbox's row
	// goes at its expiry) and has no foreign key. A head only moves one
	// entry forward and is never deleted, through SQLite's normal paths.
	// Ledgers from before are given their head as they stand.
	`
CREATE TABLE ledger_heads (
	session TEXT PRIMARY KEY,
	seq     INTEGER NOT NULL CHECK (seq >= 1),
	hash    TEXT NOT NULL CHECK (length(hash) = 64)
);
INSERT INTO ledger_heads (session, seq, hash)
	SELECT l.session, l.seq, l.hash FROM ledger AS l
	WHERE l.seq = (SELECT MAX(seq) FROM ledger WHERE session = l.session);
CREATE TRIGGER ledger_heads_forward BEFORE UPDATE ON ledger_heads
WHEN NEW.session != OLD.session OR NEW.seq != OLD.seq + 1
BEGIN SELECT RAISE(ABORT, 'a ledger head only moves forward'); END;
CREATE TRIGGER ledger_heads_no_delete BEFORE DELETE ON ledger_heads
BEGIN SELECT RAISE(ABORT, 'a ledger head only moves forward'); END;
`,
	// 10: what happened to a session's machine, told by the daemon and
	// its backend (issue 18): boot, checkpoint, restore, fork, stop, oom,
	// death. Served as the events' vm_events and merged into the
	// trajectory. Like the egress log it is not the ledger (no hash
	// chain) and has no foreign key: like the ledger, the rows outlive
	// the session row. AppendVMEvent keeps each session's newest 5000.
	`
CREATE TABLE vm_events (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	session TEXT NOT NULL,
	time    TEXT NOT NULL,
	kind    TEXT NOT NULL,
	data    TEXT NOT NULL CHECK (json_valid(data))
);
CREATE INDEX vm_events_session ON vm_events (session, id);
`,
	// 11: changesets (issue 18): what a command speculated on a session
	// or sandbox would change, kept for review, decision and apply. The
	// record holds the whole changeset (file contents too), so it is
	// bounded by MaxChangesetRecordBytes, not MaxRecordBytes. The rows go
	// with the session row, and the daemon drops them when a session is
	// deleted (its row stays).
	`
CREATE TABLE changesets (
	id         TEXT PRIMARY KEY,
	target     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	status     TEXT NOT NULL,
	created_at TEXT NOT NULL,
	record     TEXT NOT NULL CHECK (json_valid(record))
);
CREATE INDEX changesets_target ON changesets (target, created_at);
`,
	// 12: each session's rewind ring (issue 18), so its points outlive a
	// daemon restart: rewind_rings holds the config (as the API shows it)
	// and the tag counter, rewind_points the points, oldest first by pos,
	// each with the backend's snapshot record (what a restore needs).
	// Written by hostd/rewind whenever the ring changes and deleted with
	// the session's points; no foreign key, like the other per-session
	// tables that are not the session row.
	`
CREATE TABLE rewind_rings (
	session TEXT PRIMARY KEY,
	config  TEXT NOT NULL CHECK (json_valid(config)),
	seq     INTEGER NOT NULL CHECK (seq >= 0)
);
CREATE TABLE rewind_points (
	session    TEXT NOT NULL,
	tag        TEXT NOT NULL,
	pos        INTEGER NOT NULL CHECK (pos >= 0),
	kind       TEXT NOT NULL,
	command    TEXT NOT NULL,
	memory     INTEGER NOT NULL CHECK (memory IN (0, 1)),
	pinned     INTEGER NOT NULL CHECK (pinned IN (0, 1)),
	snapshot   TEXT NOT NULL CHECK (json_valid(snapshot)),
	created_at TEXT NOT NULL,
	PRIMARY KEY (session, tag)
);
`,
}

// SchemaVersion is the version a database has after Open.
func SchemaVersion() int { return len(migrations) }

// migrate brings the schema up to date in one transaction.
func (s *Store) migrate(ctx context.Context) error {
	return s.WithTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at TEXT NOT NULL
		)`); err != nil {
			return fmt.Errorf("migrations table: %w", err)
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if have > len(migrations) {
			return fmt.Errorf("database schema is version %d, this binary knows up to %d: use a newer paddock", have, len(migrations))
		}
		for v := have + 1; v <= len(migrations); v++ {
			if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				v, formatTime(s.now())); err != nil {
				return fmt.Errorf("migration %d: record version: %w", v, err)
			}
		}
		return nil
	})
}
