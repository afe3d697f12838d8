-- 017: a notification id is unique per app forever, whoever the recipients (SPEC §3:
-- "(A, notification id) is unique forever"). Until 016 the key was (app, notification_id,
-- user_id): the same id submitted later for another user was stored and delivered.
--
-- How: a submit's rows carry `recipient_index`, the row's place among the recipients of its
-- request (0 for a single-user submit; 0 … n-1 for a fan-out, whose rows are appended together in
-- one transaction). The unique index is (app, notification_id, recipient_index): a later request
-- with a used (app, id) collides on its first row (index 0) whatever its users, and the careful
-- append path then answers the whole request — a duplicate when it repeats the stored one row for
-- row (same users in the same order, same bodies), a conflict otherwise. One unique index per
-- row as before, on a shorter key (an integer where the user's text was): the COPY fast path is
-- unchanged. Its leading columns still serve the look-ups by (app, notification_id) (a withdraw
-- without a user, `herald explain`).
--
-- Rows without a notification id (every event but submits) have index 0 and are not in the index.
-- A log written before this migration may hold one (app, id) for several requests (another user
-- each): its rows are numbered in seq order, so the index builds, and a re-send of any of them is
-- answered as a conflict (it no longer matches the id's rows one for one). On a large log the fill
-- and the index take about as long as 009's (a minute for ten million events), under this
-- migration's lock.
ALTER TABLE events ADD COLUMN recipient_index integer NOT NULL DEFAULT 0;

-- The log is append-only: the triggers are lifted for the one-time fill, inside this migration's
-- transaction (as in 004). Only ids used by more than one row change.
ALTER TABLE events DISABLE TRIGGER events_append_only;
UPDATE events e SET recipient_index = n.k
FROM (SELECT seq, row_number() OVER (PARTITION BY app, notification_id ORDER BY seq) - 1 AS k
      FROM events WHERE notification_id IS NOT NULL) n
WHERE e.seq = n.seq AND n.k > 0;
ALTER TABLE events ENABLE TRIGGER events_append_only;

CREATE UNIQUE INDEX events_notification_once ON events (app, notification_id, recipient_index)
    WHERE notification_id IS NOT NULL;
DROP INDEX events_notification;

COMMENT ON COLUMN events.recipient_index IS
    'Place of the row among its submit''s recipients (0 … n-1 for a fan-out; 0 otherwise); (app, notification_id, recipient_index) is unique (schema/017)';

DROP FUNCTION herald_append_events(text[], text[], text[], text[], text[], timestamptz[]);

-- The careful append path (the writer's COPY falls back to it when a key is stored already, and
-- writers without COPY use it directly). Rows of one request are contiguous and numbered 0 … n-1
-- in `p_index`; outcomes are per row, but decided per request: a request whose (app, id) is
-- stored (or used by an earlier request of the same batch) stores none of its rows.
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
