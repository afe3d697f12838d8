-- Statements that stay inside one partition, so that the same schema runs on one PostgreSQL and
-- on Citus (SPEC §9; docs/decisions/0039-citus-distribution.md), where each partition's rows are
-- one shard and a statement that cannot be confined to one shard is refused or planned in costly
-- steps. Nothing changes on one PostgreSQL: every view returns the rows it returned, every append
-- function the outcomes, positions and rows it stored. Costs nothing (no table is touched).
--
-- The views: those that correlate one user's rows with the same user's other rows (a later
-- delivery, an earlier withdraw, a later summarySchedule) also match on `partition`. Citus joins
-- distributed tables only on their distribution column; a user's rows are all in the user's
-- partition, and rows without a user (global events) match no user, so the rows are the same.

CREATE OR REPLACE VIEW herald_pending_deferred AS
SELECT e.user_id, e.app, e.notification_id, (e.body::json->>'deliverAt')::timestamptz AS deliver_at, e.seq,
       EXISTS (SELECT 1 FROM events w
               WHERE w.partition = e.partition
                 AND w.type = 'withdraw' AND w.user_id = e.user_id AND w.seq < e.seq
                 AND w.body::json->>'app' = e.app AND w.body::json->>'id' = e.notification_id) AS withdrawn_before_submit
FROM events e
WHERE e.type = 'submit'
  AND e.body LIKE '%"deliverAt"%'  -- a cheap filter before parsing every submit's body
  AND (e.body::json->>'deliverAt')::timestamptz > e.engine_time
  AND NOT EXISTS (
      SELECT 1 FROM deliveries d
      WHERE d.partition = e.partition
        AND d.user_id = e.user_id AND d.app = e.app AND d.notification_id = e.notification_id);

CREATE OR REPLACE VIEW herald_pending_summary_items AS
WITH pending AS (
    SELECT q.partition, q.user_id, q.app, q.notification_id, q.at AS queued_at, q.cause_seq, q.cursor,
           (q.body::json->>'summaryAt')::timestamptz AS summary_at_when_queued
    FROM deliveries q
    WHERE q.kind = 'queued'
      AND NOT EXISTS (
          SELECT 1 FROM deliveries s
          WHERE s.partition = q.partition AND s.user_id = q.user_id AND s.cursor > q.cursor
            AND ((s.kind = 'summary'
                  AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', q.notification_id, 'app', q.app)))
              OR (s.app = q.app AND s.notification_id = q.notification_id)))
), latest AS (
    SELECT DISTINCT ON (partition, user_id) partition, user_id, queued_at, cause_seq, summary_at_when_queued
    FROM pending
    ORDER BY partition, user_id, cursor DESC
), per_user AS (
    SELECT l.partition, l.user_id, l.summary_at_when_queued, max(s.seq) AS schedule_changed_seq
    FROM latest l
    LEFT JOIN events s ON s.partition = l.partition AND s.type = 'summarySchedule' AND s.user_id = l.user_id
                      AND s.seq > l.cause_seq AND s.engine_time >= l.queued_at
    GROUP BY l.partition, l.user_id, l.summary_at_when_queued
)
SELECT p.user_id, p.app, p.notification_id, p.queued_at,
       CASE WHEN u.schedule_changed_seq IS NULL THEN u.summary_at_when_queued END AS summary_at,
       p.summary_at_when_queued, u.schedule_changed_seq, p.cursor
FROM pending p
JOIN per_user u ON u.partition = p.partition AND u.user_id = p.user_id;

CREATE OR REPLACE VIEW herald_held_notifications AS
SELECT h.user_id, h.app, h.notification_id, h.body::json->>'focus' AS focus, h.at AS held_at, h.cursor
FROM deliveries h
WHERE h.kind = 'held'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.partition = h.partition AND s.user_id = h.user_id AND s.cursor > h.cursor
        AND ((s.kind = 'focusDigest'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', h.notification_id, 'app', h.app)))
          OR (s.app = h.app AND s.notification_id = h.notification_id)));

-- The append functions' careful path (a batch that met a stored key): one read-only query decides
-- every row's outcome into arrays, then the positions are claimed and the fresh rows inserted from
-- the arrays, as the fast path does. 004's single statement did it all in data-modifying CTEs,
-- which Citus cannot confine to the partition's shard: it ran them in steps, sending intermediate
-- results to every node in a two-phase commit (~1 s a batch on loopback). Outcomes as in 004: for
-- events (0, base, 'batch') on the fast path, else (ord, seq, outcome) per input row by ord; a
-- stored key answers its stored seq (`duplicate` when the body is the stored one, else
-- `conflict`); a key used twice in the batch stores its first row, the later ones answer its seq.
CREATE OR REPLACE FUNCTION herald_append_events(
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

-- Deliveries: (0, base) on the fast path, else (ord, cursor) of the rows stored; a delivery whose
-- (user_id, user_index) is stored is skipped.
CREATE OR REPLACE FUNCTION herald_append_deliveries(
    p_partition integer, p_epoch bigint,
    p_user text[], p_user_index bigint[], p_cause_seq bigint[], p_kind text[], p_app text[], p_id text[],
    p_reason text[], p_at timestamptz[], p_rules_version text[], p_trace text[], p_body text[])
RETURNS TABLE (r_ord bigint, r_cursor bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint := coalesce(cardinality(p_body), 0);
    base bigint;
    fast boolean := true;
    fresh_ords bigint[];
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

    SELECT array_agg(i.ord ORDER BY i.ord) INTO fresh_ords
    FROM unnest(p_user, p_user_index) WITH ORDINALITY AS i(user_id, user_index, ord)
    WHERE NOT EXISTS (
        SELECT 1 FROM deliveries d
        WHERE d.partition = p_partition AND d.user_id = i.user_id AND d.user_index = i.user_index);

    base := herald_claim_deliveries(p_partition, p_epoch, coalesce(cardinality(fresh_ords), 0));
    INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                            rules_version, trace, body)
    SELECT p_partition, base + f.rn, t.user_id, t.user_index, t.cause_seq, t.kind, t.app, t.notification_id, t.reason,
           t.at, t.rules_version, t.trace::json, t.body::json
    FROM unnest(p_user, p_user_index, p_cause_seq, p_kind, p_app, p_id, p_reason, p_at, p_rules_version,
                p_trace, p_body)
         WITH ORDINALITY AS t(user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                              rules_version, trace, body, ord)
    JOIN unnest(fresh_ords) WITH ORDINALITY AS f(ord, rn) ON f.ord = t.ord;

    RETURN QUERY SELECT f.ord, base + f.rn FROM unnest(fresh_ords) WITH ORDINALITY AS f(ord, rn) ORDER BY 1;
END;
$$;
