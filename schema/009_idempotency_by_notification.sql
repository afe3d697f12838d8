-- 009: the idempotency index is (app, notification_id, user_id) again, and it serves the look-ups
-- by notification (measurements in docs/store-performance.md, session 8).
--
-- Why: a withdraw that names no user finds the recipients with `WHERE app = $1 AND
-- notification_id = $2`, and so does `herald explain`. Since 004 no index served that: each such
-- withdraw read the whole log on the service's one reader connection (3.0 s on a 6M-event log,
-- with consumers' catch-up queued behind it). A unique index whose leading columns are (app,
-- notification_id) answers it, and the digest index of 004 is no longer needed for uniqueness.
-- Measured on 100k stored submits (COPY, three interleaved rounds): pkey + unique uuid digest
-- 1.11–1.31 s; pkey + unique (app, notification_id, user_id) 1.13–1.43 s; the digest plus a
-- second index on (app, notification_id) 1.79–1.88 s. The writer no longer hashes every submit
-- (SHA-256, ~4,500 instructions on the service's thread), and each row is 16 bytes shorter.
--
-- Same rule as before: (user, app, id) is unique forever; rows without a notification id are not
-- in the index; a NULL user or app never collides (NULLs are distinct), as a NULL digest did not.
-- On an existing log the index is built once, under this migration's lock (about a minute for
-- ten million events).
CREATE UNIQUE INDEX events_notification ON events (app, notification_id, user_id)
    WHERE notification_id IS NOT NULL;
DROP INDEX events_idempotency_key;
ALTER TABLE events DROP COLUMN idempotency_key;

DROP FUNCTION herald_append_events(text[], text[], text[], text[], text[], timestamptz[]);
DROP FUNCTION herald_append_events(text[], text[], text[], text[], text[], timestamptz[], uuid[]);
DROP FUNCTION herald_idempotency_key(text, text, text);

-- The careful append path (the writer's COPY falls back to it when a key is stored already, and
-- writers without COPY use it directly). As in 004, with the key as its three columns.
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
        INSERT INTO events (seq, user_id, type, app, notification_id, body, engine_time)
        SELECT base + t.ord, t.user_id, t.type, t.app, t.notification_id, t.body::json, t.engine_time
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

    -- Careful path: some key is stored already (or repeats inside the batch: the first one wins).
    -- A row has a key when its user, app and notification id are all present.
    RETURN QUERY
    WITH input AS (
        SELECT t.*, (t.user_id IS NOT NULL AND t.app IS NOT NULL AND t.notification_id IS NOT NULL) AS keyed
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, ord)
    ),
    existing AS (
        -- LATERAL … LIMIT 1 keeps this an index probe per row: a hash join would scan the whole log.
        SELECT i.ord, e.seq, e.body::text = i.body AS same
        FROM input i
        CROSS JOIN LATERAL (
            SELECT ev.seq, ev.body FROM events ev
            WHERE ev.app = i.app AND ev.notification_id = i.notification_id AND ev.user_id = i.user_id
            LIMIT 1
        ) e
        WHERE i.keyed
    ),
    first_in_batch AS (
        -- A key repeated inside the batch: the first row is fresh, the later ones repeat it.
        SELECT i.ord, min(i.ord) OVER (PARTITION BY i.app, i.notification_id, i.user_id) AS first_ord
        FROM input i
        WHERE i.keyed AND NOT EXISTS (SELECT 1 FROM existing x WHERE x.ord = i.ord)
    ),
    fresh AS (
        SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
        FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM existing x WHERE x.ord = i.ord)
          AND NOT EXISTS (SELECT 1 FROM first_in_batch f WHERE f.ord = i.ord AND f.first_ord <> i.ord)
    ),
    head AS (
        UPDATE event_head h SET seq = h.seq + (SELECT count(*) FROM fresh)
        RETURNING h.seq - (SELECT count(*) FROM fresh) AS base
    ),
    inserted AS (
        INSERT INTO events (seq, user_id, type, app, notification_id, body, engine_time)
        SELECT head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.body::json, f.engine_time
        FROM fresh f, head
        RETURNING seq
    )
    SELECT f.ord, head.base + f.rn, 'appended'::text FROM fresh f, head
    UNION ALL
    SELECT x.ord, x.seq, CASE WHEN x.same THEN 'duplicate' ELSE 'conflict' END FROM existing x
    UNION ALL
    SELECT r.ord, head.base + f.rn,
           CASE WHEN f.body = (SELECT i.body FROM input i WHERE i.ord = r.ord) THEN 'duplicate' ELSE 'conflict' END
    FROM first_in_batch r JOIN fresh f ON f.ord = r.first_ord, head
    WHERE r.first_ord <> r.ord
    ORDER BY 1;
END;
$$;
