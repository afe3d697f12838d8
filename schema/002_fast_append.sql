-- 002: faster event appends (measurements in docs/store-performance.md).

-- 1. One index fewer to maintain on every appended event. The idempotency key's unique index is
-- rebuilt with user_id first and without the partial predicate, so it also serves per-user reads
-- (`WHERE user_id = $1`, that user's rows then sorted by seq), and events_user_seq goes.
-- Uniqueness is unchanged: the same three columns, and NULLs stay distinct, so rows without a
-- notification id (or without a user) never conflict, as before when the predicate left them out.
-- The probe and the insert now descend two random-key B-trees per event instead of three.
CREATE UNIQUE INDEX events_user_idempotency ON events (user_id, app, notification_id);
DROP INDEX events_idempotency;
DROP INDEX events_user_seq;

-- 2. The head rows get statistics now: without them the planner guesses ~2,200 rows for the
-- one-row head table, and the batch statement's estimated cost crossed jit_above_cost.
ANALYZE event_head;
ANALYZE delivery_head;

-- 3. The event append as one function with an optimistic fast path. Almost every batch has no
-- stored key (a duplicate is a client retry), so the fast path inserts every row at base + ord
-- and lets the unique index detect a stored key during the insert it does anyway: one index
-- descent per event instead of a probe and then an insert. If any key exists, the block's
-- subtransaction rolls back the insert and the head bump together (no gap, nothing stored) and
-- the careful path runs: probe every key, report duplicates and conflicts, number only the fresh
-- rows. Either way the head row is bumped in the same transaction, so positions stay gap-free
-- and commit-ordered across writers. Returns (0, base, 'batch') when every row was appended at
-- base + ord (the common case: one result row, not one per event); otherwise (ord, seq, outcome)
-- for every input row, ordered by ord.
CREATE FUNCTION herald_append_events(
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
BEGIN
    BEGIN
        UPDATE event_head h SET seq = h.seq + n RETURNING h.seq - n INTO base;
        INSERT INTO events (seq, user_id, type, app, notification_id, body, body_hash, engine_time)
        SELECT base + t.ord, t.user_id, t.type, t.app, t.notification_id, t.body::json,
               sha256(convert_to(t.body, 'UTF8')), t.engine_time
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        -- One row stands for the whole batch (ord 0): every row was appended at base + ord.
        RETURN QUERY SELECT 0::bigint, base, 'batch'::text;
        RETURN;
    END IF;

    -- Careful path: some key is stored already.
    RETURN QUERY
    WITH input AS (
        SELECT t.*, sha256(convert_to(t.body, 'UTF8')) AS body_hash
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, ord)
    ),
    existing AS (
        -- LATERAL … LIMIT 1 keeps this an index probe per row: a hash join would scan the whole log.
        SELECT i.ord, e.seq, e.body_hash = i.body_hash AS same
        FROM input i
        CROSS JOIN LATERAL (
            SELECT ev.seq, ev.body_hash FROM events ev
            WHERE ev.user_id = i.user_id AND ev.app = i.app AND ev.notification_id = i.notification_id
            LIMIT 1
        ) e
        WHERE i.notification_id IS NOT NULL
    ),
    fresh AS (
        SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
        FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM existing x WHERE x.ord = i.ord)
    ),
    head AS (
        UPDATE event_head h SET seq = h.seq + (SELECT count(*) FROM fresh)
        RETURNING h.seq - (SELECT count(*) FROM fresh) AS base
    ),
    inserted AS (
        INSERT INTO events (seq, user_id, type, app, notification_id, body, body_hash, engine_time)
        SELECT head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.body::json, f.body_hash, f.engine_time
        FROM fresh f, head
        RETURNING seq
    )
    SELECT f.ord, head.base + f.rn, 'appended'::text FROM fresh f, head
    UNION ALL
    SELECT x.ord, x.seq, CASE WHEN x.same THEN 'duplicate' ELSE 'conflict' END FROM existing x
    ORDER BY 1;
END;
$$;

-- 4. The delivery append, with the same optimistic fast path: a delivery whose (user, user_index)
-- is stored already (re-derived after a restart) is rare, and the unique index finds it during
-- the insert. Otherwise the careful path skips stored ones and numbers only the fresh rows.
-- Returns (0, base) when every row was stored at base + ord; otherwise (ord, cursor) of the rows
-- stored, ordered by ord.
CREATE FUNCTION herald_append_deliveries(
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
        UPDATE delivery_head h SET cursor = h.cursor + n RETURNING h.cursor - n INTO base;
        INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                rules_version, trace, body)
        SELECT base + t.ord, t.user_id, t.user_index, t.cause_seq, t.kind, t.app, t.notification_id, t.reason,
               t.at, t.rules_version, t.trace::json, t.body::json
        FROM unnest(p_user, p_user_index, p_cause_seq, p_kind, p_app, p_id, p_reason, p_at, p_rules_version,
                    p_trace, p_body)
             WITH ORDINALITY AS t(user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                  rules_version, trace, body, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        -- One row stands for the whole batch (ord 0): every row was stored at base + ord.
        RETURN QUERY SELECT 0::bigint, base;
        RETURN;
    END IF;

    -- Careful path: some (user, user_index) is stored already.
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
        -- LATERAL … LIMIT 1 keeps this an index probe per row (plpgsql caches a generic plan).
        LEFT JOIN LATERAL (
            SELECT true AS found FROM deliveries d
            WHERE d.user_id = i.user_id AND d.user_index = i.user_index
            LIMIT 1
        ) d ON true
        WHERE d.found IS NULL
    ),
    head AS (
        UPDATE delivery_head h SET cursor = h.cursor + (SELECT count(*) FROM fresh)
        RETURNING h.cursor - (SELECT count(*) FROM fresh) AS base
    ),
    inserted AS (
        INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                rules_version, trace, body)
        SELECT head.base + f.rn, f.user_id, f.user_index, f.cause_seq, f.kind, f.app, f.notification_id, f.reason,
               f.at, f.rules_version, f.trace::json, f.body::json
        FROM fresh f, head
        RETURNING cursor
    )
    SELECT f.ord, head.base + f.rn FROM fresh f, head ORDER BY 1;
END;
$$;
