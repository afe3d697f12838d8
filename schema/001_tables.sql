-- The tables: the append-only log (events, deliveries and their position counters), durable
-- consumers, engine-state snapshots and the rules versions. Their indexes are here too, and the
-- trigger that keeps the log append-only. Functions that append are in 002, operator views in 003.
--
-- A table's indexes are only those something Herald runs reads: every index costs every append
-- (a B-tree insert on the single writer's backend), and the append rate is Herald's bound.

-- ---------------------------------------------------------------------------------------------
-- Positions
-- ---------------------------------------------------------------------------------------------

-- The next event position. Each append transaction bumps the head row in the same statement
-- that inserts its rows, so positions are gap-free (a rolled-back append rolls back its bump)
-- and commit-ordered (the row lock serialises appenders until COMMIT): a reader that has seen
-- position N has seen everything below N. A bare sequence gives neither (ARCHITECTURE.md).
CREATE TABLE event_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq bigint NOT NULL DEFAULT 0
);
INSERT INTO event_head DEFAULT VALUES;

-- The next delivery cursor, bumped the same way by each delivery append.
CREATE TABLE delivery_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cursor bigint NOT NULL DEFAULT 0
);
INSERT INTO delivery_head DEFAULT VALUES;

-- Statistics for the one-row head tables: without them the planner guesses ~2,200 rows, and
-- the append statements' estimated cost crosses jit_above_cost.
ANALYZE event_head;
ANALYZE delivery_head;

-- ---------------------------------------------------------------------------------------------
-- The log
-- ---------------------------------------------------------------------------------------------

-- The event log: every accepted request is one immutable row (a fan-out is one row per
-- recipient). `body` is the normalized request as canonical JSON text, the bytes Herald's own
-- encoder wrote; replay compares them byte for byte. It is `text`, not `json`: `json` would only
-- parse every value again on the server, on the single writer's backend. The SQL append paths
-- (herald_append_events, `herald import`) cast their input with ::json, so they still refuse
-- invalid JSON; a hand-written INSERT into the table does not. Query bodies with
-- `body::json ->> 'x'`, or through the views of 003.
--
-- The key columns (user_id, app, notification_id) compare bytes (COLLATE "C") whatever the
-- database's locale: every insert descends a unique index on them, and with a glibc locale each
-- comparison would go through strcoll (~25% of the writer backend's CPU a submit). Equality is
-- the same under any deterministic collation; only an operator's ORDER BY on these columns sees
-- byte order (add COLLATE "en_US" to it for the locale's). The same columns of `deliveries` are
-- "C" too, so comparing the two needs no COLLATE clause.
CREATE TABLE events (
    seq             bigint      PRIMARY KEY,
    user_id         text        COLLATE "C",    -- the recipient; NULL for global events (registerApp)
    type            text        NOT NULL,
    app             text        COLLATE "C",
    notification_id text        COLLATE "C",
    body            text        NOT NULL,       -- canonical JSON
    engine_time     timestamptz NOT NULL,       -- the instant the engine saw
    -- The append statement's start, not clock_timestamp(): COPY inserts rows one at a time (no
    -- heap_multi_insert) when a column it fills by default is volatile. Each append is one short
    -- statement, so the value still says when the append ran.
    committed_at    timestamptz NOT NULL DEFAULT statement_timestamp(),
    -- The row's place among its submit's recipients: 0 … n-1 for a fan-out (whose rows are
    -- appended together, in one transaction), 0 for everything else.
    recipient_index integer     NOT NULL DEFAULT 0,
    CHECK (seq > 0)
)
-- A young log is analyzed, and vacuumed for its inserts, every million rows rather than every
-- 10% (20%) of growth. Each ANALYZE samples 30,000 rows and costs ~150–200 ms of CPU whatever the
-- table's size, and each insert-triggered VACUUM (on an append-only log it only sets visibility
-- bits and freezes) is a burst of CPU and I/O beside the writer's commits: on a small machine
-- both stall every commit behind them, and a young log met them every few seconds of load. The
-- tables are read by key and their distributions change slowly, so fresher statistics buy
-- nothing. A 100M-row log is still handled every ~11M (~21M) rows, as the scale factors dominate
-- there; anti-wraparound vacuum is not affected. An operator who wants the defaults back:
--   ALTER TABLE events RESET (autovacuum_analyze_threshold, autovacuum_vacuum_insert_threshold);
WITH (autovacuum_analyze_threshold = 1000000, autovacuum_vacuum_insert_threshold = 1000000);
COMMENT ON COLUMN events.recipient_index IS
    'Place of the row among its submit''s recipients (0 … n-1 for a fan-out; 0 otherwise); (app, notification_id, recipient_index) is unique';

-- Idempotency: a notification id is unique per app forever, whoever its recipients (SPEC §3). A
-- later request that reuses a stored (app, id) collides on its first row (recipient_index 0)
-- whatever its users, and the careful append path (herald_append_events) then answers the whole
-- request: a duplicate when it repeats the stored one row for row, a conflict otherwise. Rows
-- without a notification id (every event but submits) are not in the index. Its leading columns
-- serve the look-ups by (app, notification_id): a withdraw that names no user, `herald explain`.
-- This is the log's only index besides its primary key: nothing on the hot path reads one user's
-- events (`herald state` scans the log; an installation where that matters more than append
-- speed can add an index on (user_id, seq)).
CREATE UNIQUE INDEX events_notification_once ON events (app, notification_id, recipient_index)
    WHERE notification_id IS NOT NULL;

-- Deliveries: the engine's decisions, derived from events (replay re-derives them byte for byte).
-- `user_index` is the delivery's ordinal in its user's own stream (deterministic from the fold).
-- `trace` is every rule evaluated, in order, ending with the one that decided (SPEC §10), as a
-- compact JSON array of strings: the bare rule code when the rule did not apply (`withdrawn`),
-- `rule:outcome` otherwise (`focus:decided`, `critical:downgraded`). Compact because a delivery
-- row's bytes are most of what storing it costs PostgreSQL. Operators: `trace::jsonb ?
-- 'focus:decided'` finds the deliveries a Focus held, `trace::jsonb ->> -1` is the deciding step;
-- `herald explain` prints traces expanded. `body` and `trace` are `text` holding canonical JSON,
-- as `events.body` is.
CREATE TABLE deliveries (
    cursor          bigint      PRIMARY KEY,
    user_id         text        COLLATE "C" NOT NULL,
    user_index      bigint      NOT NULL,
    cause_seq       bigint      NOT NULL,       -- the event whose fold produced it
    kind            text        NOT NULL,
    app             text        COLLATE "C",
    notification_id text        COLLATE "C",
    reason          text        NOT NULL,
    at              timestamptz NOT NULL,       -- engine time of the decision
    rules_version   text        NOT NULL,       -- the rules version that decided it
    trace           text        NOT NULL,       -- compact JSON: the rules evaluated, in order
    body            text        NOT NULL,       -- the delivery line without op/cursor, canonical JSON
    committed_at    timestamptz NOT NULL DEFAULT statement_timestamp(),  -- as events.committed_at
    CHECK (cursor > 0),
    UNIQUE (user_id, user_index)
)
-- As for events.
WITH (autovacuum_analyze_threshold = 1000000, autovacuum_vacuum_insert_threshold = 1000000);
-- The unique (user_id, user_index) index serves every per-user read (`herald explain`, the
-- operator views); replay, start-up and consumers read along `cursor`. There is deliberately no
-- index on (app, notification_id) nor on cause_seq: nothing Herald runs reads them, and every
-- delivery insert would pay for them. An installation that needs one can create it, and pay for
-- it on every append:
--   CREATE INDEX CONCURRENTLY deliveries_notification ON deliveries (app, notification_id)
--       WHERE notification_id IS NOT NULL;
--   CREATE INDEX CONCURRENTLY deliveries_cause ON deliveries (cause_seq);

-- The log is append-only: the database refuses UPDATE, DELETE and TRUNCATE, whoever asks.
CREATE FUNCTION herald_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'herald: % on % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'HE001',
              HINT = 'Events and deliveries are immutable history; correct state by appending a new event.';
END;
$$;
-- Statement-level, so the refusal does not depend on whether any row matched.
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();
CREATE TRIGGER deliveries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();

-- ---------------------------------------------------------------------------------------------
-- Consumers
-- ---------------------------------------------------------------------------------------------

-- Durable consumers: the last cursor each named consumer acknowledged.
CREATE TABLE consumers (
    name        text        PRIMARY KEY,
    acked       bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (acked >= 0)
);

-- ---------------------------------------------------------------------------------------------
-- Snapshots (docs/restart.md)
-- ---------------------------------------------------------------------------------------------

-- Engine-state snapshots, so start-up folds only the events after the latest one. Not on the
-- hot path: a snapshot is written by its own connection, in parts, while the service keeps
-- serving. One row per snapshot. `through_seq`: every event at or below it is in the snapshot's
-- state (the position when capture began; each user's state also records the seq of its last
-- folded event, so events between through_seq and a later part's capture are recognised and
-- skipped). `header`: format version, the app registry at through_seq, the engine time at
-- capture. `completed_at` is set (the row's only update) once every part is stored and every
-- delivery the captured states had decided is committed: a snapshot without it is ignored (a
-- crash between part writes leaves one; the next snapshot deletes it).
CREATE TABLE snapshots (
    id           bigserial PRIMARY KEY,
    through_seq  bigint NOT NULL,
    format       integer NOT NULL,
    header       bytea NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    users        bigint,
    parts        integer,
    bytes        bigint
);

-- The users' encoded states, a few MB a part, in capture order.
CREATE TABLE snapshot_parts (
    snapshot_id bigint NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    part        integer NOT NULL,
    users       integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (snapshot_id, part)
);
-- Varints and short strings compress little; pglz on every part would cost the writer CPU.
ALTER TABLE snapshot_parts ALTER COLUMN data SET STORAGE EXTERNAL;

-- ---------------------------------------------------------------------------------------------
-- Rules versions (docs/engine.md, "Rules versions")
-- ---------------------------------------------------------------------------------------------

-- Which rules version decided each part of the log, so a newer build replays an older log byte
-- for byte: every delivery records the version that made it (SPEC §10), a build that changes a
-- rule bumps it, and replay decides each event by the rules in force when it was first decided.
-- One row per start-up of `herald serve` (or load of a synthetic history) whose build's version
-- differs from the latest row's, or that finds no row (then from seq 1). A log with no row was
-- never served (events written by a tool) and is decided by the folding build's version.
-- An event at seq s is decided by the version of the last row with from_seq <= s; a timer by its
-- arming event's version when it fires as that event folds, otherwise by the last row with at <
-- its deadline (timers due by a start-up were owed by the build that stopped); a row with
-- from_seq = 1 (recorded on an empty log) governs every timer. `at` is the latest of the
-- start-up's engine time, the log's and the newest stored decision's. Never updated or deleted;
-- `herald export` / `import` carry the rows.
CREATE TABLE rules_versions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- recording order
    from_seq    bigint      NOT NULL CHECK (from_seq > 0),  -- not unique: two take-overs may meet no event between them
    at          timestamptz NOT NULL,               -- engine time of the start-up
    version     text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()  -- wall clock, for operators
);
COMMENT ON TABLE rules_versions IS 'Rules version in force from each seq (events) and engine time (timers); see schema/001_tables.sql';
