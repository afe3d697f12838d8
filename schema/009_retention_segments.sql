-- Retention (SPEC §14; docs/retention.md; docs/decisions/0042-retention-by-archive-segments.md):
-- the log's old events and deliveries leave the hot tables as archive segments, then their
-- tables are dropped. Nothing changes until an operator turns retention on: this file adds the
-- bookkeeping tables and the functions `herald retain` calls; `herald_segment_log()` (run by the
-- first `herald retain`) turns `events` and `deliveries` into tables range-partitioned by
-- position, whose children ("segments") are dropped whole, never deleted from.
--
-- Cost on an existing database: none (three empty tables, functions). The conversion, when an
-- operator runs it, takes an exclusive lock on both tables for one scan of each.

-- Per partition: the retention horizon. Every event at or below `seq`, every delivery at or below
-- `cursor`, may be gone from the hot tables (archived first); restart starts from snapshot
-- `snapshot_id`, whose through_seq is at or after `seq`. A consumer cannot resume before `cursor`
-- (`cursor_expired`). No row: nothing was dropped (horizon 0).
CREATE TABLE retention_horizons (
    partition   integer     PRIMARY KEY CHECK (partition >= 0),
    seq         bigint      NOT NULL DEFAULT 0 CHECK (seq >= 0),
    cursor      bigint      NOT NULL DEFAULT 0 CHECK (cursor >= 0),
    snapshot_id bigint,
    engine_time timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The archive: one row per segment file written by `herald retain`, with what verifies it (rows,
-- SHA-256 of the file's bytes). `dropped_at` is set once the segment's rows left the hot tables.
CREATE TABLE archive_segments (
    partition      integer     NOT NULL CHECK (partition >= 0),
    kind           text        NOT NULL CHECK (kind IN ('events', 'deliveries')),
    first_position bigint      NOT NULL,
    last_position  bigint      NOT NULL,
    rows           bigint      NOT NULL,
    sha256         text        NOT NULL,
    file           text        NOT NULL,
    archived_at    timestamptz NOT NULL DEFAULT now(),
    dropped_at     timestamptz,
    PRIMARY KEY (partition, kind, first_position)
);

-- Content that survives its event's drop: a user's state refers to some notifications by the seq
-- of their submit and reads the body back when it needs it (lean pending items, the snoozable
-- list, snoozes, a snooze of an app's recent notification: docs/restart.md). Before a segment is dropped, `herald retain` copies here the
-- rows of it that the latest snapshot's states refer to, and removes those no state refers to any
-- more; readers of bodies by seq read `events` and this table. At most ~128 rows per app of a user.
CREATE TABLE retained_content (
    partition integer NOT NULL CHECK (partition >= 0),
    seq       bigint  NOT NULL,
    user_id   text    COLLATE "C",
    body      text    NOT NULL,
    PRIMARY KEY (partition, seq)
);

-- Bodies by seq, for the readers above (restart, lean content when due, snooze): from `events`,
-- then those of the rest found in `retained_content`. Two statements, so that on Citus neither
-- mixes the distributed log with this coordinator table.
CREATE FUNCTION herald_bodies(p_partition integer, p_seqs bigint[])
RETURNS TABLE (seq bigint, body text, user_id text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    hot bigint[] := '{}';
    r record;
BEGIN
    FOR r IN SELECT e.seq, e.body, e.user_id FROM events e WHERE e.partition = p_partition AND e.seq = ANY(p_seqs) LOOP
        seq := r.seq; body := r.body; user_id := r.user_id;
        hot := hot || r.seq;
        RETURN NEXT;
    END LOOP;
    IF cardinality(hot) < cardinality(p_seqs) THEN
        RETURN QUERY SELECT k.seq, k.body, k.user_id FROM retained_content k
                     WHERE k.partition = p_partition AND k.seq = ANY(p_seqs) AND NOT (k.seq = ANY(hot));
    END IF;
END;
$$;

-- Idempotency on a segmented log: (app, user, id) is unique forever (SPEC §3), but PostgreSQL has
-- no index across a partitioned table's children that leaves out the partition key, so the keys
-- live here, one compact row per keyed event, kept when their events are dropped. Filled by a
-- statement trigger on `events` (created by `herald_segment_log`), so the writer's COPY and the
-- append functions are unchanged: a stored key raises unique_violation inside the same statement.
CREATE TABLE notification_keys (
    partition       integer NOT NULL,
    app             text    COLLATE "C" NOT NULL,
    notification_id text    COLLATE "C" NOT NULL,
    user_id         text    COLLATE "C" NOT NULL,
    seq             bigint  NOT NULL,
    PRIMARY KEY (partition, app, notification_id, user_id)
) WITH (autovacuum_analyze_threshold = 1000000, autovacuum_vacuum_insert_threshold = 1000000);

CREATE FUNCTION herald_keep_notification_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_keys (partition, app, notification_id, user_id, seq)
    SELECT a.partition, a.app, a.notification_id, a.user_id, a.seq FROM added a
    WHERE a.app IS NOT NULL AND a.notification_id IS NOT NULL AND a.user_id IS NOT NULL;
    RETURN NULL;
END;
$$;

-- Whether the log is segmented (`events` is a partitioned table).
CREATE FUNCTION herald_log_is_segmented() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = 'events'::regclass), false);
$$;

-- Gives a segment (a child of `events` or `deliveries`) what the whole table had: the append-only
-- trigger (statement triggers are not inherited), the per-segment unique and look-up indexes, and
-- the autovacuum settings of 001.
CREATE FUNCTION herald_dress_segment(p_table text, p_segment text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE OR TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change()',
                   p_segment || '_append_only', p_segment);
    EXECUTE format('ALTER TABLE %I SET (autovacuum_analyze_threshold = 1000000, autovacuum_vacuum_insert_threshold = 1000000)', p_segment);
    IF p_table = 'events' THEN
        -- Look-ups by (app, notification_id) in a partition: a withdraw without a user, explain.
        EXECUTE format('CREATE INDEX %I ON %I (partition, app, notification_id, user_id) WHERE notification_id IS NOT NULL',
                       p_segment || '_notification', p_segment);
    ELSE
        -- (user, ordinal) once per segment; restart re-derives only past each user's stored maximum.
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (partition, user_id, user_index)', p_segment || '_user_index', p_segment);
    END IF;
END;
$$;

-- The append function for a segmented log: as 008's, but a stored key is looked for in
-- `notification_keys` too (its event may be archived). A key whose event is gone answers
-- `conflict` with the stored seq: the body it would be compared with is in the archive.
CREATE FUNCTION herald_append_events_with_keys(
    p_partition integer, p_epoch bigint,
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[], p_index integer[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
    fresh_ords bigint[];
    o_ord bigint[];
    o_rn bigint[];
    o_seq bigint[];
    o_outcome text[];
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

    WITH input AS (
        SELECT t.*, (t.app IS NOT NULL AND t.notification_id IS NOT NULL AND t.user_id IS NOT NULL) AS keyed
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord)
    ),
    stored AS (
        SELECT i.ord, k.seq, coalesce(ev.body = i.body, false) AS same
        FROM input i
        JOIN notification_keys k ON k.partition = p_partition AND k.app = i.app AND k.notification_id = i.notification_id
                                AND k.user_id = i.user_id
        LEFT JOIN events ev ON ev.partition = p_partition AND ev.seq = k.seq
        WHERE i.keyed
    ),
    unstored AS (
        SELECT i.*, CASE WHEN i.keyed THEN min(i.ord) OVER (PARTITION BY i.keyed, i.app, i.notification_id, i.user_id) ELSE i.ord END AS first_ord
        FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.ord = i.ord)
    ),
    fresh AS (
        SELECT u.ord, u.body, row_number() OVER (ORDER BY u.ord) AS rn FROM unstored u WHERE u.first_ord = u.ord
    ),
    outcomes AS (
        SELECT f.ord, f.rn, NULL::bigint AS seq, 'appended'::text AS outcome FROM fresh f
        UNION ALL
        SELECT s.ord, NULL, s.seq, CASE WHEN s.same THEN 'duplicate' ELSE 'conflict' END FROM stored s
        UNION ALL
        SELECT u.ord, f.rn, NULL, CASE WHEN u.body = f.body THEN 'duplicate' ELSE 'conflict' END
        FROM unstored u JOIN fresh f ON f.ord = u.first_ord
        WHERE u.first_ord <> u.ord
    )
    SELECT (SELECT array_agg(f.ord ORDER BY f.ord) FROM fresh f),
           array_agg(o.ord ORDER BY o.ord), array_agg(o.rn ORDER BY o.ord), array_agg(o.seq ORDER BY o.ord),
           array_agg(o.outcome ORDER BY o.ord)
    INTO fresh_ords, o_ord, o_rn, o_seq, o_outcome
    FROM outcomes o;

    base := herald_claim_events(p_partition, p_epoch, coalesce(cardinality(fresh_ords), 0));
    INSERT INTO events (partition, seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
    SELECT p_partition, base + f.rn, t.user_id, t.type, t.app, t.notification_id, t.body::json, t.engine_time, t.recipient_index
    FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
         WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord)
    JOIN unnest(fresh_ords) WITH ORDINALITY AS f(ord, rn) ON f.ord = t.ord;

    RETURN QUERY
    SELECT o.ord, coalesce(o.seq, base + o.rn), o.outcome
    FROM unnest(o_ord, o_rn, o_seq, o_outcome) AS o(ord, rn, seq, outcome)
    ORDER BY 1;
END;
$$;

-- Turns `events` and `deliveries` into tables range-partitioned by position (seq, cursor), every
-- row they hold becoming their first segment (`events_s0`, `deliveries_s0`, bounded above by the
-- next position of any partition), followed by an open segment taking every later row. The
-- operator views are created again over the new tables (a view is bound to the table it was
-- created on, which becomes the first segment). Refused under Citus (decision 0042). Returns
-- false when the log was segmented already.
CREATE FUNCTION herald_segment_log() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    views record;
    saved text[] := '{}';
    names text[] := '{}';
    seq_bound bigint;
    cursor_bound bigint;
    i integer;
BEGIN
    IF herald_log_is_segmented() THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'herald: retention segments are not supported on Citus yet'
            USING ERRCODE = 'HE004', HINT = 'See docs/retention.md, "Citus".';
    END IF;
    LOCK TABLE events, deliveries IN ACCESS EXCLUSIVE MODE;
    -- Every view over the log, in creation order, to be created again over the new tables.
    FOR views IN
        SELECT DISTINCT v.oid, v.relname, pg_get_viewdef(v.oid) AS def
        FROM pg_depend d
        JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_class v ON v.oid = r.ev_class
        WHERE d.refobjid IN ('events'::regclass, 'deliveries'::regclass) AND v.relkind = 'v'
        ORDER BY v.oid
    LOOP
        names := names || views.relname::text;
        saved := saved || views.def;
    END LOOP;
    SELECT coalesce(max(seq), 0) + 1 INTO seq_bound FROM partitions;
    SELECT coalesce(max(cursor), 0) + 1 INTO cursor_bound FROM delivery_heads;

    ALTER TABLE events RENAME TO events_s0;
    ALTER TABLE events_s0 RENAME CONSTRAINT events_pkey TO events_s0_pkey;
    ALTER TRIGGER events_append_only ON events_s0 RENAME TO events_s0_append_only;
    CREATE TABLE events (LIKE events_s0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (seq);
    ALTER TABLE events ADD PRIMARY KEY (partition, seq);
    EXECUTE format('ALTER TABLE events ATTACH PARTITION events_s0 FOR VALUES FROM (MINVALUE) TO (%s)', seq_bound);
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%s) TO (MAXVALUE)', 'events_s' || seq_bound, seq_bound);
    PERFORM herald_dress_segment('events', 'events_s' || seq_bound);
    CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();
    INSERT INTO notification_keys (partition, app, notification_id, user_id, seq)
    SELECT partition, app, notification_id, user_id, seq FROM events_s0
    WHERE app IS NOT NULL AND notification_id IS NOT NULL AND user_id IS NOT NULL;
    CREATE TRIGGER events_notification_keys AFTER INSERT ON events REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION herald_keep_notification_keys();

    ALTER TABLE deliveries RENAME TO deliveries_s0;
    ALTER TABLE deliveries_s0 RENAME CONSTRAINT deliveries_pkey TO deliveries_s0_pkey;
    ALTER TRIGGER deliveries_append_only ON deliveries_s0 RENAME TO deliveries_s0_append_only;
    CREATE TABLE deliveries (LIKE deliveries_s0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (cursor);
    ALTER TABLE deliveries ADD PRIMARY KEY (partition, cursor);
    EXECUTE format('ALTER TABLE deliveries ATTACH PARTITION deliveries_s0 FOR VALUES FROM (MINVALUE) TO (%s)', cursor_bound);
    EXECUTE format('CREATE TABLE %I PARTITION OF deliveries FOR VALUES FROM (%s) TO (MAXVALUE)', 'deliveries_s' || cursor_bound, cursor_bound);
    PERFORM herald_dress_segment('deliveries', 'deliveries_s' || cursor_bound);
    CREATE TRIGGER deliveries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON deliveries
        FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();

    FOR i IN 1 .. coalesce(cardinality(names), 0) LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %I AS %s', names[i], saved[i]);
    END LOOP;
    ALTER FUNCTION herald_append_events(integer, bigint, text[], text[], text[], text[], text[], timestamptz[], integer[])
        RENAME TO herald_append_events_whole;
    ALTER FUNCTION herald_append_events_with_keys(integer, bigint, text[], text[], text[], text[], text[], timestamptz[], integer[])
        RENAME TO herald_append_events;
    RETURN true;
END;
$$;

-- The segments of `events` or `deliveries`, in position order: name, first position, the position
-- after the last (NULL: the open segment), and whether its upper bound is fixed.
CREATE FUNCTION herald_segments(p_table text)
RETURNS TABLE (segment text, first_position bigint, end_position bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.relname::text,
           nullif(btrim(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(([^)]*)\)'), ''''), 'MINVALUE')::bigint,
           nullif(btrim(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(([^)]*)\)'), ''''), 'MAXVALUE')::bigint
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = p_table::regclass
    ORDER BY 2 NULLS FIRST;
$$;
