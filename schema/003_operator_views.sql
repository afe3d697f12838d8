-- 003: views for operators who query PostgreSQL directly. They read the append-only log;
-- nothing here is written by Herald. What needs the engine's calendars (when a scheduled
-- Focus is active, the next summary instant of a user with nothing queued) is answered by
-- `herald state` / `herald pending` instead.

-- The latest value of every per-app and global setting a user chose (SPEC §5 `settings`).
CREATE VIEW herald_settings_current AS
SELECT DISTINCT ON (e.user_id, coalesce(e.body->>'app', ''), kv.key)
       e.user_id, e.body->>'app' AS app, kv.key AS setting, kv.value::jsonb AS value,
       e.seq, e.engine_time AS set_at
FROM events e, json_each(e.body) kv
WHERE e.type = 'settings' AND kv.key NOT IN ('user', 'app')
ORDER BY e.user_id, coalesce(e.body->>'app', ''), kv.key, e.seq DESC;

-- The latest authorization of each app for each user.
CREATE VIEW herald_authorizations_current AS
SELECT DISTINCT ON (e.user_id, e.body->>'app')
       e.user_id, e.body->>'app' AS app,
       CASE e.type WHEN 'provisionalTurnOff' THEN 'denied' ELSE coalesce(e.body->>'status', 'provisional') END AS status,
       e.body->'options' AS options, e.type AS decided_by, e.seq, e.engine_time AS decided_at
FROM events e
WHERE e.type IN ('authorization', 'provisionalTurnOff')
ORDER BY e.user_id, e.body->>'app', e.seq DESC;

-- Notifications queued for a Scheduled Summary that has not fired yet (nor expired, withdrawn or replaced them).
CREATE VIEW herald_pending_summary_items AS
SELECT q.user_id, q.app, q.notification_id, q.at AS queued_at,
       (q.body->>'summaryAt')::timestamptz AS summary_at, q.cursor
FROM deliveries q
WHERE q.kind = 'queued'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.user_id = q.user_id AND s.cursor > q.cursor
        AND ((s.kind = 'summary'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', q.notification_id, 'app', q.app)))
          OR (s.kind IN ('expired', 'withdrawn', 'replaced') AND s.app = q.app AND s.notification_id = q.notification_id)));

-- Notifications held by a Focus that has not ended yet (no focusDigest listed them).
CREATE VIEW herald_held_notifications AS
SELECT h.user_id, h.app, h.notification_id, h.body->>'focus' AS focus, h.at AS held_at, h.cursor
FROM deliveries h
WHERE h.kind = 'held'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.user_id = h.user_id AND s.cursor > h.cursor
        AND ((s.kind = 'focusDigest'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', h.notification_id, 'app', h.app)))
          OR (s.kind IN ('expired', 'withdrawn', 'replaced') AND s.app = h.app AND s.notification_id = h.notification_id)));

-- Focus switched on by hand and not off since (scheduled windows: `herald state`).
CREATE VIEW herald_manual_focus_on AS
SELECT user_id, focus, since, until FROM (
    SELECT DISTINCT ON (e.user_id, e.body->>'focus')
           e.user_id, e.body->>'focus' AS focus, e.type, e.engine_time AS since,
           (e.body->>'until')::timestamptz AS until
    FROM events e WHERE e.type IN ('focusOn', 'focusOff')
    ORDER BY e.user_id, e.body->>'focus', e.seq DESC
) last
WHERE type = 'focusOn';

-- Deliveries per app, kind and reason, per hour of engine time.
CREATE VIEW herald_deliveries_hourly AS
SELECT date_trunc('hour', at) AS hour, app, kind, reason, count(*) AS deliveries
FROM deliveries
GROUP BY 1, 2, 3, 4;

-- Why notifications were suppressed, per day.
CREATE VIEW herald_suppressions_daily AS
SELECT date_trunc('day', at) AS day, app, reason, count(*) AS suppressed
FROM deliveries
WHERE kind = 'suppressed'
GROUP BY 1, 2, 3;

-- How far each durable consumer is behind the newest committed delivery.
CREATE VIEW herald_consumer_lag AS
SELECT c.name AS consumer, c.acked, h.cursor AS head, h.cursor - c.acked AS lag, c.updated_at AS acked_at
FROM consumers c CROSS JOIN delivery_head h;
