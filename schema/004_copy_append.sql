-- 004: events are appended by COPY, and the log keeps two cheap indexes (measurements and the
-- design in docs/store-performance.md).

-- 1. The idempotency key as one fixed-width value: the first 16 bytes of
--    sha256(user_id || 0x00 || app || 0x00 || notification_id), as a uuid; NULL when any part is
--    NULL (rows without a notification id never collide, as before). NUL cannot occur in a text
--    value, so the separators make the encoding unambiguous. The writer computes the same digest in
--    Swift (`IdempotencyKey`); this function is for every other writer (import, synthetic histories)
--    and for the careful append path. A unique B-tree on 16 bytes costs about half of one on the
--    three text columns (docs/store-performance.md), and two keys that differ get the same digest
--    with probability 2^-128 per pair.
CREATE FUNCTION herald_idempotency_key(p_user text, p_app text, p_id text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT encode(substring(sha256(convert_to(p_user, 'UTF8') || '\x00'::bytea || convert_to(p_app, 'UTF8')
                                   || '\x00'::bytea || convert_to(p_id, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid
$$;

-- The log is append-only: the triggers refuse UPDATE whoever asks, so they are lifted for the
-- one-time fill of the new column, inside this migration's transaction (nobody sees the gap).
ALTER TABLE events ADD COLUMN idempotency_key uuid;
ALTER TABLE events DISABLE TRIGGER events_append_only;
UPDATE events SET idempotency_key = herald_idempotency_key(user_id, app, notification_id)
WHERE notification_id IS NOT NULL;
ALTER TABLE events ENABLE TRIGGER events_append_only;
-- Uniqueness of (user, app, notification id) is now the uniqueness of its digest. The per-user
-- index of 002 goes with it: nothing on the hot path reads one user's events (tools that do,
-- `herald state`/`explain`, scan the log instead; add an index on (user_id, seq) if they matter
-- more than append speed on an installation).
-- Partial: rows without a key (every event but submits) are not in the index at all.
CREATE UNIQUE INDEX events_idempotency_key ON events (idempotency_key) WHERE idempotency_key IS NOT NULL;
DROP INDEX events_user_idempotency;

-- 2. body_hash goes: only the careful append path read it (duplicate vs conflict), and it compares
--    the stored body text itself now (exact, and only when a key is already stored). The writer
--    no longer hashes every body, and each row is 33 bytes shorter.
ALTER TABLE events DROP COLUMN body_hash;

-- 3. committed_at defaults to the statement's start, not clock_timestamp(): COPY inserts rows one
--    at a time (no heap_multi_insert) when a column it fills by default is volatile. Each append
--    is one short statement, so the value still says when the append ran.
ALTER TABLE events ALTER COLUMN committed_at SET DEFAULT statement_timestamp();

-- 4. The careful append path on the new key. The writer's fast path is now COPY (one transaction:
--    UPDATE event_head … RETURNING, COPY the rows at base + ord, COMMIT); when COPY hits a stored
--    key the transaction is rolled back and the batch comes here. The function keeps its own
--    optimistic insert too, for writers configured without COPY. It takes the keys as computed
--    by the writer (p_key, one per row, NULL where the row has none): computing them here with
--    herald_idempotency_key per row is costly (as a CHECK or an expression index it halved the rate
--    of a COPY: docs/store-performance.md).
DROP FUNCTION herald_append_events(text[], text[], text[], text[], text[], timestamptz[]);
CREATE FUNCTION herald_append_events(
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[], p_key uuid[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
BEGIN
    BEGIN
        UPDATE event_head h SET seq = h.seq + n RETURNING h.seq - n INTO base;
        INSERT INTO events (seq, user_id, type, app, notification_id, idempotency_key, body, engine_time)
        SELECT base + t.ord, t.user_id, t.type, t.app, t.notification_id, t.key, t.body::json, t.engine_time
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_key)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, key, ord);
    EXCEPTION WHEN unique_violation THEN
        fast := false;
    END;
    IF fast THEN
        -- One row stands for the whole batch (ord 0): every row was appended at base + ord.
        RETURN QUERY SELECT 0::bigint, base, 'batch'::text;
        RETURN;
    END IF;

    -- Careful path: some key is stored already (or repeats inside the batch: the first one wins).
    RETURN QUERY
    WITH input AS (
        SELECT t.*
        FROM unnest(p_user, p_type, p_app, p_id, p_body, p_time, p_key)
             WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, key, ord)
    ),
    existing AS (
        -- LATERAL … LIMIT 1 keeps this an index probe per row: a hash join would scan the whole log.
        SELECT i.ord, e.seq, e.body::text = i.body AS same
        FROM input i
        CROSS JOIN LATERAL (
            SELECT ev.seq, ev.body FROM events ev WHERE ev.idempotency_key = i.key LIMIT 1
        ) e
        WHERE i.key IS NOT NULL
    ),
    first_in_batch AS (
        -- A key repeated inside the batch: the first row is fresh, the later ones repeat it.
        SELECT i.ord, min(i.ord) OVER (PARTITION BY i.key) AS first_ord
        FROM input i
        WHERE i.key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM existing x WHERE x.ord = i.ord)
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
        INSERT INTO events (seq, user_id, type, app, notification_id, idempotency_key, body, engine_time)
        SELECT head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.key, f.body::json, f.engine_time
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

-- The six-argument form of 002 stays for callers outside the writer (tools, tests, scripts): it
-- computes the keys in SQL and calls the function above.
CREATE FUNCTION herald_append_events(
    p_user text[], p_type text[], p_app text[], p_id text[], p_body text[], p_time timestamptz[])
RETURNS TABLE (r_ord bigint, r_seq bigint, r_outcome text)
LANGUAGE sql AS $$
    SELECT * FROM herald_append_events(p_user, p_type, p_app, p_id, p_body, p_time,
        ARRAY(SELECT herald_idempotency_key(t.u, t.a, t.i)
              FROM unnest(p_user, p_app, p_id) WITH ORDINALITY AS t(u, a, i, o) ORDER BY t.o))
$$;
