// Generated from docs/api/openapi.yaml by scripts/gen-types.mjs; do not edit.
export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List sessions, oldest first
         * @description Sandboxes (the /v1/sandboxes routes) are never listed here.
         */
        get: operations["listSessions"];
        put?: never;
        /** Create a session, its sandbox, workspace and the workspace baseline */
        post: operations["createSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * One session
         * @description Answers for every state, deleted included (with deleted_at). A running session whose sandbox this daemon does not have shows as gone.
         */
        get: operations["getSession"];
        put?: never;
        post?: never;
        /**
         * Delete the session (idempotent)
         * @description Stops the sandbox and removes its checkpoints, jobs, uploads and usage rows. The record stays in state deleted (with deleted_at) beside its ledger: GET, events and trajectory still answer, the routes that need a running session answer 409. An unknown id is 204 too. The delete takes the session's lifecycle slot like checkpoint, restore and fork (and, unlike restore and fork, goes ahead while commands run: it is how a stuck session is ended).
         */
        delete: operations["deleteSession"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/exec": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a shell line in the workspace and wait for it; ledgered
         * @description /bin/sh -c in the workspace directory, under the read-only policy when the workspace is read-only. stdout and stderr are kept up to 16 MiB each, or the budget's max_output_bytes (truncated, and a marker appended, beyond). Under a budget the command is counted in execs when it starts, and its timeout is lowered to the seconds max_exec_seconds and max_compute_seconds leave.
         */
        post: operations["exec"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/exec/stream": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a command as a job and stream it as Server-Sent Events
         * @description Starts a job (as POST .../jobs would) and follows it. Unlike exec, timeout_seconds is passed to the job as it is: 0 or absent means no timeout, and the limit is the guest's (86400). The command is ledgered when it exits. To resume after a dropped connection, follow the job with GET .../jobs/{job}/stream and the last event id (this route does not read Last-Event-ID). Under a budget it is a job (usage.jobs, max_jobs, max_concurrent_jobs, job time in compute) and a command as well (usage.execs, max_execs, so max_execs bounds every command whichever route runs it), and max_compute_seconds caps its timeout to what is left.
         */
        post: operations["execStream"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/checkpoint": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Checkpoint the sandbox under a tag */
        post: operations["checkpoint"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/restore": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Put the sandbox back to one of this session's checkpoints */
        post: operations["restore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Fork into count children from the current state or a checkpoint
         * @description The parent is not replaced, so running jobs, execs and terminals do not stop a fork. A disk fork (procbox) starts the children from the files and lists the running jobs in not_carried; a memory fork (qemu: the state now is taken with memory, or from names a memory checkpoint) carries the running processes, and each child gets the parent's job records. Each child is a running session whose parent is this one, whose workspace baseline is the parent's workspace at the fork, and which expires with the parent. A child that could not be recorded is left out, so fewer than count may come back. Under a budget the children count in usage.children (given back when the fork fails or makes fewer), and each child's budget is what its parent had left: the parent's limits minus its usage.
         */
        post: operations["fork"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/promote": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Carry a fork child's workspace changes back to its parent
         * @description {id} is the fork child. A three-way merge of the child's baseline (its parent's workspace at the fork), the child now and the parent now, over the regular files under the workspace: apply (what the child changed and the parent did not), already_applied, conflicts (the parent changed the path too) and the count of untouched files, with a plan_id digest. dry_run answers the plan and changes nothing. Otherwise, before the first write, the parent gets a disk checkpoint pre-promote-<child>-<time> (answered as checkpoint; restoring it undoes the promotion), then the files are copied with their permission bits through the parent's write steps (read-only workspace, budget, command hooks, the write guard). Both sessions are held while it runs: commands and lifecycle operations on either answer 409. Ledgered as promote on the parent and promote.out on the child. Never open to a session token.
         */
        post: operations["promote"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/artifacts": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** Workspace changes since the baseline, checkpoints, children, usage */
        get: operations["artifacts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The session's ledger and VM events
         * @description Answers for every state, deleted included. At most 10000 ledger entries and 10000 VM events. With no query, the oldest ledger entries; with since, those after it; with after, those after that seq (for the VM events: from that entry's time on). These come oldest first, at most limit of them, and ledger_more says more follow. tail gives the newest ledger entries and VM events instead and goes with none of since, after and limit.
         */
        get: operations["events"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/events/stream": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The ledger as Server-Sent Events
         * @description Sends the history (after Last-Event-ID, a ledger seq, when given; else only the entries newer than since, when given), then new entries as they come, polled about every 500 ms. VM events come as vm events without an id, so Last-Event-ID stays a ledger seq; a resumed stream sends the VM events from the time of that ledger entry on (one with that exact time may repeat). It ends with an error event once the session is no longer running (so a stopped session's stream sends its history and ends) or after an hour.
         */
        get: operations["eventsStream"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/trajectory": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The session's history as numbered, time-ordered steps
         * @description Ledger entries and VM events (source vm) in time order, at most the first 10000 of each.
         */
        get: operations["trajectory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/ledger/verify": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * Whether the session's ledger chain holds together
         * @description Recomputes every entry's hash, checks each link to the entry before, and holds the chain to the head recorded with the appends (hostd/ledger.Verify). A broken chain is a 200 with ok false and where and why it breaks; the check reads the whole ledger and changes nothing. One verify runs per session at a time (callers meanwhile share its answer), at most 2 per tenant and 4 per daemon.
         */
        get: operations["verifyLedger"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/git/status": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * git status --short --branch of a repository (default the workspace)
         * @description Git reads an allow-listed copy of the repository's config, never the repository's own, and runs no program it names (fsmonitor, hooks, filters, pagers, helpers: docs/git.md). Ledgered as git.status.
         */
        get: operations["gitStatus"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/git/diff": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * git diff of a repository, cut at 256 KiB
         * @description With --no-ext-diff --no-textconv and the repository's config read as untrusted (docs/git.md). Ledgered as git.diff.
         */
        get: operations["gitDiff"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/git/log": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The last n commits of a repository
         * @description Signatures are not verified; the repository's config is read as untrusted (docs/git.md). Ledgered as git.log.
         */
        get: operations["gitLog"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/git/commit": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Stage everything (unless staged_only) and commit
         * @description Uses message, repo and staged_only. Commits as the repository's configured user or "Paddock Agent <agent@paddock.local>", never signed, with plumbing that runs no hook; submodules are not staged (docs/git.md). One exec of the session's budget (max_execs, exec time). Ledgered as git.commit.
         */
        post: operations["gitCommit"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/git/branch": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Create a branch and switch to it
         * @description Uses name and repo. Done with update-ref and symbolic-ref (no hook, no checkout: docs/git.md); ledgered as git.branch.
         */
        post: operations["gitBranch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/probe": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** Which tools the sandbox has and what that makes ready */
        get: operations["probe"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/uploads": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** List the session's uploads */
        get: operations["listUploads"];
        put?: never;
        /**
         * Open a resumable upload; at most 8 open per session
         * @description Under budget.max_workspace_bytes the workspace is measured (du) and the upload refused, 403 with a BudgetExceeded body, when the workspace plus its size would pass the limit; complete measures again.
         */
        post: operations["openUpload"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/uploads/{upload}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        /** One upload; received is where to continue */
        get: operations["getUpload"];
        /** Send a chunk at offset, which must be the bytes received so far */
        put: operations["uploadChunk"];
        post?: never;
        /** Abort an upload and drop its parts */
        delete: operations["abortUpload"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/uploads/{upload}/complete": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Assemble, verify (size, sha256) and rename into place; repeatable
         * @description A second call after success answers the same record. Ledgered as file.upload. Under budget.max_workspace_bytes the workspace is measured again (it may have grown since the open): 403 with a BudgetExceeded body, and nothing written, when it plus the upload would pass the limit.
         */
        post: operations["completeUpload"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/approvals": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The session's approval requests, oldest first
         * @description Commands held by an ask rule of the process policy: pending, approved, denied, consumed (run once) or expired. At most 64 are pending at once per session; they go with the session's cleanup.
         */
        get: operations["listApprovals"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/approvals/{approval}/approve": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An approval request's id (apr-…). */
                approval: components["parameters"]["ApprovalID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Approve a held command (admin only)
         * @description Who may decide is the approval Rego module's call: the admin only by default; a tenant and a session token are refused (an agent cannot approve its own command). Ledgered as approval.approved with the approver and the note. The approved request then runs its command exactly once, when the caller retries with approval_id or a request held with approval_wait_seconds wakes.
         */
        post: operations["approve"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/approvals/{approval}/deny": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An approval request's id (apr-…). */
                approval: components["parameters"]["ApprovalID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Deny a held command (admin only)
         * @description As approve; a denied request stays denied, and retries with it are 403. Ledgered as approval.denied.
         */
        post: operations["deny"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/grants": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** List the session's live grants (never their values) */
        get: operations["listGrants"];
        put?: never;
        /**
         * Give the session a credential the egress proxy adds for it
         * @description The proxy sets the grant's header on the session's requests to its hosts (within its methods and paths), inside TLS it intercepts only: plain HTTP never carries it, and the sandbox never holds it. The credential is the body's value, or the daemon's environment variable PADDOCK_SECRET_<secret_ref>, read now. Who may grant: the admin, anything on any session; a tenant, only a value it sends itself, on its own sessions (secret_ref is 403 with code secret_ref_admin_only, whatever the session and whether the variable exists); a session token, nothing on any grant route. Grants live in the daemon's memory only: they are never written to the database or the ledger, so a daemon restart forgets them (an adopted session has none until granted again). Deleting, expiring or losing the session drops them; fork children start with none; a restore keeps them. At most 16 live grants per session. Ledgered as grant.create (id, hosts, and secret_ref as ref; never the value). The body is at most 114688 bytes.
         */
        post: operations["createGrant"];
        /**
         * Revoke every grant of the session
         * @description Idempotent. Each live grant is ledgered as grant.revoke.
         */
        delete: operations["revokeGrants"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/grants/{grant}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A grant's id (gr-…). */
                grant: components["parameters"]["GrantID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke one grant
         * @description Ledgered as grant.revoke.
         */
        delete: operations["revokeGrant"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** List the session's live tokens (never a token or its hash) */
        get: operations["listTokens"];
        put?: never;
        /**
         * Mint a bearer token for this session and some operations
         * @description Needs the admin token or the session's tenant's token; a session token cannot mint (403). The answer carries the token once (Cache-Control: no-store); the daemon keeps its SHA-256 only. The token lasts ttl_seconds, never past the session's expires_at, and is revoked when the session is deleted or expires. At most 32 live tokens per session. Ledgered as token.mint (id, ops, label, expires_at; never the token).
         */
        post: operations["mintToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/tokens/{token}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A session token's public id (tok-…), never the token. */
                token: components["parameters"]["TokenID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke one session token, at once
         * @description The token stops working for new calls at once, and calls in progress with it (streams, long polls) end within a second. Idempotent: a token of this session that is already revoked or expired answers 204 and changes nothing. Ledgered as token.revoke (when it was live).
         */
        delete: operations["revokeToken"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/replay": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run this session's exec commands again, in order, in another session
         * @description Reads the exec entries of this session's ledger (seq since to until, both included) and runs each command through the target's own exec, so the target's process policy, approvals, budget, confinement and ledger apply as if the caller had sent it; the target's ledger gets one replay entry besides. Needs read on this session and exec on the target (a session token works on its own session only, so it can replay into no other), each tenant-scoped: another tenant's session, as source or target, is 404. Without a target, dry_run is required: it lists the steps and the skipped entries and runs nothing. File writes, uploads, deletes, jobs, git steps, promotions and restores are listed under skipped with the reason (the ledger keeps what was done, not the content). A replay stops at the first step that exits non-zero (unless stop_on_failure is false), and always at a step the target refuses or holds for approval: the answer is still 200, with stopped carrying the target's answer (status and body, such as the 403 of the process policy or the 428 with its approval) and next_since to go on from. At most 500 commands, 50000 ledger entries read and an hour per request.
         */
        post: operations["replaySession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/speculate": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a command in an isolated copy and keep its file changes as a pending changeset
         * @description The session is forked into one copy (counted in max_children like a fork child, and deleted afterwards); the command runs there, and the files added, modified or deleted under paths (absolute, or relative to the workspace; 1 to 32, no '..', not /) are kept with their new contents (at most 1 MiB a file, 16 MiB and 2000 files a changeset; past that the file is listed with content_omitted and the changeset is incomplete). The session itself is untouched, its running jobs included. The command walks the session's own policy, approvals and budget as an exec does and is counted as one. side_effects.network says whether the copy could reach the network. Ledgered as speculate (never contents).
         */
        post: operations["speculate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/changesets": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** The session's changesets, oldest first, without file contents */
        get: operations["listChangesets"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/changesets/{changeset}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        /** One changeset with its file contents */
        get: operations["getChangeset"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/changesets/{changeset}/decide": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Approve or reject a pending changeset
         * @description Only the admin or a tenant decides; a session token is 403, so an agent never approves its own changeset. Ledgered as changeset.decide.
         */
        post: operations["decideChangeset"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/changesets/{changeset}/apply": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Write an approved changeset into the session
         * @description Every file is checked first: a modified or deleted file must still have its base_sha256, an added one must not exist. When one fails, nothing is written (409 changeset_conflict naming the paths). Otherwise the files are written (modes kept) and deleted through the files routes' pipeline (its guards, budget and ledger), and the changeset is applied, once. The budget is asked for the whole changeset before the first write. A write the guest agent refuses midway (a system path, the execute list) stops the apply there: the files before it stay written, the ledger's changeset.apply entry says how many, and the changeset stays approved (a retry then finds those files changed: a conflict). Ledgered as changeset.apply.
         */
        post: operations["applyChangeset"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/preview": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Make an expiring URL that reaches one TCP port of the sandbox
         * @description The answer carries the token and the URL (/preview/<token>/, relative to the daemon's address) once, with Cache-Control: no-store; the daemon keeps the token's SHA-256 only. The URL is the credential: GET, POST, WebSocket or any other request to /preview/<token>/<path> (or to <token>.preview.<domain>/<path> where the daemon is given a preview domain) needs no bearer token and reaches <path> on the port, on the sandbox's own loopback (127.0.0.1, or ::1 when only that listens), through the guest agent; the session needs no network policy for it. An unknown, malformed, expired or revoked token, or one whose session is not running, answers the same 404, byte for byte; a live one whose port does not answer is 502. The guest never sees the viewer's Cookie, Authorization, Forwarded, X-Forwarded-* or Paddock-* headers, and sees Host localhost:<port>. Every answer carries Content-Security-Policy sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads (the page runs in an opaque origin), Referrer-Policy no-referrer and Cache-Control no-store, and loses Set-Cookie, Clear-Site-Data, HSTS and reporting headers. Redirects to the guest's own paths stay under the preview. Chrome DevTools documents (/json, /json/list, /json/version, /json/new) get their webSocketDebuggerUrl and devtoolsFrontendUrl pointed at the preview (wss with X-Forwarded-Proto https). Request bodies are at most 64 MiB and headers 64 KiB. The preview lasts ttl_seconds, never past the session's expires_at; it ends, and connections through it are closed, when it expires, is deleted, or its session is deleted or expires. At most 16 live previews per session; the sandbox's own egress ports (53, 3128, 3129) are refused. Ledgered as preview.create (id, port, expires_at; never the token); the traffic is not ledgered.
         */
        post: operations["createPreview"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/previews": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** List the session's live previews (never a token or URL) */
        get: operations["listPreviews"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/preview/{preview}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description The preview's id (pv- and 16 hex digits) or its token (pvw- and 52 characters, as in its URL). A token is looked up by its SHA-256 among this session's previews; it is never repeated in an error or written to hostd's log. */
                preview: components["parameters"]["PreviewID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Delete one preview, at once
         * @description Takes the preview's id (pv-…) or its token (pvw-…). Its URL answers 404 from now on, like one that never existed, and connections open through it (WebSockets included) are closed. Ledgered as preview.delete (id, port, expires_at, reason revoked) when it was live.
         */
        delete: operations["deletePreview"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/files": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * List a directory (kind dir) or stat a file (kind file)
         * @description A directory lists at most 10000 entries (truncated beyond).
         */
        get: operations["listFiles"];
        put?: never;
        post?: never;
        /**
         * Remove a file, or a directory with recursive=true
         * @description / and top-level directories are refused (400), also through links. Ledgered.
         */
        delete: operations["deleteFile"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/files/content": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** Read a whole file of at most 8 MiB (use files/range beyond) */
        get: operations["readFile"];
        /**
         * Write a whole file; ledgered as path and size
         * @description Under budget.max_workspace_bytes the workspace is measured first (du) and the write refused, 403 with a BudgetExceeded body, when the workspace plus the content would pass the limit.
         */
        put: operations["writeFile"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/files/range": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** Read up to 4 MiB of a file from an offset */
        get: operations["readRange"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/jobs": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** List the sandbox's jobs */
        get: operations["listJobs"];
        put?: never;
        /** Start a supervised background job; ledgered */
        post: operations["startJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/jobs/{job}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        /** Read a job's output from offsets, waiting up to wait_ms for more */
        get: operations["readJob"];
        put?: never;
        post?: never;
        /** Signal the job's whole process tree; ledgered */
        delete: operations["signalJob"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/jobs/{job}/stdin": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Write to or close a job's stdin; ledgered as sizes only */
        post: operations["jobStdin"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/jobs/{job}/stream": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        /**
         * Follow a job as Server-Sent Events
         * @description Starts at offset and stderr_offset, or at Last-Event-ID when given (it wins), and ends with the job's exit event.
         */
        get: operations["jobStream"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/pty": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * A terminal in the sandbox, over a WebSocket
         * @description A WebSocket (send Connection: Upgrade and Upgrade: websocket; a plain GET is 400). Every refusal is a JSON error before the upgrade. After it, the daemon bridges the caller to a real terminal in the guest (a pseudo-terminal: line editing, job control and full-screen programs work) running the guest user's login shell, or command through /bin/sh -c. Binary messages carry terminal bytes both ways, byte for byte; a text message from the caller resizes the terminal (TerminalResize). The daemon closes the WebSocket when the shell ends, with close code 1000 and reason exit=<code> (128+n when signal n ended it).
         *     Admin and tenant tokens only: a session token is 403 (a terminal runs anything, so it is never grantable). A browser, whose WebSocket cannot send Authorization, opens it with ?ticket= from POST .../pty-ticket instead. Refused (403) on a session with process rules (policy.process, an enforced execute list included), a read-only workspace, or a budget on its commands (any budget field but max_children): those are enforced per command, and the commands typed into a shell never pass through them (the guest's terminal cannot be started under the read-only confinement). A terminal takes the session like an exec: a checkpoint, restore, fork or delete in progress refuses it (409), and a restore or fork refuses while one is open. At most 16 terminals at once on a daemon, and at most 8 of them one tenant's (the admin is held only by the 16); 409 beyond, saying which limit. Each at most one hour. The session's budget does not count or limit terminals. Ledgered as pty.open (cols, rows, command) and pty.close (duration_ms, exit_code, null when the shell did not exit by itself, bytes_in, bytes_out, ended: exit, client, sandbox, max_age, daemon, bad_frame or upgrade_failed); never what is typed or shown.
         */
        get: operations["openTerminal"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/pty-ticket": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A single-use ticket that opens one terminal (for browsers)
         * @description A browser's WebSocket cannot send Authorization, so it opens GET .../pty?ticket=<ticket> instead of using its token. The ticket is 256 random bits, opens one terminal on this session only, as the caller who asked for it, within 30 seconds; it is spent by its first use, whatever the outcome. It lives in the daemon's memory only (a restart forgets it) and is never ledgered or logged; keep it out of logs of your own (it travels in a URL). Admin and tenant tokens only. No body is read.
         */
        post: operations["terminalTicket"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/policy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The policy modules in force (admin only)
         * @description The built-in Rego modules and the operator's (paddock serve --policy-ext), the revision of the set in force, and, when the last load of the operator's modules was refused (a module that does not compile, a package outside paddock.ext, a failing test), why and when: the previous set stays in force meanwhile.
         */
        get: operations["policyStatus"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/tenants": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tenants, their limits and session counts (admin only)
         * @description The tenants of the tenants file (paddock serve --tenants), in file order, each with the limits its live sandboxes share (default_limits filled in; 0 is the built-in default) and how many of its sessions and sandboxes are not deleted. No token or token hash. Empty when the daemon has no tenants file.
         */
        get: operations["listTenants"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/whoami": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * What the caller's token is
         * @description Any valid token. Never the token itself.
         */
        get: operations["whoami"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/backends": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The backends a create may name, and what each can do here
         * @description Every backend this daemon enabled (paddock serve --backends), the default first, with its capabilities on this host (available, isolation, snapshot, memory_checkpoint, fork, pty, confinement, and the reason when one is missing). Any tenant token.
         */
        get: operations["listBackends"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/policy/compile": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * What a create with this policy would record, and why it would be refused
         * @description Runs a create's policy checks on the body's policy and backend (absent: the default one) and creates nothing: the compiled policy as the session record would show it, whether the sandbox would be offline or go out through the egress proxy, and each refusal a create would answer with its status and code. The web console's policy editor shows this before a create. Admin or tenant token; a session token cannot create and is refused.
         */
        post: operations["compilePolicy"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /**
         * The session's rewind config and its points, oldest first
         * @description A point is the machine just before a command ran, taken by the command pipeline's hook when rewind is on and the command's kind is one of the triggers. Points are kept by the daemon outside the session record (taking one does not change the revision), in memory: a daemon restart forgets them. Never open to a session token.
         */
        get: operations["getRewind"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind/config": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Turn rewind on or off, size its ring, choose its triggers
         * @description Fields left out keep their value. Lowering max_points evicts the oldest unpinned points at once. Ledgered as rewind.config.
         */
        post: operations["rewindConfig"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind/undo": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Put the machine back to a rewind point
         * @description steps (default 1) goes back that many points; to names one. The restore is a restore (same refusals while commands or jobs run, same admission, a new revision); the point and every newer one are then dropped, except pinned ones. Ledgered as rewind.undo.
         */
        post: operations["rewindUndo"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind/pin": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Pin a rewind point (or release it with pinned false)
         * @description A pinned point is skipped by eviction and kept by an undo that goes past it. One slot of the ring always stays unpinned.
         */
        post: operations["rewindPin"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind/bisect": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Find the command that broke a test
         * @description The states are the points and the machine as it is now (named now). test (exit 0 passes) is judged once by the session's process policy, as an exec, then run in each state the binary search picks, between good (default the oldest point) and bad (default now). The machine is snapshotted first and restored last, so the session ends as it started; the ring is unchanged. About log2(n)+2 restores. Ledgered as rewind.bisect.
         */
        post: operations["rewindBisect"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/agents/sessions/{id}/rewind/branch": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start child sessions from a rewind point, leaving this session as it is
         * @description count children (default 1) start from the point's snapshot under fork's rules: a forkable backend, the lifecycle slot, admission, budget.max_children spent, identity as fork's. The session's machine and its ring are not touched, and the point stays. The children are running sessions whose parent is this one, with no workspace baseline (the parent's files now are not where they start), so promote on one is 409 no_baseline. The parent's running jobs are listed in not_carried. Ledgered as rewind.branch on this session and session.branch_child on each child.
         */
        post: operations["rewindBranch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List sandboxes, oldest first
         * @description Agent sessions are never listed here.
         */
        get: operations["listSandboxes"];
        put?: never;
        /**
         * Start a sandbox; answers once commands can run in it
         * @description The sandbox is removed (machine stopped, record deleted, ledger kept) just after its TTL.
         */
        post: operations["createSandbox"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        /** One sandbox */
        get: operations["getSandbox"];
        put?: never;
        post?: never;
        /**
         * Stop and remove the sandbox (idempotent)
         * @description The ledger stays. A sandbox already gone is 204.
         */
        delete: operations["deleteSandbox"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/process": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a shell line and wait for it; ledgered (env names only)
         * @description stdout and stderr are kept up to 16 MiB each (truncated beyond).
         */
        post: operations["sandboxProcess"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/fs/read": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Read a whole file of at most 32 MiB */
        post: operations["sandboxRead"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/fs/write": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Write a whole file of at most 32 MiB, creating its parents; ledgered as path and size */
        post: operations["sandboxWrite"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/speculate": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run a command in an isolated copy and keep its file changes as a pending changeset
         * @description The sandbox is forked into one copy (counted in max_children like a fork child, and deleted afterwards); the command runs there, and the files added, modified or deleted under paths (absolute; 1 to 32, no '..', not /) are kept with their new contents (at most 1 MiB a file, 16 MiB and 2000 files a changeset; past that the file is listed with content_omitted and the changeset is incomplete). The sandbox itself is untouched, its running jobs included. The command walks the sandbox's own policy, approvals and budget as an exec does and is counted as one. side_effects.network says whether the copy could reach the network. Ledgered as speculate (never contents).
         */
        post: operations["speculateSandbox"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/changesets": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        /** The sandbox's changesets, oldest first, without file contents */
        get: operations["listChangesetsSandbox"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/changesets/{changeset}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        /** One changeset with its file contents */
        get: operations["getChangesetSandbox"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/changesets/{changeset}/decide": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Approve or reject a pending changeset
         * @description Only the admin or a tenant decides; a session token is 403, so an agent never approves its own changeset. Ledgered as changeset.decide.
         */
        post: operations["decideChangesetSandbox"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sandboxes/{id}/changesets/{changeset}/apply": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Write an approved changeset into the sandbox
         * @description Every file is checked first: a modified or deleted file must still have its base_sha256, an added one must not exist. When one fails, nothing is written (409 changeset_conflict naming the paths). Otherwise the files are written (modes kept) and deleted through the files routes' pipeline (its guards, budget and ledger), and the changeset is applied, once. The budget is asked for the whole changeset before the first write. A write the guest agent refuses midway (a system path, the execute list) stops the apply there: the files before it stay written, the ledger's changeset.apply entry says how many, and the changeset stays approved (a retry then finds those files changed: a conflict). Ledgered as changeset.apply.
         */
        post: operations["applyChangesetSandbox"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description The body of every error answer (hostd/api writeError), and the data of SSE error events. Refusals that carry more (Held, PolicyRefused, BudgetExceeded, StreamLimited) have error and code too. docs/errors.md lists the codes, their statuses and what to do. */
        Error: {
            /** @description What went wrong and what to fix. */
            error: string;
            /** @description A stable machine-readable name of the refusal (errdefs). The kind's code (invalid_argument 400, unauthenticated 401, forbidden 403, not_found 404, conflict 409, revision_mismatch 412, too_large 413, idempotency_mismatch 422, approval_required 428, too_many_requests 429, internal 500, not_implemented 501, bad_gateway 502, unavailable 503), or a finer one of the same status: secret_ref_admin_only, grant_needs_admin_or_tenant, compute_budget_unmetered, disk_exhausted, idempotency_in_flight, tenant_disk_limit, tenant_memory_limit, tenant_cpus_limit, memory_above_host, cpus_above_host, budgets_unavailable (503: a daemon wired without its budgets service); on the files routes and fs/write system_path, exec_program and permission_denied; on every files route and fs/read agent_process, a path that is the guest agent's own /proc entry (/proc/self, /proc/thread-self, /proc/<agent pid> or its threads, named or through links). An SSE error event may also carry stream_max_age (the stream reached its longest life: resume from the last event id) or session_ended. */
            code: string;
        };
        /** @description GET /healthz. */
        Health: {
            /** @enum {boolean} */
            ok: true;
        };
        /**
         * @description A boolean query parameter.
         * @default false
         * @enum {string}
         */
        QueryBool: "true" | "false" | "1" | "0";
        /** @description An agent session (hostd/session.Session). */
        Session: {
            id: string;
            policy: components["schemas"]["Policy"];
            /**
             * @description Absent for an agent session; the session routes never show a sandbox.
             * @enum {string}
             */
            kind?: "sandbox";
            /** @description The agent's name. */
            agent: string;
            /** @description Absent until scoped tokens exist. */
            tenant?: string;
            /**
             * @description running; expired past expires_at (sandbox stopped, checkpoints removed); gone when this daemon has no sandbox for a running record (shown, never saved); lost when the sandbox died or did not survive a daemon restart (note says why); deleted after DELETE.
             * @enum {string}
             */
            state: "running" | "expired" | "gone" | "lost" | "deleted";
            /** @description Why the state is what it is. */
            note?: string;
            /** @description Goes up with each change of the record (checkpoint, restore, fork, expiry, delete); the value for If-Match. Execs, jobs and usage do not change it. */
            revision: number;
            backend: string;
            sandbox_id: string;
            capabilities: components["schemas"]["Capabilities"];
            runtime: components["schemas"]["Runtime"];
            workspace: components["schemas"]["Workspace"];
            checkpoints: components["schemas"]["Checkpoint"][];
            /** @description Ids of the sessions forked from this one. */
            children: string[];
            /** @description The session this one was forked from. */
            parent?: string;
            usage: components["schemas"]["Usage"];
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
            /**
             * Format: date-time
             * @description When it was deleted (state deleted).
             */
            deleted_at?: string;
            budget?: components["schemas"]["Budget"];
            interrupted_op?: components["schemas"]["InterruptedOp"];
        };
        /** @description What the sandbox is made of (hostd/session.Runtime); in requests every field is optional. */
        Runtime: {
            /** @description The backend to run on (GET /v1/backends lists the enabled ones): procbox (namespaces, Landlock, seccomp) or qemu (a virtual machine). Absent is the daemon's default (paddock serve --backend); a name this daemon has not enabled is 400, one that cannot run on this host is 409 with the reason. Records always carry the backend used. */
            backend?: string;
            /** @description An image built by `paddock image build` (default the daemon's); an unknown one is 400. */
            image?: string;
            /** @description 0 or absent is the backend's default (procbox 1, qemu 1; otherwise 0.01 to 64, else 400; qemu rounds up to whole CPUs). */
            cpus?: number;
            /** @description 0 or absent is the backend's default (procbox 2048; otherwise 16 to 65536, else 400). */
            memory_mb?: number;
            /** @description The writable layer; 0 or absent is the backend's default (procbox 2048; otherwise 1 to 65536, else 400). */
            disk_mb?: number;
        };
        /** @description The agent's working directory in the sandbox (hostd/session.Workspace). */
        Workspace: {
            path: string;
            /**
             * @description "" in records from before modes existed, which means writable.
             * @enum {string}
             */
            mode: "" | "writable" | "readonly" | "overlay";
            /** @description The URL cloned at create, a credential shown as ***. */
            git?: string;
            /** @description The image directory an overlay workspace shows. */
            lower?: string;
            /** @description Why the workspace is not as asked (not created, clone failed). */
            note?: string;
            /** @description Files in the baseline artifacts diff against. */
            baseline_files: number;
        };
        /** @description One checkpoint of a session (hostd/session.Checkpoint). */
        Checkpoint: {
            tag: string;
            snapshot_id: string;
            /** @description Memory and processes were saved too. */
            memory: boolean;
            /** Format: date-time */
            created_at: string;
        };
        /** @description What the session used (hostd/session.Usage), kept apart from the record: counting never changes the revision. */
        Usage: {
            /** @description Commands through exec and exec/stream, counted when they start (a streamed command counts in jobs too). */
            execs: number;
            /** @description Their summed wall time. */
            exec_ms: number;
            /** @description Jobs started, exec/stream included. */
            jobs: number;
            /** @description Wall time of the jobs: finished ones by their start and end, running ones up to now. */
            job_ms: number;
            /** @description CPU time the sandbox used, everything in it counted (commands, jobs, what they left running in the background, the guest agent), on backends that measure it (procbox); 0 elsewhere. */
            cpu_ms: number;
            /** @description The larger of exec_ms plus job_ms and cpu_ms; what max_compute_seconds limits. */
            compute_ms: number;
            /** @description Fork children made (a failed fork gives its own back). */
            children: number;
            /** @description The workspace's size (du -sk) at the last command or job start; measured only under budget.max_workspace_bytes, 0 otherwise. */
            workspace_bytes: number;
        };
        /** @description What the session may consume (hostd/session.Budget), set at create and shown in the record; every field is optional (absent: no limit; 0: none allowed). Going past a limit is 403 with a BudgetExceeded body. A fork child starts with its parent's limits minus the parent's usage (max_concurrent_jobs, max_output_bytes and max_workspace_bytes are caps and are kept as they are). */
        Budget: {
            /** @description Commands through exec and exec/stream, and each git/commit. */
            max_execs?: number;
            /** @description Summed wall time of exec commands, checked when one starts; a command's timeout is lowered to what is left (rounded up to a second). Commands running in parallel can overshoot it. */
            max_exec_seconds?: number;
            /** @description Job starts (exec/stream included). */
            max_jobs?: number;
            /** @description Jobs running at once, as the sandbox reports them. */
            max_concurrent_jobs?: number;
            /** @description Fork children. */
            max_children?: number;
            /** @description Exec time plus job time (finished jobs by their start and end, running ones up to now), or the sandbox's CPU time where the backend measures it (procbox) and that is more, checked when a command or job starts; a command (exec, exec/stream) gets at most what is left as its timeout. A running job is not stopped when the wall time runs out; when the CPU time does (a process left in the background, a busy job), every command process in the sandbox is killed and budget.exhausted is ledgered. Only backends that measure CPU time (capabilities.cpu_meter: procbox) take it: on qemu a create with it is 409 compute_budget_unmetered, since wall time alone would let a background process escape. */
            max_compute_seconds?: number;
            /** @description What one exec returns per stream and what a job keeps per stream; the rest is dropped (cut back to a whole UTF-8 character), never the command. */
            max_output_bytes?: number;
            /** @description The workspace's size, measured with du -sk in the sandbox when a command or job starts (one extra command each time); a start at or over it is refused. Growth during a run is not stopped. A file write (PUT .../files/content) or an upload (at open and again at complete) is measured too and refused when the workspace plus what it writes would pass the limit, wherever its path leads; a file it replaces is not taken off, so delete a file before writing it again near the limit. 400 at create for a session whose workspace was not created. */
            max_workspace_bytes?: number;
        };
        /** @description A checkpoint, restore, fork or delete that a daemon started and never finished because it stopped mid-way (hostd/session.InterruptedOp). The daemon reports it, ledgering lifecycle.interrupted once, and shows it until another lifecycle operation on the session ends; it does not repair anything, so check the session before relying on it. */
        InterruptedOp: {
            /** @enum {string} */
            op: "checkpoint" | "restore" | "fork" | "delete";
            /** Format: date-time */
            started_at: string;
        };
        /** @description The 403 of a budget limit reached (hostd/api budgetError). */
        BudgetExceeded: {
            error: string;
            /** @enum {string} */
            code: "budget_exceeded";
            /** @description The Budget field, such as max_execs. */
            budget: string;
            /** @description Its value. */
            limit: number;
            /** @description What the session used, in the field's unit (seconds with millisecond precision for the *_seconds fields, bytes for max_workspace_bytes). */
            used: number;
        };
        /** @description The 429 of a stream cap (hostd/api streamLimitError). */
        StreamLimited: {
            error: string;
            /**
             * @description Which cap, for a client to act on without parsing the message.
             * @enum {string}
             */
            code: "job_streams_session" | "job_streams_tenant" | "job_streams_daemon" | "event_streams_session" | "event_streams_tenant" | "event_streams_daemon";
            /** @description The cap's value. */
            limit: number;
        };
        /** @description The 403 of a command or job: PolicyRefused when the process policy refuses it, BudgetExceeded when a budget limit is reached, and error and code alone for any other refusal. */
        CommandRefused: {
            error: string;
            /** @description policy_refused, budget_exceeded, or another 403 code (Error). */
            code: string;
        } | components["schemas"]["PolicyRefused"] | components["schemas"]["BudgetExceeded"];
        /** @description What the session's backend can do (hypervisor.Capabilities). */
        Capabilities: {
            /**
             * @description none: the test backend (hypervisor/fake), which paddock serve never offers.
             * @enum {string}
             */
            isolation: "namespaces" | "vm" | "none";
            /** @description The daemon enforces network policies (its egress proxy and resolver); false means only offline sessions. */
            egress: boolean;
            /** @description Method and path rules hold over HTTPS too (the daemon intercepts TLS to such hosts). */
            http_policy: boolean;
            /** @description The session's process.enforce "exec" list is enforced by the guest kernel (checked at create). */
            exec_allowlist: boolean;
            /** @description The backend measures its machines' CPU time, so budget.max_compute_seconds can be held against background processes (procbox); a create with that budget elsewhere is 409 compute_budget_unmetered. */
            cpu_meter: boolean;
            /** @description Disk checkpoint and restore. */
            snapshot: boolean;
            /** @description Checkpoints can include memory and processes. */
            memory_checkpoint: boolean;
            /** @description Why memory checkpoints are not available. */
            memory_checkpoint_reason?: string;
            /** @description A VM backend's: what its machines run under and why, "kvm (…)" or "tcg (…)"; absent for other backends. */
            accelerator?: string;
            fork: boolean;
            pty: boolean;
            /** @description Landlock and seccomp in the guest (needed for a read-only workspace). */
            confinement: boolean;
            /** @description False when the backend cannot run on this host. */
            available: boolean;
            /** @description Why it is not available. */
            reason?: string;
        };
        /** @description The body of POST /v1/agents/sessions (hostd/session.CreateRequest). */
        CreateRequest: {
            /** @default agent */
            agent: string;
            workspace?: components["schemas"]["WorkspaceRequest"];
            runtime?: components["schemas"]["Runtime"];
            /**
             * @description Seconds until the session expires; 0 or absent is 3600.
             * @default 3600
             */
            ttl_seconds: number;
            policy?: components["schemas"]["PolicyInput"];
            budget?: components["schemas"]["Budget"];
        };
        /** @description The session's network policy (egress/rules.PolicyInput). Absent means offline: nothing is reachable. A policy that allows anything gives the sandbox the host's egress proxy and resolver, and redirects programs that ignore proxy settings to the same proxy. */
        PolicyInput: {
            /** @enum {string} */
            preset?: "" | "offline" | "developer-safe" | "open";
            network?: components["schemas"]["PolicyNetwork"];
            process?: components["schemas"]["ProcessRules"];
        };
        /** @description The process section (policy.ProcessRules): every exec and job start is judged by the Rego process module. A command is split on ; && || | & and newlines and each piece is matched; * is the only wildcard. A deny match refuses the command (403), an ask match holds it for an operator (428), and with a non-empty allow every piece must match an allow or ask pattern. A guardrail on the command string, not a boundary; enforce "exec" adds the guest kernel's execute list. */
        ProcessRules: {
            allow?: string[];
            deny?: string[];
            ask?: string[];
            /**
             * @description exec: only the programs named by the first word of each allow and ask pattern (plus the shell and the loader) may start in the sandbox (Landlock execute right).
             * @enum {string}
             */
            enforce?: "" | "exec";
        };
        /** @description The network section of a policy (egress/rules.Network). */
        PolicyNetwork: {
            /** @enum {string} */
            default?: "" | "deny" | "allow";
            allow?: (string | components["schemas"]["AllowEntry"])[];
            /** @enum {string} */
            enforcement?: "" | "strict" | "best-effort";
        };
        /** @description An allow entry with method and path limits (egress/rules.AllowEntry). */
        AllowEntry: {
            host: string;
            methods?: ("GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS")[];
            paths?: string[];
        };
        /** @description What the session's policy compiled to (hostd/session.Policy; the network part is egress/rules.Summary). */
        Policy: {
            /** @enum {string} */
            mode: "offline" | "allowlist" | "open";
            preset?: string;
            allow_hosts?: string[];
            http_rules?: string[];
            enforcement: string;
            /** @description What the daemon could not enforce, in words. */
            unenforced?: string[];
            process?: components["schemas"]["ProcessRules"];
            /** @description With process.enforce "exec", the files in the sandbox that may start (the first word of each allow and ask pattern, found in the image), besides the shell, true and the loader. */
            exec_programs?: string[];
        };
        /** @description The workspace part of CreateRequest (hostd/session.WorkspaceRequest). */
        WorkspaceRequest: {
            /**
             * @description An absolute directory below /, without .., NUL or newline; not under /dev, /proc or /sys when readonly; never under a system directory of the image (/bin /boot /etc /lib* /proc /sbin /sys /usr /.paddock), which the files routes do not write (400). Made at create, as root, when missing, and handed to the guest user.
             * @default /workspace
             */
            path: string;
            /** @description An https:// URL cloned into the workspace before the baseline is taken; no whitespace, control characters, query or fragment, and not with mode overlay. A user:password in it is used for the clone and recorded as https://***@host/path. A failed clone leaves workspace.note (or is a 502 with require_ready). */
            git?: string;
            /**
             * @description writable (default; clone is the same); readonly (nothing the agent runs may write to the workspace, enforced by Landlock; 409 where it cannot be); overlay (the image directory lower shown copy-on-write at path).
             * @default writable
             * @enum {string}
             */
            mode: "" | "writable" | "clone" | "readonly" | "overlay";
            /** @description For mode overlay only, and required there; a clean absolute directory of the image, without ':' or ',', that neither contains nor lies in path. */
            lower?: string;
            /**
             * @description Turn a workspace that did not initialize into a failed create (502) that removes the sandbox.
             * @default false
             */
            require_ready: boolean;
        };
        /** @description The body of POST .../exec and .../exec/stream (hostd/session.ExecRequest). */
        ExecRequest: {
            /** @description A shell line for /bin/sh -c; at most 65536 bytes, without NUL. */
            command: string;
            /**
             * @description exec, 0 or absent is 300. exec/stream passes it to the job unchecked here (0 means none, the guest allows up to 86400).
             * @default 300
             */
            timeout_seconds: number;
            /** @description Runs a command an operator approved (once; it must be the same command and parameters, policy and session revision). */
            approval_id?: string;
            /** @description Holds a command that needs approval open until an operator decides (or this runs out, then 428), without holding the session's work slot. */
            approval_wait_seconds?: number;
        };
        /** @description The policy engine's state (policy.Status). */
        PolicyStatus: {
            /** @description Bumped by every load that took effect. */
            revision: number;
            /** Format: date-time */
            loaded_at: string;
            builtin: string[];
            operator: string[];
            /** @description The operator's directory or bundle. */
            source?: string;
            /** @description Why the last load was refused; empty when it was not. */
            last_error?: string;
            /** Format: date-time */
            failed_at?: string;
        };
        /** @description The 428 answer of a command held for approval (hostd/session.Hold). */
        Held: {
            error: string;
            /** @enum {string} */
            code: "approval_required";
            /** @description apr- and 16 hex digits. */
            approval_id: string;
            summary: string;
            /** @description The rule and the pattern that asked, e.g. process.ask: deploy *. */
            matched: string;
            /** Format: date-time */
            expires_at: string;
        };
        /** @description The 403 answer of a command the process policy refuses; other refusals carry error and code alone. */
        PolicyRefused: {
            error: string;
            /** @enum {string} */
            code: "policy_refused";
            /** @description The rule that decided: process.deny, process.not_allowed, process.empty or ext.<package>. */
            rule?: string;
            pattern?: string;
            /** @description The piece of the command (split on ; && || | & and newlines) that decided. */
            piece?: string;
        };
        /** @description An approval request (hostd/session.Approval). */
        Approval: {
            id: string;
            session: string;
            /** @enum {string} */
            kind: "exec" | "job";
            command: string;
            summary: string;
            matched: string;
            /** @enum {string} */
            state: "pending" | "approved" | "denied" | "consumed" | "expired";
            /** @description admin, tenant:<name> or session-token:<id>. */
            requester: string;
            decider?: string;
            note?: string;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
            /** Format: date-time */
            decided_at?: string;
            /** Format: date-time */
            consumed_at?: string;
        };
        /** @description The answer of GET .../approvals. */
        ApprovalList: {
            approvals: components["schemas"]["Approval"][];
        };
        /** @description The body of approve and deny (hostd/session.Decision). */
        ApprovalDecision: {
            note?: string;
        };
        /** @description The body of POST .../speculate (api.SpeculateRequest). */
        SpeculateRequest: {
            /** @description A shell line, run in the copy as exec runs it. */
            command: string;
            /** @description The files or directories whose changes are kept. */
            paths: string[];
            /** @description An absolute working directory (default the workspace). */
            cwd?: string;
            /** @default 60 */
            timeout_seconds: number;
            /** @description Sessions only: spends an approved request for this command. */
            approval_id?: string;
        };
        /** @description One file a speculated command added, modified or deleted (api.ChangesetFile). */
        ChangesetFile: {
            /** @description Absolute in the machine. */
            path: string;
            /** @enum {string} */
            op: "added" | "modified" | "deleted";
            /** @description Octal permission bits, or symlink. */
            mode?: string;
            size?: number;
            sha256?: string;
            /** @description The file's digest before the command (modified and deleted). */
            base_sha256?: string;
            /**
             * Format: byte
             * @description The new bytes, base64; absent in lists, for deleted files and when omitted.
             */
            content?: string;
            /** @description Too large, or not a regular file: the changeset is incomplete. */
            content_omitted?: boolean;
        };
        /** @description What the command may have done beyond its files (api.SideEffects). */
        SideEffects: {
            /** @description The copy could reach some destination: calls it made really happened. */
            network: boolean;
            detail: string;
        };
        /** @description A speculation's result (api.Changeset). */
        Changeset: {
            id: string;
            target: string;
            /** @enum {string} */
            target_kind: "session" | "sandbox";
            command: string;
            paths: string[];
            /** @enum {string} */
            status: "pending" | "approved" | "rejected" | "applied";
            exit_code: number;
            /** @description The last 64 KiB. */
            stdout: string;
            /** @description The last 64 KiB. */
            stderr: string;
            files: components["schemas"]["ChangesetFile"][];
            /** @description false: a file without content, or files past the limits; it cannot be applied. */
            complete: boolean;
            side_effects: components["schemas"]["SideEffects"];
            /** @description How the copy was made (fork). */
            how: string;
            took_ms: number;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            decided_at?: string;
            decided_by?: string;
            reason?: string;
            /** Format: date-time */
            applied_at?: string;
        };
        /** @description The answer of GET .../changesets (api.ChangesetList). */
        ChangesetList: {
            changesets: components["schemas"]["Changeset"][];
        };
        /** @description The body of POST .../changesets/{changeset}/decide (api.ChangesetDecision). */
        ChangesetDecision: {
            /** @enum {string} */
            decision: "approve" | "reject";
            reason?: string;
        };
        /** @description The answer of POST .../changesets/{changeset}/apply (api.ApplyResult). */
        ApplyResult: {
            changeset: components["schemas"]["Changeset"];
            applied: string[];
        };
        /** @description The body of POST .../replay (api.ReplayRequest). */
        ReplayRequest: {
            /** @description The session the commands run in; required unless dry_run. */
            target?: string;
            /** @description List the steps and what is skipped; run nothing. */
            dry_run?: boolean;
            /** @description The first ledger seq replayed (0: the first). */
            since?: number;
            /** @description The last ledger seq replayed (0: the last). */
            until?: number;
            /**
             * @description false goes on past a step that exits non-zero; a refusal or an approval request always stops.
             * @default true
             */
            stop_on_failure: boolean;
            /**
             * @description Each command's timeout, as on exec.
             * @default 300
             */
            timeout_seconds: number;
            /** @description Spent by the first step run, to go on after a replay stopped at an approval request (with since set to its next_since). */
            approval_id?: string;
        };
        /** @description One exec command of the source and what it did in the target (api.ReplayStep). */
        ReplayStep: {
            /** @description The source's ledger entry. */
            seq: number;
            command: string;
            /** @description What the source recorded; absent when its exec was cut off. */
            recorded_exit_code?: number;
            /** @enum {string} */
            status: "planned" | "ok" | "failed" | "not_run" | "unsure";
            /** @description The target's; absent when the step did not run. */
            exit_code?: number;
            /** @description Absent unless both exit codes are known. */
            same_exit_code?: boolean;
            timed_out?: boolean;
            duration_ms?: number;
            /** @description The first 2048 bytes. */
            stdout?: string;
            /** @description The first 2048 bytes. */
            stderr?: string;
            truncated?: boolean;
        };
        /** @description A source entry replay cannot redo (api.ReplaySkipped). */
        ReplaySkipped: {
            seq: number;
            kind: string;
            reason: string;
        };
        /** @description Why a replay ended before its range did (api.ReplayStop). */
        ReplayStop: {
            /** @enum {string} */
            reason: "failure" | "refused" | "approval_required" | "error" | "limit";
            /** @description The source entry it stopped at. */
            seq?: number;
            /** @description The target's exec status for a step it did not run (403, 428, 409, ...). */
            status?: number;
            code?: string;
            error?: string;
            /** @description The target's exec answer for that step, as that route writes it. */
            body?: unknown;
            /** @description The request an operator must decide (a 428). */
            approval_id?: string;
        };
        /** @description The answer of POST .../replay (api.ReplayResult). */
        ReplayResult: {
            source: string;
            target?: string;
            dry_run: boolean;
            since: number;
            until?: number;
            steps: components["schemas"]["ReplayStep"][];
            skipped: components["schemas"]["ReplaySkipped"][];
            /** @description Skipped entries past the 500 listed. */
            skipped_omitted?: number;
            ran: number;
            failed: number;
            stopped?: components["schemas"]["ReplayStop"];
            /** @description The since of the replay that goes on; absent when the range is done. */
            next_since?: number;
        };
        /** @description How a command ended (hostd/session.ExecResult). */
        ExecResult: {
            /** @description -1 when killed by a signal. */
            exit_code: number;
            /** @description The signal that killed it. */
            signal?: string;
            timed_out: boolean;
            /** @description Decoded as UTF-8 (invalid bytes replaced). */
            stdout: string;
            /** @description Decoded as UTF-8 (invalid bytes replaced). */
            stderr: string;
            /** @description stdout or stderr went over its cap (16 MiB, or the budget's max_output_bytes) and was cut (a marker is appended). */
            truncated: boolean;
            duration_ms: number;
            /** @description When stdout was cut: the bytes left out (a partial UTF-8 character at the cut included). */
            stdout_dropped_bytes?: number;
            /** @description As stdout_dropped_bytes, for stderr. */
            stderr_dropped_bytes?: number;
            /**
             * @description The cut was the session's budget.max_output_bytes; also in the exec's ledger entry.
             * @enum {boolean}
             */
            output_truncated?: true;
            /** @description With output_truncated: the budget's cap per stream. */
            max_output_bytes?: number;
        };
        /** @description The body of POST .../checkpoint (hostd/session.CheckpointRequest). */
        CheckpointRequest: {
            /** @description Unique in the session; absent is ckpt-<unix seconds>. */
            tag?: string;
            /** @description Save memory and processes too; absent is whatever the backend can. */
            memory?: boolean;
        };
        /** @description The body of POST .../restore (hostd/session.RestoreRequest). */
        RestoreRequest: {
            /** @description One of this session's checkpoints. */
            tag: string;
        };
        /** @description The body of POST .../fork (hostd/session.ForkRequest). */
        ForkRequest: {
            count: number;
            /**
             * @description The children's host names and machine ids. best-effort: each its own where the backend can give them, kept otherwise (identity_note says why); unique: each its own, checked inside every child, or 409 fork_identity_not_unique and no child is kept; preserve: the parent's. Any other value is 400 fork_identity_unknown.
             * @default best-effort
             * @enum {string}
             */
            identity: "best-effort" | "unique" | "preserve";
            /** @description One of this session's checkpoint tags to start the children from (404 when it has none by that name); absent, the state now. The checkpoint stays the parent's. */
            from?: string;
        };
        /** @description The answer of POST .../fork. */
        ForkResult: {
            children: components["schemas"]["Session"][];
            /** @enum {string} */
            identity: "best-effort" | "unique" | "preserve";
            /** @description The checkpoint the children started from (absent: the state at the fork). */
            from?: string;
            /** @description The children started from a memory snapshot: what ran in it goes on in each child, which also holds the parent's job records (its jobs can be read, fed stdin and killed there). */
            memory: boolean;
            /** @description The parent's running jobs a disk fork leaves behind; they keep running in the parent. */
            not_carried: components["schemas"]["ForkNotCarried"][];
            /** @description Each child's host name and machine id as read inside it, in the order of children. */
            identities: components["schemas"]["ChildIdentity"][];
            /** @description Why a best-effort fork's children do not all have an identity of their own. */
            identity_note?: string;
        };
        /** @description A job of the parent that a fork did not carry. */
        ForkNotCarried: {
            job: string;
            command: string;
            reason: string;
        };
        /** @description A fork child's identity as read inside it. */
        ChildIdentity: {
            session: string;
            hostname: string;
            machine_id: string;
        };
        /** @description The answer of GET /v1/agents/sessions. */
        SessionList: {
            sessions: components["schemas"]["Session"][];
        };
        /** @description The body of POST .../promote (api.PromoteRequest). */
        PromoteRequest: {
            /** @description Answer the plan; change nothing. */
            dry_run?: boolean;
            /** @description The plan_id of a dry run; refused (409 plan_changed) when the plan is different now. */
            plan_id?: string;
            /** @description Apply the clean paths and leave the conflicts. */
            skip_conflicts?: boolean;
            /** @description Files or directories inside the workspace (absolute, or relative to it) the promotion is limited to. */
            paths?: string[];
        };
        /** @description One path of a promotion's plan (api.PromoteChange). */
        PromoteChange: {
            /** @description Relative to the workspace. */
            path: string;
            /** @enum {string} */
            op: "added" | "modified" | "deleted";
            /** Format: int64 */
            size?: number;
            /** @description The child's mode, octal. */
            mode?: string;
            sha256?: string;
        };
        /** @description A path both sides changed since the fork (api.PromoteConflict). */
        PromoteConflict: {
            path: string;
            /** @enum {string} */
            op: "added" | "modified" | "deleted";
            reason: string;
        };
        /** @description What a promotion does not move (api.NotCarried). */
        NotCarried: {
            /** @enum {string} */
            what: "memory" | "processes" | "outside_workspace" | "not_regular_file";
            path?: string;
            note: string;
        };
        /** @description The three-way comparison (api.PromotePlan). */
        PromotePlan: {
            apply: components["schemas"]["PromoteChange"][];
            already_applied: components["schemas"]["PromoteChange"][];
            conflicts: components["schemas"]["PromoteConflict"][];
            /** @description Workspace files the child did not change. */
            untouched: number;
            /**
             * Format: int64
             * @description What applying copies.
             */
            bytes: number;
        };
        /** @description The answer of POST .../promote (api.PromoteResult). */
        PromoteResult: {
            child: string;
            parent: string;
            workspace: string;
            dry_run: boolean;
            plan_id: string;
            plan: components["schemas"]["PromotePlan"];
            applied: string[];
            /** @description The conflicts skip_conflicts left. */
            skipped: string[];
            /** @description The parent's checkpoint taken before the first write; empty when nothing was written. */
            checkpoint?: string;
            not_carried: components["schemas"]["NotCarried"][];
        };
        /** @description Workspace changes since the baseline (hostd/session.Artifacts). */
        Artifacts: {
            /** @description The workspace path; the paths below are relative to it. */
            workspace: string;
            added: string[];
            /** @description Content, type, mode or link target changed. */
            modified: string[];
            deleted: string[];
            checkpoints: components["schemas"]["Checkpoint"][];
            children: string[];
            usage: components["schemas"]["Usage"];
        };
        /** @description One hash-chained ledger entry (hostd/ledger.Entry). */
        LedgerEntry: {
            /** @description Counts from 1 within the session. */
            seq: number;
            /** Format: date-time */
            time: string;
            session: string;
            /** @description session.create, exec, file.write, checkpoint, restore, fork, session.delete, … */
            kind: string;
            actor: string;
            /** @description The entry's JSON data (at most 64 KiB); never a secret. */
            data: unknown;
            /** @description The previous entry's hash ("" for seq 1). */
            prev: string;
            hash: string;
        };
        /** @description The answer of GET .../ledger/verify (hostd/ledger.VerifyResult). */
        LedgerVerification: {
            /** @description The chain holds together and reaches the recorded head. */
            ok: boolean;
            /** @description How many entries verified, from seq 1, before any break. */
            entries: number;
            /** @description The hash of the last entry that verified ("" for none). */
            head: string;
            /** @description Where the chain breaks (absent when ok). */
            broken_seq?: number;
            /**
             * @description Why it breaks (absent when ok).
             * @enum {string}
             */
            reason?: "seq gap" | "prev mismatch" | "hash mismatch" | "session mismatch" | "truncated" | "head mismatch" | "no head" | "unknown session";
            /** @description The break in words (absent when ok). */
            detail?: string;
            /** @description How many entries the recorded head says there are. */
            recorded: number;
            /** @description The recorded head's hash (absent when none was recorded). */
            recorded_head?: string;
        };
        /** @description The answer of GET .../events. */
        Events: {
            ledger: components["schemas"]["LedgerEntry"][];
            /** @description What happened to the session's machine, oldest first (at most 10000). */
            vm_events: components["schemas"]["VMEvent"][];
            /** @description More ledger entries follow this page (ask again with after set to the last seq). Absent when none do, and with tail. */
            ledger_more?: boolean;
        };
        /** @description One thing that happened to the session's machine. boot: it started (create, restore, a fork child); checkpoint, restore, fork; stop: the daemon stopped it (delete, expiry); oom: the kernel killed processes in it for want of memory (procbox and qemu, polled every 2 s); death: it ended on its own. */
        VMEvent: {
            id: number;
            /** Format: date-time */
            time: string;
            /** @enum {string} */
            kind: "boot" | "checkpoint" | "restore" | "fork" | "stop" | "oom" | "death";
            /** @description The event's details (snapshot, children, reason, counts). */
            data: unknown;
        };
        /** @description One numbered step of a trajectory (hostd/session.Step). */
        Step: {
            step: number;
            /** Format: date-time */
            time: string;
            /** @enum {string} */
            source: "ledger" | "vm";
            kind: string;
            /** @description The step's JSON data. */
            data: unknown;
        };
        /** @description The session's history (hostd/session.Trajectory). */
        Trajectory: {
            session: components["schemas"]["Session"];
            steps: components["schemas"]["Step"][];
        };
        /** @description The body of POST .../git/commit (message, repo, staged_only) and .../git/branch (name, repo) (hostd/session.GitRequest). The fields the verb does not use are ignored. */
        GitRequest: {
            /** @description The repository's absolute path, without .. (default the workspace). */
            repo?: string;
            /** @description The commit message (commit); at most 16384 bytes, without NUL. */
            message?: string;
            /** @description The branch (branch); without .., not ending in .lock or /. */
            name?: string;
            /**
             * @description Commit only what is staged (commit).
             * @default false
             */
            staged_only: boolean;
        };
        /** @description The answer of every git verb (hostd/session.GitResult). */
        GitResult: {
            repo: string;
            /** @description git's standard output. */
            output: string;
            /** @description The diff was cut at 262144 bytes. */
            truncated?: boolean;
            /** @description The new commit (commit). */
            commit?: string;
            /** @description The new branch (branch). */
            branch?: string;
            /** @description The commits (log). */
            entries?: components["schemas"]["GitCommit"][];
        };
        /** @description One entry of git log (hostd/session.GitCommit). */
        GitCommit: {
            id: string;
            author: string;
            email: string;
            /** Format: date-time */
            time: string;
            subject: string;
        };
        /** @description Which tools the sandbox has (guest/api.Probe). */
        Probe: {
            /** @description Tool name to the path it was found at; missing tools are absent. */
            tools: {
                [key: string]: string;
            };
            ready_for: {
                [key: string]: boolean;
            };
            os: string;
            arch: string;
        };
        /** @description The body of POST .../uploads (hostd/session.UploadRequest). */
        UploadRequest: {
            /** @description Where the file goes; absolute, without .., NUL or newline. */
            path: string;
            size: number;
            /** @description Checked at complete when given. */
            sha256?: string;
            /** @description Octal permission bits such as 0644. */
            mode?: string;
            /**
             * @description Create missing parent directories.
             * @default true
             */
            parents: boolean;
        };
        /** @description A resumable upload (hostd/session.Upload). */
        Upload: {
            id: string;
            path: string;
            size: number;
            /** @description As given, or computed at complete. */
            sha256?: string;
            mode?: string;
            parents?: boolean;
            /** @description Bytes stored contiguously from 0; the offset of the next chunk. */
            received: number;
            parts: number;
            /** @enum {string} */
            state: "open" | "complete";
            /** @description A sha256 was given and matched. */
            verified: boolean;
            /** Format: date-time */
            created_at: string;
        };
        /** @description The answer of GET .../uploads. */
        UploadList: {
            uploads: components["schemas"]["Upload"][];
        };
        /** @description The body of POST .../grants (hostd/session.GrantRequest). Exactly one of value and secret_ref. */
        GrantRequest: {
            /** @description The credential is the daemon's environment variable PADDOCK_SECRET_<secret_ref>, read when the grant is made. The admin token only (403 secret_ref_admin_only otherwise). */
            secret_ref?: string;
            /** @description The header's whole value (e.g. "Bearer …"); never returned, logged or ledgered. */
            value?: string;
            /** @description Host patterns, as in a policy's allow entries: an exact name or IP, or *.suffix (names below suffix). */
            hosts: string[];
            /** @description Only requests with these methods get the credential (absent is every method). */
            methods?: string[];
            /** @description Only requests to these canonical paths get it; * matches any run (absent is every path). */
            paths?: string[];
            /**
             * @description The header to set; a valid name, not Host, Cookie or a hop-by-hop header.
             * @default Authorization
             */
            header: string;
            /**
             * @description Capped at the session's expires_at.
             * @default 3600
             */
            ttl_seconds: number;
        };
        /** @description A credential grant, never its value (hostd/session.Grant). */
        Grant: {
            /** @description gr-… */
            id: string;
            /** @description Absent when the value was given in the request. */
            secret_ref?: string;
            hosts: string[];
            methods?: string[];
            paths?: string[];
            header: string;
            /** Format: date-time */
            expires_at: string;
        };
        /** @description The answer of GET .../grants. */
        GrantList: {
            grants: components["schemas"]["Grant"][];
        };
        /** @description The body of POST .../tokens (hostd/session.TokenRequest). */
        TokenRequest: {
            /** @description The operations to grant; repeats are ignored. See components/securitySchemes/bearer for what each opens. */
            ops: ("read" | "exec" | "jobs" | "files.read" | "files.write" | "git" | "checkpoint" | "preview")[];
            /**
             * @description Capped at the session's expires_at.
             * @default 3600
             */
            ttl_seconds: number;
            /** @description A note for people; printable characters only. */
            label?: string;
        };
        /** @description A session token (hostd/session.SessionToken). token, the secret, is in the answer to the mint only. */
        SessionToken: {
            /** @description The token's public id: listed, revoked and ledgered by it. */
            id: string;
            /** @description The bearer token, shown once; the daemon keeps its SHA-256. */
            token?: string;
            session: string;
            ops: string[];
            label: string;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
        };
        /** @description The answer of GET .../tokens. */
        TokenList: {
            tokens: components["schemas"]["SessionToken"][];
        };
        /** @description The answer of POST .../pty-ticket (hostd/session.TerminalTicket). */
        TerminalTicket: {
            /** @description Opens one terminal: GET .../pty?ticket=<ticket>. Shown once; never ledgered. */
            ticket: string;
            /**
             * Format: date-time
             * @description 30 seconds after it was made.
             */
            expires_at: string;
        };
        /** @description The text message that resizes an open terminal (GET .../pty), as {"resize":{"cols":N,"rows":N}} (hostd/session.TerminalResize). */
        TerminalResize: {
            resize: components["schemas"]["TerminalSize"];
        };
        /** @description A terminal's size in character cells (hostd/session.TerminalSize). */
        TerminalSize: {
            cols: number;
            rows: number;
        };
        /** @description The body of POST .../preview (hostd/session.PreviewRequest). */
        PreviewRequest: {
            /** @description The TCP port on the sandbox's loopback; not 53, 3128 or 3129 (the sandbox's egress listeners). */
            port: number;
            /**
             * @description Capped at the session's expires_at.
             * @default 3600
             */
            ttl_seconds: number;
        };
        /** @description A preview URL (hostd/session.Preview). token and url are in the answer to the create only. */
        Preview: {
            /** @description The preview's public id: listed, deleted and ledgered by it. */
            id: string;
            /** @description 256 random bits, shown once; the daemon keeps its SHA-256. Lower-case, so it also works as a host name label (<token>.preview.<domain>). */
            token?: string;
            /** @description /preview/<token>/, relative to the daemon's address. */
            url?: string;
            port: number;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
        };
        /** @description The answer of GET .../previews. */
        PreviewList: {
            previews: components["schemas"]["Preview"][];
        };
        /** @description The body of POST .../rewind/config (api.RewindConfigRequest); a field left out keeps its value. */
        RewindConfigRequest: {
            enabled?: boolean;
            max_points?: number;
            /** @description Points with memory where the backend has memory checkpoints (default true). */
            memory?: boolean;
            triggers?: ("exec" | "job" | "file" | "git")[];
        };
        /** @description A session's rewind settings (api.RewindConfig). */
        RewindConfig: {
            enabled: boolean;
            /** @default 10 */
            max_points: number;
            memory: boolean;
            triggers: ("exec" | "job" | "file" | "git")[];
        };
        /** @description One rewind point (api.RewindPoint). */
        RewindPoint: {
            tag: string;
            /** @enum {string} */
            trigger: "exec" | "job" | "file" | "git";
            /** @description The command about to run: a shell line, write|delete|upload <path>, or git <verb>. */
            command: string;
            memory: boolean;
            pinned: boolean;
            /** Format: date-time */
            created_at: string;
        };
        /** @description The answer of GET .../rewind (api.Rewind). */
        Rewind: {
            config: components["schemas"]["RewindConfig"];
            points: components["schemas"]["RewindPoint"][];
        };
        /** @description The body of POST .../rewind/undo (api.RewindUndoRequest); steps or to, not both. */
        RewindUndoRequest: {
            /** @default 1 */
            steps: number;
            to?: string;
        };
        /** @description The answer of an undo (api.RewindUndo). */
        RewindUndo: {
            restored: components["schemas"]["RewindPoint"];
            dropped: string[];
            kept_pinned: string[];
            revision: number;
        };
        /** @description The body of POST .../rewind/pin (api.RewindPinRequest). */
        RewindPinRequest: {
            tag: string;
            /** @default true */
            pinned: boolean;
        };
        /** @description The body of POST .../rewind/bisect (api.RewindBisectRequest). */
        RewindBisectRequest: {
            /** @description A shell line; exit 0 means good. */
            test: string;
            /** @description A point's tag (default the oldest point). */
            good?: string;
            /** @description A point's tag or now (the default). */
            bad?: string;
            /** @default 60 */
            timeout_seconds: number;
        };
        /** @description One state a bisect tested (api.RewindBisectState). */
        RewindBisectState: {
            state: string;
            passed: boolean;
            exit_code: number;
            timed_out?: boolean;
        };
        /** @description A bisect's answer (api.RewindBisect). */
        RewindBisect: {
            command: string;
            trigger: string;
            point: string;
            last_good: string;
            first_bad: string;
            tested: components["schemas"]["RewindBisectState"][];
            restores: number;
        };
        /** @description The body of POST .../rewind/branch (api.RewindBranchRequest). */
        RewindBranchRequest: {
            tag: string;
            /** @default 1 */
            count: number;
            /**
             * @description As fork's identity.
             * @default best-effort
             * @enum {string}
             */
            identity: "best-effort" | "unique" | "preserve";
        };
        /** @description A branch's answer (api.RewindBranch): a fork's answer, whose from is the point's tag, and the point. */
        RewindBranch: components["schemas"]["ForkResult"] & {
            point: components["schemas"]["RewindPoint"];
        };
        /** @description The answer of GET /v1/whoami (hostd/auth.WhoAmI). */
        WhoAmI: {
            /** @enum {string} */
            kind: "admin" | "tenant" | "session";
            /** @description A tenant token's tenant; for a session token, its session's tenant (absent for the admin's sessions). */
            tenant?: string;
            /** @description A session token's session. */
            session?: string;
            /** @description A session token's id (tok-…). */
            token_id?: string;
            /** @description A session token's operations. */
            ops?: string[];
            /**
             * Format: date-time
             * @description When a session token expires.
             */
            expires_at?: string;
        };
        /** @description One entry of a listing, or a stat (guest/api.FileInfo). */
        FileInfo: {
            name: string;
            path: string;
            /** @enum {string} */
            type: "file" | "dir" | "symlink" | "other";
            size: number;
            /** @description Octal permission bits such as 0644. */
            mode: string;
            /** Format: date-time */
            mtime: string;
            /** @description A symbolic link's target. */
            target?: string;
        };
        /** @description A directory listing or a stat (guest/api.Listing). */
        Listing: {
            /** @enum {string} */
            kind: "dir" | "file";
            path: string;
            entries: components["schemas"]["FileInfo"][];
            /** @description The directory has more than 10000 entries. */
            truncated: boolean;
            self?: components["schemas"]["FileInfo"];
        };
        /** @description The answer of GET .../files/content (hostd/session.FileRead). */
        FileRead: {
            path: string;
            content_base64: string;
            mode: string;
            size: number;
        };
        /** @description The body of PUT .../files/content (hostd/session.FileWrite). */
        FileWrite: {
            path: string;
            /** @description At most 8 MiB (8388608 bytes) decoded; absent writes an empty file. */
            content_base64?: string;
            /**
             * @description Octal permission bits.
             * @default 0644
             */
            mode: string;
            /**
             * @description Create missing parent directories.
             * @default true
             */
            parents: boolean;
        };
        /** @description The answer of GET .../files/range (hostd/session.FileRange). */
        FileRange: {
            path: string;
            offset: number;
            data_base64: string;
            /** @description Bytes in data_base64. */
            length: number;
            /** @description The whole file's size. */
            size: number;
            eof: boolean;
            /** @description Of the whole file, when checksum=true. */
            sha256?: string;
        };
        /** @description The body of POST .../jobs (hostd/session.JobStart). */
        JobStart: {
            /** @description A shell line for /bin/sh -c; at most 65536 bytes, without NUL. */
            command: string;
            /**
             * @description Give the job a stdin pipe (POST .../stdin).
             * @default false
             */
            stdin: boolean;
            /** @description Output kept per stream; 0 or absent is 16 MiB. */
            max_output_bytes?: number;
            /** @description Kills the job's process group when reached; 0 or absent is none. */
            timeout_seconds?: number;
            /** @description As on ExecRequest. */
            approval_id?: string;
            /** @description As on ExecRequest. */
            approval_wait_seconds?: number;
        };
        /** @description What was enforced for a confined command (guest/api.ConfineReport). */
        ConfineReport: {
            landlock_abi: number;
            landlock: boolean;
            landlock_rules: number;
            exec_allowlist: boolean;
            seccomp: boolean;
            no_new_privs: boolean;
            rlimits?: string[];
            /** @description Rights the kernel could not enforce. */
            missing?: string[];
        };
        /** @description A supervised job (hostd/session.Job, with guest/api.Job). */
        Job: {
            id: string;
            argv?: string[];
            shell?: string;
            /** @enum {string} */
            state: "running" | "exited" | "killed" | "signaled" | "timed_out";
            /** @description Set once the job ended. */
            exit_code?: number;
            signal?: string;
            pid: number;
            /** Format: date-time */
            started_at: string;
            /** Format: date-time */
            ended_at?: string;
            /** @description Retained. */
            stdout_bytes: number;
            /** @description Retained. */
            stderr_bytes: number;
            /** @description Past max_output_bytes, both streams. */
            dropped_bytes: number;
            stdin: boolean;
            stdin_closed: boolean;
            confinement?: components["schemas"]["ConfineReport"];
            command: string;
            /** @enum {string} */
            engine: "supervisor";
        };
        /** @description The answer of GET .../jobs. */
        JobList: {
            jobs: components["schemas"]["Job"][];
        };
        /** @description A job and its output from the offsets asked (hostd/session.JobRead). */
        JobRead: components["schemas"]["Job"] & {
            /** @description stdout from offset, decoded as UTF-8 (invalid bytes replaced). */
            output: string;
            /** @description The same bytes, exactly. */
            output_base64: string;
            next_offset: number;
            /** @description stderr from stderr_offset, decoded as UTF-8. */
            stderr: string;
            stderr_next_offset: number;
            /** @description More retained output is available right now. */
            more: boolean;
            /** @description The job ended and both streams were read to their end. */
            eof: boolean;
            /** @description Some output was dropped past the cap. */
            truncated: boolean;
        };
        /** @description The body of POST .../jobs/{job}/stdin (hostd/session.JobStdin); text or data_base64, not both. */
        JobStdin: {
            /** @description At most 49152 bytes. */
            text?: string;
            /** @description At most 49152 bytes decoded. */
            data_base64?: string;
            /**
             * @description Close stdin after the write.
             * @default false
             */
            close: boolean;
        };
        /** @description Data of the exec/stream start event. */
        JobStartEvent: {
            /** @description The job's id, for GET .../jobs/{job}/stream. */
            job: string;
        };
        /** @description Data of an output event. */
        JobOutputEvent: {
            offset: number;
            next_offset: number;
            /** @description Decoded as UTF-8 (invalid bytes replaced). */
            output: string;
            output_base64: string;
        };
        /** @description Data of a stderr event. */
        JobStderrEvent: {
            offset: number;
            next_offset: number;
            /** @description Decoded as UTF-8 (invalid bytes replaced). */
            stderr: string;
        };
        /** @description Data of the exit event. */
        JobExitEvent: {
            exit_code: number | null;
            /** @enum {string} */
            state: "exited" | "killed" | "signaled" | "timed_out";
            signal: string;
        };
        /** @description The body of GET /v1/backends (hostd/session.BackendList). */
        BackendList: {
            backends: components["schemas"]["BackendInfo"][];
        };
        /** @description The body of GET /v1/admin/tenants (api.TenantList). */
        TenantList: {
            tenants: components["schemas"]["TenantInfo"][];
        };
        /** @description One tenant as the admin sees it (api.TenantInfo). */
        TenantInfo: {
            name: string;
            limits: components["schemas"]["TenantLimits"];
            /** @description Its sessions and sandboxes not deleted. */
            sessions: number;
        };
        /** @description What a tenant's live sandboxes may hold together (api.TenantLimits); absent or 0 is the built-in default. */
        TenantLimits: {
            disk_mb?: number;
            memory_mb?: number;
            cpus?: number;
        };
        /** @description The body of POST /v1/policy/compile (api.PolicyCompileRequest). */
        PolicyCompileRequest: {
            policy?: components["schemas"]["PolicyInput"];
            /** @description As runtime.backend of a create: absent is the daemon's default. */
            backend?: string;
        };
        /** @description The answer of POST /v1/policy/compile (api.PolicyCompile). */
        PolicyCompile: {
            /** @description No refusal (a create may still fail on capacity, image or workspace). */
            ok: boolean;
            policy?: components["schemas"]["Policy"];
            /**
             * @description How the sandbox would reach the world; absent when the network part is refused.
             * @enum {string}
             */
            network?: "offline" | "egress";
            refusals: components["schemas"]["PolicyRefusal"][];
        };
        /** @description One reason a create with the policy would be refused (api.PolicyRefusal). */
        PolicyRefusal: {
            /** @description The HTTP status a create would answer. */
            status: number;
            /** @description Its stable code. */
            code?: string;
            error: string;
        };
        /** @description One enabled backend (hostd/session.BackendInfo). */
        BackendInfo: {
            /** @description What runtime.backend names it by. */
            name: string;
            /** @description Used when a create names no backend. */
            default: boolean;
            capabilities: components["schemas"]["Capabilities"];
        };
        /** @description The body of POST /v1/sandboxes (hostd/session.SandboxRequest). */
        SandboxRequest: {
            /**
             * @description Seconds until the sandbox is removed; 0 or absent is 600.
             * @default 600
             */
            ttl_seconds: number;
            /** @description Default the daemon's; an unknown one is 400. */
            image?: string;
            /** @description As runtime.backend of a session: absent is the daemon's default. */
            backend?: string;
            /**
             * @description Only true (or absent) today; sandboxes have loopback only.
             * @enum {boolean}
             */
            offline?: true;
            /** @description 0 or absent is the backend's default (procbox, the only backend today, 1; otherwise 0.01 to 64, else 400). */
            cpus?: number;
            /** @description 0 or absent is the backend's default (procbox 2048; otherwise 16 to 65536, else 400). */
            memory_mb?: number;
            /** @description Hosts (exact, or *.suffix for subdomains) the sandbox may reach over HTTP and HTTPS through the host's egress proxy; the sandbox keeps only loopback. Needs a daemon with egress (409 otherwise). */
            allow_hosts?: string[];
            /** @description Not supported yet; any entry is 400. */
            volumes?: unknown[];
        };
        /** @description A sandbox (hostd/session.Sandbox). */
        Sandbox: {
            id: string;
            backend: string;
            /**
             * @description gone or lost when the daemon restarted without its machine; commands are refused, delete it.
             * @enum {string}
             */
            status: "running" | "gone" | "lost";
            image: string;
            /** @description As asked; absent is the backend's default. */
            cpus?: number;
            /** @description As asked; absent is the backend's default. */
            memory_mb?: number;
            /** @description Always true: the sandbox has only loopback. */
            offline: boolean;
            /** @description Hosts it may reach through the host's egress proxy (exact, or *.suffix). */
            allow_hosts?: string[];
            /** @description Where commands start unless they give cwd. */
            workdir: string;
            ttl_seconds: number;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            expires_at: string;
        };
        /** @description The answer of GET /v1/sandboxes. */
        SandboxList: {
            sandboxes: components["schemas"]["Sandbox"][];
        };
        /** @description The body of POST /v1/sandboxes/{id}/process (hostd/session.ProcessRequest). */
        ProcessRequest: {
            /** @description A shell line for /bin/sh -c; at most 65536 bytes, without NUL. */
            command: string;
            /**
             * @description 0 or absent is 300.
             * @default 300
             */
            timeout_seconds: number;
            /** @description An absolute path without .. (default workdir). */
            cwd?: string;
            /** @description Added to the environment; at most 65536 bytes as NAME=VALUE, values without NUL. Names are ledgered, values never. */
            env?: {
                [key: string]: string;
            };
        };
        /** @description The answer of POST .../process (hostd/session.ProcessResult). */
        ProcessResult: components["schemas"]["ExecResult"] & {
            /** @enum {string} */
            result: "exec";
        };
        /** @description The body of POST .../fs/read (hostd/session.SandboxPath). */
        SandboxPath: {
            /** @description Absolute, without .. components, NUL or newline. */
            path: string;
        };
        /** @description The answer of POST .../fs/read (hostd/session.SandboxFile). */
        SandboxFile: {
            path: string;
            content_base64: string;
            size: number;
            /** @description Octal permission bits of what the path leads to ("" when unknown). */
            mode: string;
        };
        /** @description The body of POST .../fs/write (hostd/session.SandboxWrite): content_base64 for bytes or content for UTF-8 text, not both; neither writes an empty file. */
        SandboxWrite: {
            /** @description Absolute, without .. components, NUL or newline. */
            path: string;
            /** @description At most 32 MiB (33554432 bytes) decoded. */
            content_base64?: string;
            /** @description At most 33554432 bytes. */
            content?: string;
            /** @description Octal permission bits (default 0644). */
            mode?: string;
        };
        /** @description The answer of POST .../fs/write (hostd/session.SandboxWritten). */
        SandboxWritten: {
            path: string;
            size: number;
            mode?: string;
        };
    };
    responses: {
        /** @description Bad input (invalid JSON, an unknown field, a value out of range, a malformed header or query parameter); the message says what to fix. */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description No valid bearer token (Authorization: Bearer <token>): none, an unknown one, or a session token that was revoked, expired or whose session ended (the message says which). */
        Unauthorized: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Refused in the sandbox: the path would change a read-only workspace, lies under one of the image's system directories (which the files routes never write), is a program of the session's execute list, or the guest user may not touch it (the files routes, reads included, act with its rights; a link leading outside the root). Or a session token used outside its session or its operations (any route may answer this to a session token). */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description No such session or sandbox (or an id of the other kind), or no such item in it. */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The state does not allow it now; the message says why. */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description A cap on job and exec streams is reached: 4 on this session, 8 on the tenant's sessions or 16 on the daemon (code job_streams_session, job_streams_tenant or job_streams_daemon). Close a stream or wait for one to end. */
        JobStreamLimited: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["StreamLimited"];
            };
        };
        /** @description If-Match names a revision the session is no longer at. */
        PreconditionFailed: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The body is over its limit (1 MiB for JSON unless the operation says otherwise). */
        PayloadTooLarge: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description This Idempotency-Key was used with a different request. */
        UnprocessableEntity: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The sandbox could not be made ready. */
        BadGateway: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description An unexpected failure, logged by the daemon (the state store failed, or the sandbox's agent did not answer). */
        InternalError: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: {
        /** @description The terminal's width in character cells. */
        TerminalCols: number;
        /** @description The terminal's height in character cells. */
        TerminalRows: number;
        /** @description A shell line run by /bin/sh -c in the terminal instead of the guest user's login shell; the terminal closes when it exits. Ledgered in pty.open. */
        TerminalCommand: string;
        /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
        SessionID: string;
        /** @description An approval request's id (apr-…). */
        ApprovalID: string;
        /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
        SandboxID: string;
        /** @description A changeset's id (cs- and 16 hex digits). */
        ChangesetID: string;
        /** @description An upload's id (up-…). */
        UploadID: string;
        /** @description A grant's id (gr-…). */
        GrantID: string;
        /** @description A session token's public id (tok-…), never the token. */
        TokenID: string;
        /** @description The preview's id (pv- and 16 hex digits) or its token (pvw- and 52 characters, as in its URL). A token is looked up by its SHA-256 among this session's previews; it is never repeated in an error or written to hostd's log. */
        PreviewID: string;
        /** @description A job's id. */
        JobID: string;
        /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
        IdempotencyKey: string;
        /** @description The session revision the change is meant for (a number, quotes allowed), or *. Absent or * means any; a stale revision is 412, a malformed one 400. */
        IfMatch: string;
        /** @description Resume after this ledger seq (the id of the last ledger event received). */
        LastEventIDLedger: string;
        /** @description Resume at <stdout offset>:<stderr offset> (the id of the last event received); it overrides offset and stderr_offset. */
        LastEventIDJob: string;
        /** @description An absolute path in the sandbox, without .. components, NUL or newline, at most 4096 bytes. */
        FilePath: string;
        /** @description The repository's absolute path, without .. (default the workspace). */
        GitRepo: string;
        /** @description At most this many ledger entries (default 10000). */
        EventsLimit: number;
        /** @description The newest this many ledger entries and VM events, oldest first. */
        EventsTail: number;
        /** @description How many commits. */
        GitLogN: number;
        /** @description The first byte to read. */
        RangeOffset: number;
        /** @description How many bytes to read at most. */
        RangeLength: number;
        /** @description The stdout byte to read from (next_offset of the previous read). */
        JobOffset: number;
        /** @description The stderr byte to read from (stderr_next_offset of the previous read). */
        JobStderrOffset: number;
        /** @description How long to wait for new output when there is none (long poll). */
        JobWaitMillis: number;
        /** @description Where the chunk goes; must equal the upload's received. */
        UploadOffset: number;
    };
    requestBodies: never;
    headers: {
        /** @description true when this answer is the replay of an earlier request with the same Idempotency-Key. */
        IdempotentReplayed: "true";
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The daemon serves. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
        };
    };
    listSessions: {
        parameters: {
            query?: {
                /** @description true lists deleted sessions too (state deleted); only the words true and false are accepted. */
                include_deleted?: "true" | "false";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sessions. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionList"];
                };
            };
            /** @description include_deleted is neither true nor false. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            500: components["responses"]["InternalError"];
        };
    };
    createSession: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CreateRequest"];
            };
        };
        responses: {
            /** @description The session, running. workspace.mode, workspace.git (credential removed) and workspace.note say how the workspace was set up; a note means it was not (the clone failed, for example) unless require_ready turned that into a 502. */
            201: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            /** @description Bad input: agent, ttl_seconds, workspace (path, mode, lower, a git URL that is not https:// or has a query or fragment), an unknown runtime.image, a runtime the backend refuses, runtime.memory_mb or runtime.cpus above the host's (code memory_above_host, cpus_above_host), an Idempotency-Key over 255 characters, or invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The tenant's live sessions and sandboxes would pass one of its limits (code tenant_disk_limit, tenant_memory_limit, tenant_cpus_limit). */
            403: components["responses"]["Forbidden"];
            /** @description workspace.mode readonly on a backend or sandbox that cannot enforce it (nothing is left behind), a backend that cannot do what was asked, runtime.disk_mb that the backend's disk cannot hold on top of what is promised already (code disk_exhausted), budget.max_compute_seconds on a backend that does not measure its machines' CPU time (code compute_budget_unmetered: qemu; see capabilities.cpu_meter), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
            /** @description workspace.require_ready is set and the workspace did not initialize (not created, or the clone failed); the sandbox was removed. */
            502: components["responses"]["BadGateway"];
        };
    };
    getSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    deleteSession: {
        parameters: {
            query?: never;
            header?: {
                /** @description The session revision the change is meant for (a number, quotes allowed), or *. Absent or * means any; a stale revision is 412, a malformed one 400. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted, or there was nothing to delete. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A malformed If-Match. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The id is a sandbox's (use DELETE /v1/sandboxes/{id}). */
            404: components["responses"]["NotFound"];
            /** @description A checkpoint, restore, fork or another delete of the session is in progress. */
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            500: components["responses"]["InternalError"];
        };
    };
    exec: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ExecRequest"];
            };
        };
        responses: {
            /** @description How the command ended. A non-zero exit is still 200. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExecResult"];
                };
            };
            /** @description Empty command, one over 64 KiB or with NUL, timeout_seconds or approval_wait_seconds out of range, a malformed approval_id, both approval_id and approval_wait_seconds, approval_id for a command the policy allows without one, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The session's process policy refuses the command (the rule, the pattern and the piece of the command it matched are in the body), or an approval_id that cannot run it (denied, expired, used, or given for another command, other parameters or an earlier revision); also a read-only workspace refusal from the sandbox, or a budget limit reached (max_jobs, max_concurrent_jobs, max_compute_seconds, max_workspace_bytes; max_execs and max_exec_seconds on exec), with budget, limit and used in the body. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CommandRefused"];
                };
            };
            404: components["responses"]["NotFound"];
            /** @description The session is not running (expired, gone, lost, deleted), a checkpoint, restore or fork is in progress, or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            /** @description The command matched an ask rule of the session's process policy and did not run: an operator approves or denies the request (POST .../approvals/{approval}/approve or /deny), then the caller retries with approval_id. Asking again for the same command answers the same request until it is decided or expires. */
            428: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Held"];
                };
            };
            500: components["responses"]["InternalError"];
        };
    };
    execStream: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ExecRequest"];
            };
        };
        responses: {
            /** @description The job's events, from its start to its exit. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description Empty command, one over 64 KiB or with NUL, timeout_seconds out of the guest's range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The session's process policy refuses the command (the rule, the pattern and the piece of the command it matched are in the body), or an approval_id that cannot run it (denied, expired, used, or given for another command, other parameters or an earlier revision); also a read-only workspace refusal from the sandbox, or a budget limit reached (max_jobs, max_execs, max_concurrent_jobs, max_compute_seconds, max_workspace_bytes), with budget, limit and used in the body. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CommandRefused"];
                };
            };
            404: components["responses"]["NotFound"];
            /** @description The session is not running, a lifecycle operation is in progress, or the guest keeps 256 jobs already. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            /** @description The command matched an ask rule of the session's process policy and did not run: an operator approves or denies the request (POST .../approvals/{approval}/approve or /deny), then the caller retries with approval_id. Asking again for the same command answers the same request until it is decided or expires. */
            428: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Held"];
                };
            };
            429: components["responses"]["JobStreamLimited"];
            500: components["responses"]["InternalError"];
        };
    };
    checkpoint: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description The session revision the change is meant for (a number, quotes allowed), or *. Absent or * means any; a stale revision is 412, a malformed one 400. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CheckpointRequest"];
            };
        };
        responses: {
            /** @description The checkpoint; the session's revision went up by one. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Checkpoint"];
                };
            };
            /** @description A tag that is not 1-64 letters, digits, '.', '_' or '-' (starting with a letter or digit), a malformed If-Match, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description What the checkpoint may come to hold would pass the tenant's disk_mb limit (code tenant_disk_limit; it is removed). */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The tag is taken, memory: true where memory checkpoints are not available, the session is not running, another lifecycle operation is in progress, the backend cannot, the checkpoint may come to hold more than the backend's disk has left (code disk_exhausted; it is removed), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    restore: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description The session revision the change is meant for (a number, quotes allowed), or *. Absent or * means any; a stale revision is 412, a malformed one 400. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RestoreRequest"];
            };
        };
        responses: {
            /** @description The session after the restore (its revision went up by one). */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            /** @description A malformed If-Match, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The machine booted again would pass one of the tenant's limits, lowered since it was made (code tenant_disk_limit, tenant_memory_limit, tenant_cpus_limit). */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or the session has no checkpoint with this tag. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running, another lifecycle operation is in progress, commands are running on the session (an exec in flight or a running job, which the restore would pull the machine from), the backend cannot, the machine no longer fits the backend's disk (code disk_exhausted), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    fork: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
                /** @description The session revision the change is meant for (a number, quotes allowed), or *. Absent or * means any; a stale revision is 412, a malformed one 400. */
                "If-Match"?: components["parameters"]["IfMatch"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ForkRequest"];
            };
        };
        responses: {
            /** @description The children. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ForkResult"];
                };
            };
            /** @description count out of 1-32, an unknown identity (code fork_identity_unknown), a malformed from, a malformed If-Match, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The session's budget.max_children would be passed by count more children. (Count children that would pass one of the tenant's limits are 403 too, with an Error body and code tenant_disk_limit, tenant_memory_limit or tenant_cpus_limit.) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BudgetExceeded"];
                };
            };
            404: components["responses"]["NotFound"];
            /** @description The backend cannot fork, the session is not running, another lifecycle operation is in progress, identity unique and a child's identity was not its own (code fork_identity_not_unique), identity preserve on a backend that cannot give it, count children the backend's disk cannot hold (code disk_exhausted), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            412: components["responses"]["PreconditionFailed"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    promote: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PromoteRequest"];
            };
        };
        responses: {
            /** @description The plan, and what was applied. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PromoteResult"];
                };
            };
            /** @description A malformed plan_id, more than 100 paths, a path outside the workspace, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token, a read-only parent workspace, the parent's budget (max_workspace_bytes). */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description Code not_fork_child (the session has no parent), no_baseline (the child has no workspace baseline from a fork), plan_changed (the plan_id given is not the plan's now), promote_conflicts (paths changed on both sides, without skip_conflicts: nothing was applied), promote_too_large (more than 2000 changed paths or 2 GiB to copy: name some with paths); or conflict: a session not running, the parent gone, commands running on either session, another operation in progress. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
            /** @description Code promote_incomplete: the transfer stopped midway; the message says how many paths were applied and names the checkpoint whose restore undoes them. */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    artifacts: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The artifacts. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Artifacts"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    events: {
        parameters: {
            query?: {
                /** @description Only what happened after this time (RFC 3339). */
                since?: string;
                /** @description Only the ledger entries with a seq above this one (not with since). */
                after?: number;
                /** @description At most this many ledger entries (default 10000). */
                limit?: components["parameters"]["EventsLimit"];
                /** @description The newest this many ledger entries and VM events, oldest first. */
                tail?: components["parameters"]["EventsTail"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The ledger. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Events"];
                };
            };
            /** @description since is not an RFC 3339 time, tail, limit or after is out of range, or tail comes with since, after or limit, or after with since. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    eventsStream: {
        parameters: {
            query?: {
                /** @description Without Last-Event-ID, replay only the entries after this time (RFC 3339). */
                since?: string;
            };
            header?: {
                /** @description Resume after this ledger seq (the id of the last ledger event received). */
                "Last-Event-ID"?: components["parameters"]["LastEventIDLedger"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ledger entries as events. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description Last-Event-ID is not a ledger sequence number, or since is not an RFC 3339 time. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description A cap on ledger streams is reached: 8 on this session, 16 on the tenant's sessions or 64 on the daemon (code event_streams_session, event_streams_tenant or event_streams_daemon). */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StreamLimited"];
                };
            };
            500: components["responses"]["InternalError"];
        };
    };
    trajectory: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The trajectory. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Trajectory"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    verifyLedger: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The verification. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LedgerVerification"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description Too many ledger verifies run for the tenant or the daemon (too_many_requests); retry shortly. */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["InternalError"];
        };
    };
    gitStatus: {
        parameters: {
            query?: {
                /** @description The repository's absolute path, without .. (default the workspace). */
                repo?: components["parameters"]["GitRepo"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description output is git's. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GitResult"];
                };
            };
            /** @description repo is not an absolute path without .. (at most 1024 bytes). */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session, repo does not exist, or it is not a git repository. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running, git is not installed in the image, or git failed. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    gitDiff: {
        parameters: {
            query?: {
                /** @description The repository's absolute path, without .. (default the workspace). */
                repo?: components["parameters"]["GitRepo"];
                /** @description Limit the diff to this path, relative to the repository (no .., not starting with - or /). */
                path?: string;
                /** @description true for git diff --cached. */
                staged?: components["schemas"]["QueryBool"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description output is the diff; truncated when it was cut at 262144 bytes. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GitResult"];
                };
            };
            /** @description A bad repo, path or staged. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session, repo does not exist, or it is not a git repository. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running, git is not installed in the image, or git failed. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    gitLog: {
        parameters: {
            query?: {
                /** @description The repository's absolute path, without .. (default the workspace). */
                repo?: components["parameters"]["GitRepo"];
                /** @description How many commits. */
                n?: components["parameters"]["GitLogN"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description entries, newest first (empty for a repository without commits). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GitResult"];
                };
            };
            /** @description A bad repo, or n out of 1-200. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session, repo does not exist, or it is not a git repository. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running, git is not installed in the image, or git failed. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    gitCommit: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["GitRequest"];
            };
        };
        responses: {
            /** @description commit is the new HEAD. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GitResult"];
                };
            };
            /** @description message empty, over 16 KiB or with NUL, a bad repo, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The repository is in a read-only workspace, or the session's budget is spent (budget, limit and used beside the message). */
            403: components["responses"]["Forbidden"];
            /** @description No such session, repo does not exist, or it is not a git repository. */
            404: components["responses"]["NotFound"];
            /** @description Nothing to commit, the session is not running, a lifecycle operation is in progress, git is not installed, the repository's config sets a clean or process filter (commit with exec), a merge, cherry-pick or revert is in progress, the repository uses an extension the verbs do not know, or git failed. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    gitBranch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["GitRequest"];
            };
        };
        responses: {
            /** @description branch is the new branch. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GitResult"];
                };
            };
            /** @description name is not 1-200 letters, digits, '.', '_', '-' and '/' starting with a letter or digit, or has .., ends in .lock or /; a bad repo; invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The repository is in a read-only workspace. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, repo does not exist, or it is not a git repository. */
            404: components["responses"]["NotFound"];
            /** @description The branch exists, the session is not running, a lifecycle operation is in progress, git is not installed, or git failed. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    probe: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The probe. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Probe"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    listUploads: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The uploads, open and complete. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UploadList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    openUpload: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UploadRequest"];
            };
        };
        responses: {
            /** @description The upload, state open, received 0. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Upload"];
                };
            };
            /** @description size out of 1 to 2 GiB, sha256 not 64 hex digits, a path that is not absolute or has .., NUL or newline, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The path would change a read-only workspace. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description 8 uploads are open, the session is not running, or a lifecycle operation is in progress. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    getUpload: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The upload. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Upload"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    uploadChunk: {
        parameters: {
            query: {
                /** @description Where the chunk goes; must equal the upload's received. */
                offset: components["parameters"]["UploadOffset"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        /** @description The chunk's raw bytes, 1 to 4 MiB (4194304 bytes), ending at most at the upload's size. */
        requestBody: {
            content: {
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description The upload after the chunk (received moved on). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Upload"];
                };
            };
            /** @description offset missing or out of range, an empty chunk, or a chunk that ends past size. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session or upload. */
            404: components["responses"]["NotFound"];
            /** @description offset is not where the upload stands (the message names the offset to continue at), the upload is complete, the session is not running, or a lifecycle operation is in progress. */
            409: components["responses"]["Conflict"];
            /** @description The chunk is over 4 MiB. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    abortUpload: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Aborted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description No such session or upload. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    completeUpload: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An upload's id (up-…). */
                upload: components["parameters"]["UploadID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The upload, state complete; verified when a sha256 was given and matched. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Upload"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The path would change a read-only workspace (checked again at complete), lies under one of the image's system directories (/bin /boot /etc /lib* /proc /sbin /sys /usr /.paddock) named or through links, would change a program of the session's execute list (process.enforce exec; the program, a link on the way to it or a directory holding it), or the guest user may not write there, since the files routes act with the guest user's rights (uid 1000), not root's. The message says which and what is allowed; code system_path, exec_program or permission_denied (absent for the read-only workspace). */
            403: components["responses"]["Forbidden"];
            /** @description No such session or upload. */
            404: components["responses"]["NotFound"];
            /** @description Not every byte was received (the message names the offset to continue at), the sha256 does not match (nothing was written), the session is not running, or a lifecycle operation is in progress. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    listApprovals: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The requests. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApprovalList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    approve: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An approval request's id (apr-…). */
                approval: components["parameters"]["ApprovalID"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ApprovalDecision"];
            };
        };
        responses: {
            /** @description The request, approved. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            /** @description A note over 512 bytes or with control characters, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The request is not pending any more (approved, denied, consumed or expired). */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    deny: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description An approval request's id (apr-…). */
                approval: components["parameters"]["ApprovalID"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ApprovalDecision"];
            };
        };
        responses: {
            /** @description The request, denied. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Approval"];
                };
            };
            /** @description A note over 512 bytes or with control characters, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The request is not pending any more. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    listGrants: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The live grants, oldest first; none after a daemon restart. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GrantList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    createGrant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["GrantRequest"];
            };
        };
        responses: {
            /** @description The grant, without its value. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Grant"];
                };
            };
            /** @description Both or neither of value and secret_ref, a secret_ref whose variable the daemon does not have (the message names the variable, never a value), no hosts or a bad host pattern, a bad method, path pattern or header, ttl_seconds out of range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A tenant named secret_ref (code secret_ref_admin_only: only the admin token may grant the daemon's secrets; send the credential as value), or the caller is a session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, or it has 16 live grants. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    revokeGrants: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked (or there were none). */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    revokeGrant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A grant's id (gr-…). */
                grant: components["parameters"]["GrantID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or it has no live grant with this id. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    listTokens: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tokens neither revoked nor expired, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    mintToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["TokenRequest"];
            };
        };
        responses: {
            /** @description The token, with its secret this once. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionToken"];
                };
            };
            /** @description ops empty or naming an unknown operation (the message names it), ttl_seconds out of range, a label over 64 characters or with a character that is not printable, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, or it has 32 live tokens. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    revokeToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A session token's public id (tok-…), never the token. */
                token: components["parameters"]["TokenID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked, or it was already. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or it never had a token with this id. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    replaySession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ReplayRequest"];
            };
        };
        responses: {
            /** @description What ran (or, dry, would run), what was skipped, and why it stopped. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReplayResult"];
                };
            };
            /** @description No target without dry_run, the target is this session, since or until negative or out of order, timeout_seconds out of range, approval_id with dry_run, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token without read here, or any session token with a target (it has no exec on another session). */
            403: components["responses"]["Forbidden"];
            /** @description No such session (or another tenant's), as source or target. */
            404: components["responses"]["NotFound"];
            /** @description The target is not running (a dry run may still name it). */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    speculate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SpeculateRequest"];
            };
        };
        responses: {
            /** @description The pending changeset, contents included. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            /** @description No command, no paths or more than 32, a path with '..' or /, timeout_seconds out of range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token without exec and files.read (speculate), files.read (changesets) or files.write (apply); any session token on decide. Also the target's process policy refusing the command, or a budget limit (CommandRefused). */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or another tenant's. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running or its backend cannot fork; 50 changesets kept, all pending (changesets_full). */
            409: components["responses"]["Conflict"];
            /** @description The command is over 64 KiB, or the body over its limit. */
            413: components["responses"]["PayloadTooLarge"];
            /** @description The command matched an ask rule of the session's process policy: nothing ran and nothing was kept; an operator decides the approval, then the caller retries with approval_id. */
            428: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Held"];
                };
            };
            500: components["responses"]["InternalError"];
        };
    };
    listChangesets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description At most 50 changesets. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChangesetList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session, or another tenant's. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    getChangeset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The changeset. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session or changeset. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    decideChangeset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ChangesetDecision"];
            };
        };
        responses: {
            /** @description The changeset, decided. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            /** @description A decision other than approve or reject, a reason over 1024 bytes, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            /** @description No such session or changeset. */
            404: components["responses"]["NotFound"];
            /** @description The changeset is decided already (changeset_decided). */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    applyChangeset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The changeset (without contents) and the paths written or removed. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApplyResult"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token without files.write, a changeset larger than max_workspace_bytes leaves (before any write), or a write the files routes refuse (a read-only workspace, the execute list, a system path). */
            403: components["responses"]["Forbidden"];
            /** @description No such session or changeset. */
            404: components["responses"]["NotFound"];
            /** @description Not approved or applied already (changeset_not_approved), incomplete (changeset_incomplete), files changed since (changeset_conflict), or the session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    createPreview: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PreviewRequest"];
            };
        };
        responses: {
            /** @description The preview, with its token and URL this once. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Preview"];
                };
            };
            /** @description port out of range or one of the sandbox's egress ports, ttl_seconds out of range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token without the preview operation, or of another session. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, or it has 16 live previews. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    listPreviews: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The previews that have not expired, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PreviewList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token without the read operation, or of another session. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    deletePreview: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description The preview's id (pv- and 16 hex digits) or its token (pvw- and 52 characters, as in its URL). A token is looked up by its SHA-256 among this session's previews; it is never repeated in an error or written to hostd's log. */
                preview: components["parameters"]["PreviewID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token without the preview operation, or of another session. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or it has no preview with this id or token. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    listFiles: {
        parameters: {
            query: {
                /** @description An absolute path in the sandbox, without .. components, NUL or newline, at most 4096 bytes. */
                path: components["parameters"]["FilePath"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The listing. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Listing"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session or path. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    deleteFile: {
        parameters: {
            query: {
                /** @description An absolute path in the sandbox, without .. components, NUL or newline, at most 4096 bytes. */
                path: components["parameters"]["FilePath"];
                /** @description true removes a directory with its contents. */
                recursive?: components["schemas"]["QueryBool"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description A bad path or recursive, / or a top-level directory. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The path would change a read-only workspace, lies under one of the image's system directories (/bin /boot /etc /lib* /proc /sbin /sys /usr /.paddock) named or through links, would change a program of the session's execute list (process.enforce exec; the program, a link on the way to it or a directory holding it), or the guest user may not remove it, since the files routes act with the guest user's rights (uid 1000), not root's. The message says which and what is allowed; code system_path, exec_program or permission_denied (absent for the read-only workspace). */
            403: components["responses"]["Forbidden"];
            /** @description No such session or path. */
            404: components["responses"]["NotFound"];
            /** @description A directory that is not empty without recursive, the session is not running, or a lifecycle operation is in progress. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    readFile: {
        parameters: {
            query: {
                /** @description An absolute path in the sandbox, without .. components, NUL or newline, at most 4096 bytes. */
                path: components["parameters"]["FilePath"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The content. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileRead"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session or file. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            /** @description The file is over 8 MiB. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    writeFile: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        /** @description At most 8 MiB of content, so the body may be up to about 11.2 MB (not 1 MiB). */
        requestBody: {
            content: {
                "application/json": components["schemas"]["FileWrite"];
            };
        };
        responses: {
            /** @description The file as written. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileInfo"];
                };
            };
            /** @description A bad path or mode, content_base64 that is not base64, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The path would change a read-only workspace, lies under one of the image's system directories (/bin /boot /etc /lib* /proc /sbin /sys /usr /.paddock) named or through links, would change a program of the session's execute list (process.enforce exec; the program, a link on the way to it or a directory holding it), or the guest user may not write there, since the files routes act with the guest user's rights (uid 1000), not root's. The message says which and what is allowed; code system_path, exec_program or permission_denied (absent for the read-only workspace). */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or a parent is missing and parents is false. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running, or a lifecycle operation is in progress. */
            409: components["responses"]["Conflict"];
            /** @description The content is over 8 MiB (use uploads). */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    readRange: {
        parameters: {
            query: {
                /** @description An absolute path in the sandbox, without .. components, NUL or newline, at most 4096 bytes. */
                path: components["parameters"]["FilePath"];
                /** @description The first byte to read. */
                offset?: components["parameters"]["RangeOffset"];
                /** @description How many bytes to read at most. */
                length?: components["parameters"]["RangeLength"];
                /** @description true adds sha256 of the whole file. */
                checksum?: components["schemas"]["QueryBool"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The bytes read. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileRange"];
                };
            };
            /** @description A bad path, offset, length or checksum. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such session or file. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    listJobs: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The jobs the guest remembers. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    startJob: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["JobStart"];
            };
        };
        responses: {
            /** @description The job, running. */
            201: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description Empty command, one over 64 KiB or with NUL, max_output_bytes or timeout_seconds out of range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The session's process policy refuses the command (the rule, the pattern and the piece of the command it matched are in the body), or an approval_id that cannot run it (denied, expired, used, or given for another command, other parameters or an earlier revision); also a read-only workspace refusal from the sandbox, or a budget limit reached (max_jobs, max_concurrent_jobs, max_compute_seconds, max_workspace_bytes; max_execs and max_exec_seconds on exec), with budget, limit and used in the body. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CommandRefused"];
                };
            };
            404: components["responses"]["NotFound"];
            /** @description The session is not running, a lifecycle operation is in progress, the guest keeps 256 jobs already, or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            /** @description The command matched an ask rule of the session's process policy and did not run: an operator approves or denies the request (POST .../approvals/{approval}/approve or /deny), then the caller retries with approval_id. Asking again for the same command answers the same request until it is decided or expires. */
            428: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Held"];
                };
            };
            500: components["responses"]["InternalError"];
        };
    };
    readJob: {
        parameters: {
            query?: {
                /** @description The stdout byte to read from (next_offset of the previous read). */
                offset?: components["parameters"]["JobOffset"];
                /** @description The stderr byte to read from (stderr_next_offset of the previous read). */
                stderr_offset?: components["parameters"]["JobStderrOffset"];
                /** @description How long to wait for new output when there is none (long poll). */
                wait_ms?: components["parameters"]["JobWaitMillis"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job and its output from the offsets. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobRead"];
                };
            };
            /** @description offset, stderr_offset or wait_ms out of range. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description No such session or job. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    signalJob: {
        parameters: {
            query?: {
                /** @description A signal name with or without SIG (TERM, KILL, INT, HUP, …; any case) or a number from 1 to 64. */
                signal?: string;
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job after the signal. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description An unknown signal. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description No such session or job. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    jobStdin: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["JobStdin"];
            };
        };
        responses: {
            /** @description The job after the write. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description Both text and data_base64, data_base64 that is not base64, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description No such session or job. */
            404: components["responses"]["NotFound"];
            /** @description The job was started without stdin, has exited, its stdin is closed, it did not read its stdin in time, or the session is not running. */
            409: components["responses"]["Conflict"];
            /** @description More than 48 KiB in one write, or a body over 1 MiB. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    jobStream: {
        parameters: {
            query?: {
                /** @description The stdout byte to read from (next_offset of the previous read). */
                offset?: components["parameters"]["JobOffset"];
                /** @description The stderr byte to read from (stderr_next_offset of the previous read). */
                stderr_offset?: components["parameters"]["JobStderrOffset"];
            };
            header?: {
                /** @description Resume at <stdout offset>:<stderr offset> (the id of the last event received); it overrides offset and stderr_offset. */
                "Last-Event-ID"?: components["parameters"]["LastEventIDJob"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
                /** @description A job's id. */
                job: components["parameters"]["JobID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job's events from the offsets to its exit. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description offset or stderr_offset out of range, or a Last-Event-ID that is not <stdout offset>:<stderr offset>. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description No such session or job. */
            404: components["responses"]["NotFound"];
            /** @description The session is not running. */
            409: components["responses"]["Conflict"];
            429: components["responses"]["JobStreamLimited"];
            500: components["responses"]["InternalError"];
        };
    };
    openTerminal: {
        parameters: {
            query?: {
                /** @description The terminal's width in character cells. */
                cols?: components["parameters"]["TerminalCols"];
                /** @description The terminal's height in character cells. */
                rows?: components["parameters"]["TerminalRows"];
                /** @description A shell line run by /bin/sh -c in the terminal instead of the guest user's login shell; the terminal closes when it exits. Ledgered in pty.open. */
                command?: components["parameters"]["TerminalCommand"];
            };
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching Protocols: the terminal runs until one side closes (x-websocket: the messages each way and the close codes). */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not a WebSocket upgrade, cols or rows out of 1..1000, a command over 4096 bytes or with NUL. */
            400: components["responses"]["BadRequest"];
            /** @description No valid bearer token, or a ticket that is unknown, used, expired or made for another session (which of these is not told; a ticket is spent by its first use, whatever the outcome). */
            401: components["responses"]["Unauthorized"];
            /** @description A session token, or a session with process rules or a read-only workspace. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, a lifecycle operation is in progress on it, 16 terminals are open on this daemon, 8 are open for the calling tenant, or its backend has no terminal. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
            502: components["responses"]["BadGateway"];
        };
    };
    terminalTicket: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The ticket, sent with Cache-Control: no-store. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TerminalTicket"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token, or a session with process rules or a read-only workspace. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, its backend has no terminal, 64 of the caller's tickets are waiting to be used (the admin is one caller, each tenant another), or 1024 tickets are waiting to be used on this daemon. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    policyStatus: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The engine's state. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PolicyStatus"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The daemon runs without a policy engine. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
    listTenants: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenants. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TenantList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["InternalError"];
        };
    };
    whoami: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The kind of token, and for a tenant or session token what it reaches. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WhoAmI"];
                };
            };
            401: components["responses"]["Unauthorized"];
            500: components["responses"]["InternalError"];
        };
    };
    listBackends: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The enabled backends. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BackendList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            500: components["responses"]["InternalError"];
        };
    };
    compilePolicy: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PolicyCompileRequest"];
            };
        };
        responses: {
            /** @description The compiled policy and the refusals (none when ok). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PolicyCompile"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    getRewind: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The config (the defaults when rewind was never configured) and the points. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Rewind"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    rewindConfig: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RewindConfigRequest"];
            };
        };
        responses: {
            /** @description The config and points after the change. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Rewind"];
                };
            };
            /** @description max_points out of 1..50, an empty triggers list or an unknown trigger. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token. */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The session is not running, or max_points would leave no unpinned slot. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    rewindUndo: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RewindUndoRequest"];
            };
        };
        responses: {
            /** @description The point restored, the points dropped and those kept for their pin. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RewindUndo"];
                };
            };
            /** @description Both steps and to, steps out of 1..50, a to that is no point's tag form. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token, or the machine would pass a tenant limit. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or no point with this tag. */
            404: components["responses"]["NotFound"];
            /** @description steps goes past the oldest point (the message says how many there are), the session has no points, commands are running, another operation is in progress, or the Idempotency-Key's first request is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    rewindPin: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RewindPinRequest"];
            };
        };
        responses: {
            /** @description The point. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RewindPoint"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or no point with this tag. */
            404: components["responses"]["NotFound"];
            /** @description The pin would leave no unpinned slot in the ring. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    rewindBisect: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RewindBisectRequest"];
            };
        };
        responses: {
            /** @description The command between the last good and the first bad state, and every state tested. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RewindBisect"];
                };
            };
            /** @description An empty or too long test, timeout_seconds out of 1..600, good not older than bad. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token, or the process policy refuses the test. */
            403: components["responses"]["Forbidden"];
            /** @description No such session, or no point with the good or bad tag. */
            404: components["responses"]["NotFound"];
            /** @description The ends agree (both pass or both fail), the session has no points, commands are running, or another operation is in progress. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
            502: components["responses"]["BadGateway"];
        };
    };
    rewindBranch: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A session's id. A sandbox's id (sbx-…) is 404 on every session route. */
                id: components["parameters"]["SessionID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RewindBranchRequest"];
            };
        };
        responses: {
            /** @description The children, as a fork answers, and the point they started from. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RewindBranch"];
                };
            };
            /** @description A malformed tag, count out of 1-32, an unknown identity (code fork_identity_unknown), invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token (Error body), or the session's budget.max_children would be passed by count more children (or a tenant's limit, with code tenant_disk_limit, tenant_memory_limit or tenant_cpus_limit). */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BudgetExceeded"];
                };
            };
            /** @description No such session, or no point with that tag. */
            404: components["responses"]["NotFound"];
            /** @description The backend cannot fork, the session is not running, another lifecycle operation is in progress, identity unique or preserve cannot be given, the backend's disk cannot hold the children, or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    listSandboxes: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sandboxes. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SandboxList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            500: components["responses"]["InternalError"];
        };
    };
    createSandbox: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["SandboxRequest"];
            };
        };
        responses: {
            /** @description The sandbox, running. */
            201: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Sandbox"];
                };
            };
            /** @description offline: false, volumes (not available yet), an invalid or too long allow_hosts (at most 64), ttl_seconds out of range, an unknown image, a runtime the backend refuses, memory_mb or cpus above the host's (code memory_above_host, cpus_above_host), invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The tenant's live sessions and sandboxes would pass one of its limits (code tenant_disk_limit, tenant_memory_limit, tenant_cpus_limit). */
            403: components["responses"]["Forbidden"];
            /** @description The backend cannot, allow_hosts on a daemon without egress, the backend's disk cannot hold the sandbox on top of what is promised already (code disk_exhausted), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    getSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The sandbox. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Sandbox"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description Never created, deleted, removed at its TTL, or an agent session's id. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    deleteSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Removed, or already gone. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            /** @description The id is an agent session's; it is left alone. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    sandboxProcess: {
        parameters: {
            query?: never;
            header?: {
                /** @description Makes a retry safe: the same key with the same method, path and body replays the first 2xx answer for 24 hours; with another request it is 422, and while the first request still runs, 409. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ProcessRequest"];
            };
        };
        responses: {
            /** @description How the command ended. A non-zero exit is still 200. */
            200: {
                headers: {
                    "Idempotent-Replayed": components["headers"]["IdempotentReplayed"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ProcessResult"];
                };
            };
            /** @description Empty command, one over 64 KiB or with NUL, timeout_seconds out of range, a bad cwd, env over 128 variables or 64 KiB or with a bad name or a NUL, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The process policy refuses the command, as on a session's exec (the operator's modules: a sandbox has no process rules of its own), with the same body (the rule, pattern and piece it matched); a command the policy would hold for approval is refused too, since the sandbox API has no approvals. Also a budget limit reached, with budget, limit and used in the body, or a command hook's refusal. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CommandRefused"];
                };
            };
            404: components["responses"]["NotFound"];
            /** @description The sandbox is gone or lost (its machine did not survive a daemon restart; delete it), or the first request with this Idempotency-Key is still running. */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            422: components["responses"]["UnprocessableEntity"];
            500: components["responses"]["InternalError"];
        };
    };
    sandboxRead: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SandboxPath"];
            };
        };
        responses: {
            /** @description The content; mode is that of what the path leads to. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SandboxFile"];
                };
            };
            /** @description An empty, relative or too long path, one with .., NUL or newline, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox, or the file does not exist. */
            404: components["responses"]["NotFound"];
            /** @description The sandbox is gone or lost, or the file changed size while it was read. */
            409: components["responses"]["Conflict"];
            /** @description The file is over 32 MiB, or the body over 1 MiB. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    sandboxWrite: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        /** @description At most 32 MiB of content, so the body may be up to about 44.8 MB (not 1 MiB). */
        requestBody: {
            content: {
                "application/json": components["schemas"]["SandboxWrite"];
            };
        };
        responses: {
            /** @description The file as written. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SandboxWritten"];
                };
            };
            /** @description A bad path or mode, both content_base64 and content, content_base64 that is not base64, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The path would change a read-only workspace, lies under one of the image's system directories (/bin /boot /etc /lib* /proc /sbin /sys /usr /.paddock) named or through links, would change a program of the session's execute list (process.enforce exec; the program, a link on the way to it or a directory holding it), or the guest user may not write there, since the files routes act with the guest user's rights (uid 1000), not root's. The message says which and what is allowed; code system_path, exec_program or permission_denied (absent for the read-only workspace). */
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            /** @description The sandbox is gone or lost. */
            409: components["responses"]["Conflict"];
            /** @description The content is over 32 MiB. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    speculateSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SpeculateRequest"];
            };
        };
        responses: {
            /** @description The pending changeset, contents included. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            /** @description No command, no paths or more than 32, a path with '..' or /, a relative path, timeout_seconds out of range, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description A session token (sandboxes take the admin or a tenant token), or the sandbox's process policy refusing or holding the command (a sandbox has no approvals). */
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox, or another tenant's. */
            404: components["responses"]["NotFound"];
            /** @description The sandbox is not running or its backend cannot fork; 50 changesets kept, all pending (changesets_full). */
            409: components["responses"]["Conflict"];
            /** @description The command is over 64 KiB, or the body over its limit. */
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    listChangesetsSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description At most 50 changesets. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChangesetList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox, or another tenant's. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    getChangesetSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The changeset. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox or changeset. */
            404: components["responses"]["NotFound"];
            500: components["responses"]["InternalError"];
        };
    };
    decideChangesetSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ChangesetDecision"];
            };
        };
        responses: {
            /** @description The changeset, decided. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Changeset"];
                };
            };
            /** @description A decision other than approve or reject, a reason over 1024 bytes, invalid JSON. */
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The caller is a session token. */
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox or changeset. */
            404: components["responses"]["NotFound"];
            /** @description The changeset is decided already (changeset_decided). */
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            500: components["responses"]["InternalError"];
        };
    };
    applyChangesetSandbox: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A sandbox's id (sbx- and 16 hex digits). A session's id is 404 on every sandbox route. */
                id: components["parameters"]["SandboxID"];
                /** @description A changeset's id (cs- and 16 hex digits). */
                changeset: components["parameters"]["ChangesetID"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The changeset (without contents) and the paths written or removed. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ApplyResult"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A session token without files.write, a changeset larger than max_workspace_bytes leaves (before any write), or a write the files routes refuse (a read-only workspace, the execute list, a system path). */
            403: components["responses"]["Forbidden"];
            /** @description No such sandbox or changeset. */
            404: components["responses"]["NotFound"];
            /** @description Not approved or applied already (changeset_not_approved), incomplete (changeset_incomplete), files changed since (changeset_conflict), or the sandbox is not running. */
            409: components["responses"]["Conflict"];
            500: components["responses"]["InternalError"];
        };
    };
}
