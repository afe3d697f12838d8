-- The append functions: the SQL way to add rows to the log. Herald's writer appends by COPY
-- (one transaction: UPDATE the head … RETURNING the base position, COPY the rows at base + ord,
-- COMMIT) and comes here only when COPY hits a key that is stored already; writers configured
-- without COPY, `herald import`, synthetic histories and tools call these directly. Both take one
-- array per column (row i of the batch is element i of each) and bump the head row in the same
-- transaction as the insert, so positions stay gap-free and commit-ordered across writers. They
-- cast bodies and traces with ::json, so what they store is valid JSON.
--
-- Both have an optimistic fast path: almost every batch carries no key that is stored already (a
-- duplicate is a client's retry), so they insert every row at base + ord and let the unique index
-- detect a stored key during the insert they make anyway: one index descent a row, not a probe and
-- then an insert. If a key is stored, the block's subtransaction rolls back the insert and the head
-- bump together (no gap, nothing stored) and the careful path runs: probe the keys, answer the
-- stored ones, number only the fresh rows.

-- Appends events. `p_index` is each row's recipient_index: rows of one request are contiguous and
-- numbered 0 … n-1 (a fan-out), 0 for a single-user submit and for every other event. Outcomes are
-- per row but decided per request: a request whose (app, id) is stored, or used by an earlier
-- request of the same batch (the first one wins), stores none of its rows; it is a `duplicate`
-- when it repeats that request row for row (same users in the same order, same bodies), else a
-- `conflict` (SPEC §3). Returns (0, base, 'batch') when every row was appended at base + ord (the
-- common case: one result row, not one per event); otherwise (ord, seq, outcome) for every input
-- row, ordered by ord: `appended` with its new seq, `duplicate` with its original's seq, or
-- `conflict` with the seq of the first row of the request it collides with.
CREATE FUNCTION herald_append_events(
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[], p_index integer[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
BEGIN
    BEGIN
        UPDATE event_head h SET seq = h.seq + n RETURNING h.seq - n INTO base;
        INSERT INTO events (seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
        SELECT base + t.ord, t.user_id, t.type, t.app, t.notification_id, t.body::json, t.engine_time, t.recipient_index
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        -- One row stands for the whole batch (ord 0): every row was appended at base + ord.
        RETURN QUERY SELECT 0::bigint, base, 'batch'::text;
        RETURN;
    END IF;

    -- Careful path: some (app, id) is stored already, or used twice in the batch (the first
    -- request wins). A row has a key when its app and notification id are present.
    RETURN QUERY
    WITH input AS (
        SELECT t.*, (t.app IS NOT NULL AND t.notification_id IS NOT NULL) AS keyed
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_index)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, recipient_index, ord)
    ),
    member AS (
        -- Each keyed row's request: the nearest row at or before it with the same key and index 0
        -- (itself when there is none: a row handed over without its request's first one).
        SELECT i.*, CASE WHEN i.keyed THEN coalesce(
                   max(i.ord) FILTER (WHERE i.recipient_index = 0) OVER (PARTITION BY i.app, i.notification_id ORDER BY i.ord),
                   i.ord) END AS request
        FROM input i
    ),
    requests AS (
        SELECT r.request, min(r.app) AS app, min(r.notification_id) AS notification_id, count(*) AS n
        FROM member r WHERE r.keyed GROUP BY r.request
    ),
    stored AS (
        -- Requests whose (app, id) is in the log: how many rows it has there, and the first one.
        -- LATERAL keeps this an index range scan per request (a hash join would read the log).
        SELECT q.request, s.n AS stored_n, s.first_seq
        FROM requests q
        CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(ev.seq) AS first_seq FROM events ev
            WHERE ev.app = q.app AND ev.notification_id = q.notification_id
        ) s
        WHERE s.n > 0
    ),
    stored_rows AS (
        SELECT r.ord, r.request, e.seq, coalesce(e.body::text = r.body, false) AS same
        FROM member r
        JOIN stored s ON s.request = r.request
        LEFT JOIN LATERAL (
            SELECT ev.seq, ev.body FROM events ev
            WHERE ev.app = r.app AND ev.notification_id = r.notification_id AND ev.recipient_index = r.recipient_index
            LIMIT 1
        ) e ON true
        WHERE r.keyed
    ),
    stored_verdict AS (
        -- A duplicate repeats the stored request row for row; anything else is a conflict.
        SELECT s.request, s.first_seq, bool_and(x.same) AND count(*) = s.stored_n AS duplicate
        FROM stored s JOIN stored_rows x ON x.request = s.request
        GROUP BY s.request, s.first_seq, s.stored_n
    ),
    unstored AS (
        SELECT q.*, min(q.request) OVER (PARTITION BY q.app, q.notification_id) AS first_request
        FROM requests q
        WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.request = q.request)
    ),
    fresh AS (
        SELECT r.*, row_number() OVER (ORDER BY r.ord) AS rn
        FROM member r
        WHERE NOT r.keyed
           OR EXISTS (SELECT 1 FROM unstored u WHERE u.request = r.request AND u.first_request = u.request)
    ),
    repeated_rows AS (
        -- Rows of a request that uses the (app, id) of an earlier request in this batch.
        SELECT r.ord, u.request, u.first_request, f.ord AS first_ord, coalesce(f.body = r.body, false) AS same
        FROM member r
        JOIN unstored u ON u.request = r.request AND u.first_request <> u.request
        LEFT JOIN member f ON f.request = u.first_request AND f.recipient_index = r.recipient_index AND f.keyed
    ),
    repeated_verdict AS (
        SELECT x.request, bool_and(x.same) AND count(*) = min(q.n) AS duplicate
        FROM repeated_rows x JOIN requests q ON q.request = x.first_request
        GROUP BY x.request
    ),
    head AS (
        UPDATE event_head h SET seq = h.seq + (SELECT count(*) FROM fresh)
        RETURNING h.seq - (SELECT count(*) FROM fresh) AS base
    ),
    inserted AS (
        INSERT INTO events (seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
        SELECT head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.body::json, f.engine_time, f.recipient_index
        FROM fresh f, head
        RETURNING seq
    )
    SELECT f.ord, head.base + f.rn, 'appended'::text FROM fresh f, head
    UNION ALL
    -- A duplicate row answers with its own original's seq; a conflict with the request's first.
    SELECT x.ord, CASE WHEN v.duplicate THEN x.seq ELSE v.first_seq END,
           CASE WHEN v.duplicate THEN 'duplicate' ELSE 'conflict' END
    FROM stored_rows x JOIN stored_verdict v ON v.request = x.request
    UNION ALL
    SELECT x.ord, head.base + f.rn, CASE WHEN v.duplicate THEN 'duplicate' ELSE 'conflict' END
    FROM repeated_rows x
    JOIN repeated_verdict v ON v.request = x.request
    JOIN fresh f ON f.ord = CASE WHEN v.duplicate THEN x.first_ord ELSE x.first_request END,
    head
    ORDER BY 1;
END;
$$;

-- Appends deliveries. A delivery whose (user_id, user_index) is stored already (re-derived after
-- a restart) is skipped. Returns (0, base) when every row was stored at base + ord; otherwise
-- (ord, cursor) of the rows stored, ordered by ord.
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
