-- Partitions (SPEC §9): the log becomes P independent logs, one per partition, so that several
-- `herald serve` instances (and Citus workers) can each own some of them. A user's partition is
-- fnv1a64(user id) mod P; every partitioned table gains a `partition` column that leads its keys
-- (Citus distributes by it and requires it in every unique index), and each partition has its own
-- gap-free `seq` and `cursor`. Idempotency becomes per (app, user, id) (SPEC §3).
--
-- On an existing database every row is in partition 0 and P is 1: the log it held is partition
-- 0's log unchanged. Cost: the primary keys and unique indexes of `events` and `deliveries` are
-- rebuilt (a scan of each table under an exclusive lock); the new columns are metadata only.

-- ---------------------------------------------------------------------------------------------
-- The number of partitions
-- ---------------------------------------------------------------------------------------------

-- P, fixed when the database is created (`herald migrate --partitions P`, which calls
-- herald_set_partitions while the log is empty) and never changed after: a user's partition, and
-- so where its events are, depends on it.
CREATE TABLE partitioning (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    partitions integer NOT NULL CHECK (partitions BETWEEN 1 AND 1024),
    hash       text    NOT NULL DEFAULT 'fnv1a64' CHECK (hash = 'fnv1a64')
);
INSERT INTO partitioning (partitions) VALUES (1);

-- ---------------------------------------------------------------------------------------------
-- Heads and leases: one row per partition
-- ---------------------------------------------------------------------------------------------

-- A partition's event head and its lease, in one row. Every event append claims its positions
-- here (herald_claim_events) with the owner's epoch: the row lock serialises the partition's
-- event appenders until COMMIT, so positions stay gap-free and commit-ordered, and an appender
-- whose epoch is not the row's (it lost the lease) is refused inside its own transaction and
-- never acknowledges. Taking a partition bumps `epoch`; a take that meets an append in flight
-- waits for its COMMIT, then sees the positions it claimed (Temporal's range_id is the model).
-- `lease_expires` is judged on the database's clock (now()), never an instance's.
CREATE TABLE partitions (
    partition     integer     PRIMARY KEY CHECK (partition >= 0),
    seq           bigint      NOT NULL DEFAULT 0,   -- the last event position claimed
    epoch         bigint      NOT NULL DEFAULT 0,   -- the fencing token: bumped by every take
    owner         text,                             -- the owning instance's name (NULL: never owned)
    address       text,                             -- where the owner serves (host:port)
    lease_expires timestamptz                       -- the owner must renew before this
);
INSERT INTO partitions (partition, seq) SELECT 0, seq FROM event_head;
ANALYZE partitions;

-- A partition's delivery head, in a row of its own: delivery appends (the delivery writers',
-- beside the events writer's) then never wait on the event appends' row lock. Deliveries are
-- derived from the log and keyed by (user, ordinal), so a delivery append checks the epoch
-- without locking the lease row: one from an instance that has just lost the partition is the
-- decision its successor derives from the same events, and the unique key keeps one of them.
CREATE TABLE delivery_heads (
    partition integer PRIMARY KEY CHECK (partition >= 0),
    cursor    bigint  NOT NULL DEFAULT 0               -- the last delivery cursor claimed
);
INSERT INTO delivery_heads (partition, cursor) SELECT 0, cursor FROM delivery_head;
ANALYZE delivery_heads;
DROP VIEW herald_consumer_lag;
DROP TABLE event_head;
DROP TABLE delivery_head;

-- Sets P on a database whose log is empty (`herald migrate --partitions P`). Refused once any
-- event or delivery is stored, or when P was already set to another value.
CREATE FUNCTION herald_set_partitions(p_count integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    current_count integer;
BEGIN
    SELECT partitions INTO current_count FROM partitioning FOR UPDATE;
    IF current_count = p_count THEN
        RETURN p_count;
    END IF;
    IF EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM deliveries) THEN
        RAISE EXCEPTION 'herald: the database has % partition(s) and a log; P is fixed once anything is stored', current_count
            USING ERRCODE = 'HE003',
                  HINT = 'Export the log (herald export) and import it into a database migrated with the partitions you want.';
    END IF;
    IF p_count < 1 OR p_count > 1024 THEN
        RAISE EXCEPTION 'herald: % partitions is out of range', p_count
            USING ERRCODE = 'HE003', HINT = 'Use 1 to 1024 partitions.';
    END IF;
    UPDATE partitioning SET partitions = p_count;
    DELETE FROM partitions WHERE partition >= p_count;
    DELETE FROM delivery_heads WHERE partition >= p_count;
    INSERT INTO partitions (partition) SELECT g FROM generate_series(0, p_count - 1) g ON CONFLICT DO NOTHING;
    INSERT INTO delivery_heads (partition) SELECT g FROM generate_series(0, p_count - 1) g ON CONFLICT DO NOTHING;
    RETURN p_count;
END;
$$;

-- Refuses an append to a partition whose epoch is not the caller's (SQLSTATE HE002): another
-- instance took the partition over, and the caller must not store or acknowledge anything.
CREATE FUNCTION herald_refuse_fenced(p_partition integer, p_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'herald: partition % is not held at epoch %', p_partition, p_epoch
        USING ERRCODE = 'HE002', HINT = 'Another instance took the partition over; this one must not append to it.';
END;
$$;

-- Claims `p_count` event positions of a partition for an owner holding `p_epoch` (NULL: an
-- unfenced writer, such as `herald import` on a database nobody serves). Returns the position
-- before the claim. Raises HE002 when the partition's epoch is not `p_epoch`: the caller lost
-- its lease and must not append.
CREATE FUNCTION herald_claim_events(p_partition integer, p_epoch bigint, p_count bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
BEGIN
    UPDATE partitions h SET seq = h.seq + p_count
    WHERE h.partition = p_partition AND (p_epoch IS NULL OR h.epoch = p_epoch)
    RETURNING h.seq - p_count INTO base;
    IF NOT FOUND THEN
        PERFORM herald_refuse_fenced(p_partition, p_epoch);
    END IF;
    RETURN base;
END;
$$;

-- As herald_claim_events, for delivery cursors (the epoch read, not locked: see delivery_heads).
CREATE FUNCTION herald_claim_deliveries(p_partition integer, p_epoch bigint, p_count bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    base bigint;
BEGIN
    IF p_epoch IS NOT NULL AND NOT EXISTS (SELECT 1 FROM partitions l WHERE l.partition = p_partition AND l.epoch = p_epoch) THEN
        PERFORM herald_refuse_fenced(p_partition, p_epoch);
    END IF;
    UPDATE delivery_heads h SET cursor = h.cursor + p_count WHERE h.partition = p_partition
    RETURNING h.cursor - p_count INTO base;
    IF NOT FOUND THEN
        PERFORM herald_refuse_fenced(p_partition, p_epoch);
    END IF;
    RETURN base;
END;
$$;

-- Moves a partition's delivery head from `p_base` to `p_end` for a chained delivery append (the
-- owner assigned the cursors): SQLSTATE 40001 when the head is not at `p_base`, HE002 when the
-- epoch is not the caller's.
CREATE FUNCTION herald_advance_deliveries(p_partition integer, p_epoch bigint, p_base bigint, p_end bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
    at_cursor bigint;
BEGIN
    SELECT l.epoch INTO held FROM partitions l WHERE l.partition = p_partition;
    SELECT h.cursor INTO at_cursor FROM delivery_heads h WHERE h.partition = p_partition FOR UPDATE;
    IF held IS NULL OR at_cursor IS NULL OR (p_epoch IS NOT NULL AND held <> p_epoch) THEN
        PERFORM herald_refuse_fenced(p_partition, p_epoch);
    END IF;
    IF at_cursor <> p_base THEN
        RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = format(
            'the delivery head is not at %s (partition %s is at %s): the transaction that was to move it there rolled back, or another writer moved it; append again',
            p_base, p_partition, at_cursor);
    END IF;
    UPDATE delivery_heads h SET cursor = p_end WHERE h.partition = p_partition;
END;
$$;

-- ---------------------------------------------------------------------------------------------
-- The log, partitioned
-- ---------------------------------------------------------------------------------------------

ALTER TABLE events ADD COLUMN partition integer NOT NULL DEFAULT 0 CHECK (partition >= 0);
ALTER TABLE events ALTER COLUMN partition DROP DEFAULT;
ALTER TABLE events DROP CONSTRAINT events_pkey, ADD PRIMARY KEY (partition, seq);
-- Idempotency: (app, user, id) is unique forever (SPEC §3), inside the user's partition, so the
-- check is where the user's events are. A fan-out (one id, many users) has one key per
-- recipient. Its leading columns serve the look-ups by (app, notification_id) of a partition: a
-- withdraw that names no user, `herald explain`.
DROP INDEX events_notification_once;
CREATE UNIQUE INDEX events_notification_once ON events (partition, app, notification_id, user_id)
    WHERE notification_id IS NOT NULL;
COMMENT ON COLUMN events.partition IS 'The recipient''s partition: fnv1a64(user_id) mod P; 0 … P-1 for global events, one row in each';
COMMENT ON COLUMN events.recipient_index IS
    'Place of the row among its submit''s recipients (0 … n-1 for a fan-out; 0 otherwise)';

ALTER TABLE deliveries ADD COLUMN partition integer NOT NULL DEFAULT 0 CHECK (partition >= 0);
ALTER TABLE deliveries ALTER COLUMN partition DROP DEFAULT;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey, ADD PRIMARY KEY (partition, cursor);
ALTER TABLE deliveries DROP CONSTRAINT deliveries_user_id_user_index_key,
    ADD CONSTRAINT deliveries_user_index UNIQUE (partition, user_id, user_index);

-- ---------------------------------------------------------------------------------------------
-- The append functions, per partition (replacing 002's)
-- ---------------------------------------------------------------------------------------------

-- Appends events to partition `p_partition` for the owner holding `p_epoch` (NULL: unfenced, for
-- `herald import` and tools on a database nobody serves; HE002 when the epoch is not held). The
-- arrays are one per column, as in 002, and the outcomes too: (0, base, 'batch') when every row
-- was appended at base + ord (the fast path, the common case); otherwise (ord, seq, outcome) for
-- every input row, ordered by ord. Idempotency is per row now: a row whose (app, id, user) is
-- stored is a `duplicate` of it when its body is the stored one, else a `conflict`, answering the
-- stored row's seq; a key used twice in the batch stores its first row only, and the later ones
-- answer that row's new seq. Rows without a key (every event but submits) are always appended.
DROP FUNCTION herald_append_events(text[], text[], text[], text[], text[], timestamptz[], integer[]);
CREATE FUNCTION herald_append_events(
    p_partition integer, p_epoch bigint,
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[], p_index integer[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
BEGIN
    BEGIN
        base := herald_claim_events(p_partition, p_epoch, n);
        INSERT INTO events (partition, seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
        SELECT p_partition, base + t.ord, t.user_id, t.type, t.app, t.notification_id, t.body::json, t.engine_time, t.recipient_index
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        RETURN QUERY SELECT 0::bigint, base, 'batch'::text;
        RETURN;
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT t.*, (t.app IS NOT NULL AND t.notification_id IS NOT NULL AND t.user_id IS NOT NULL) AS keyed
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord)
    ),
    stored AS (
        -- Keyed rows whose key is in the log, with the stored row (an index probe each).
        SELECT i.ord, e.seq, coalesce(e.body = i.body, false) AS same
        FROM input i
        CROSS JOIN LATERAL (
            SELECT ev.seq, ev.body FROM events ev
            WHERE ev.partition = p_partition AND ev.app = i.app AND ev.notification_id = i.notification_id
              AND ev.user_id = i.user_id
            LIMIT 1
        ) e
        WHERE i.keyed
    ),
    unstored AS (
        SELECT i.*, CASE WHEN i.keyed THEN min(i.ord) OVER (PARTITION BY i.keyed, i.app, i.notification_id, i.user_id) ELSE i.ord END AS first_ord
        FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.ord = i.ord)
    ),
    fresh AS (
        SELECT u.*, row_number() OVER (ORDER BY u.ord) AS rn FROM unstored u WHERE u.first_ord = u.ord
    ),
    head AS MATERIALIZED (
        SELECT herald_claim_events(p_partition, p_epoch, (SELECT count(*) FROM fresh)) AS base
    ),
    inserted AS (
        INSERT INTO events (partition, seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
        SELECT p_partition, head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.body::json, f.engine_time, f.recipient_index
        FROM fresh f, head
        RETURNING seq
    )
    SELECT f.ord, head.base + f.rn, 'appended'::text FROM fresh f, head
    UNION ALL
    SELECT s.ord, s.seq, CASE WHEN s.same THEN 'duplicate' ELSE 'conflict' END FROM stored s
    UNION ALL
    SELECT u.ord, head.base + f.rn, CASE WHEN u.body = f.body THEN 'duplicate' ELSE 'conflict' END
    FROM unstored u JOIN fresh f ON f.ord = u.first_ord, head
    WHERE u.first_ord <> u.ord
    ORDER BY 1;
END;
$$;

-- Appends deliveries to partition `p_partition` (epoch as above). A delivery whose
-- (user_id, user_index) is stored already (re-derived after a restart) is skipped. Returns (0,
-- base) when every row was stored at base + ord; otherwise (ord, cursor) of the rows stored.
DROP FUNCTION herald_append_deliveries(text[], bigint[], bigint[], text[], text[], text[], text[], timestamptz[], text[], text[], text[]);
CREATE FUNCTION herald_append_deliveries(
    p_partition integer, p_epoch bigint,
    p_user text[], p_user_index bigint[], p_cause_seq bigint[], p_kind text[], p_app text[], p_id text[],
    p_reason text[], p_at timestamptz[], p_rules_version text[], p_trace text[], p_body text[])
RETURNS TABLE (r_ord bigint, r_cursor bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
BEGIN
    BEGIN
        base := herald_claim_deliveries(p_partition, p_epoch, n);
        INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                rules_version, trace, body)
        SELECT p_partition, base + t.ord, t.user_id, t.user_index, t.cause_seq, t.kind, t.app, t.notification_id, t.reason,
               t.at, t.rules_version, t.trace::json, t.body::json
        FROM unnest(p_user, p_user_index, p_cause_seq, p_kind, p_app, p_id, p_reason, p_at, p_rules_version,
                    p_trace, p_body)
             WITH ORDINALITY AS t(user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                  rules_version, trace, body, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        RETURN QUERY SELECT 0::bigint, base;
        RETURN;
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT t.*
        FROM unnest(p_user, p_user_index, p_cause_seq, p_kind, p_app, p_id, p_reason, p_at, p_rules_version,
                    p_trace, p_body)
             WITH ORDINALITY AS t(user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                  rules_version, trace, body, ord)
    ),
    fresh AS (
        SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
        FROM input i
        LEFT JOIN LATERAL (
            SELECT true AS found FROM deliveries d
            WHERE d.partition = p_partition AND d.user_id = i.user_id AND d.user_index = i.user_index
            LIMIT 1
        ) d ON true
        WHERE d.found IS NULL
    ),
    head AS MATERIALIZED (
        SELECT herald_claim_deliveries(p_partition, p_epoch, (SELECT count(*) FROM fresh)) AS base
    ),
    inserted AS (
        INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                rules_version, trace, body)
        SELECT p_partition, head.base + f.rn, f.user_id, f.user_index, f.cause_seq, f.kind, f.app, f.notification_id, f.reason,
               f.at, f.rules_version, f.trace::json, f.body::json
        FROM fresh f, head
        RETURNING cursor
    )
    SELECT f.ord, head.base + f.rn FROM fresh f, head ORDER BY 1;
END;
$$;

-- ---------------------------------------------------------------------------------------------
-- Consumers: one cursor per partition
-- ---------------------------------------------------------------------------------------------

-- The last cursor each durable consumer acknowledged in each partition. A consumer with no row
-- for a partition has acknowledged nothing there.
CREATE TABLE consumer_cursors (
    partition   integer     NOT NULL CHECK (partition >= 0),
    name        text        NOT NULL,
    acked       bigint      NOT NULL DEFAULT 0 CHECK (acked >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition, name)
);
INSERT INTO consumer_cursors (partition, name, acked, updated_at) SELECT 0, name, acked, updated_at FROM consumers;
ALTER TABLE consumers DROP COLUMN acked, DROP COLUMN updated_at;
COMMENT ON TABLE consumers IS 'Durable consumer names; their positions are in consumer_cursors, one row per partition';

-- ---------------------------------------------------------------------------------------------
-- Snapshots and rules versions, per partition
-- ---------------------------------------------------------------------------------------------

ALTER TABLE snapshots ADD COLUMN partition integer NOT NULL DEFAULT 0 CHECK (partition >= 0);
ALTER TABLE snapshots ALTER COLUMN partition DROP DEFAULT;
ALTER TABLE rules_versions ADD COLUMN partition integer NOT NULL DEFAULT 0 CHECK (partition >= 0);
ALTER TABLE rules_versions ALTER COLUMN partition DROP DEFAULT;

-- ---------------------------------------------------------------------------------------------
-- Operator views
-- ---------------------------------------------------------------------------------------------

-- How far each durable consumer is behind the newest committed delivery, per partition (a
-- partition where it acknowledged nothing counts from 0).
CREATE VIEW herald_consumer_lag AS
SELECT c.name AS consumer, h.partition, coalesce(k.acked, 0) AS acked, h.cursor AS head,
       h.cursor - coalesce(k.acked, 0) AS lag, k.updated_at AS acked_at
FROM consumers c
CROSS JOIN delivery_heads h
LEFT JOIN consumer_cursors k ON k.name = c.name AND k.partition = h.partition;

-- Which instance owns each partition, at which epoch, and whether its lease is still valid.
CREATE VIEW herald_partition_owners AS
SELECT h.partition, h.owner, h.address, h.epoch, h.lease_expires, h.lease_expires > now() AS lease_valid,
       h.seq AS events, d.cursor AS deliveries
FROM partitions h JOIN delivery_heads d ON d.partition = h.partition;
