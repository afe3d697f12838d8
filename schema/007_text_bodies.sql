-- 007: event bodies, delivery bodies and rule traces are stored as `text` holding the canonical
-- JSON bytes Herald wrote (measurements in docs/store-performance.md, session 5).
--
-- Why: the writer produces these bytes with its own canonical encoder, after its strict parser
-- accepted the request; replay compares them byte for byte. The `json` type's only effect on
-- storage was to parse every value again on the server (~5 µs of the single writer backend per
-- summary row, 1.2 KB bodies) — the storm's bound. `text` keeps the same bytes (json keeps its
-- input text exactly too, so nothing changes for readers: the text and binary forms of both types
-- are the UTF-8 bytes, and every row stored before reads back identically).
--
-- What still validates: every SQL path other writers use. `herald_append_events` and
-- `herald_append_deliveries` cast their input with `::json` before storing it (as before; the
-- assignment to the text column then stores json's text, i.e. the same bytes), and so do `herald
-- import` and the synthetic history's event insert. A hand-written INSERT of invalid JSON into the
-- tables themselves is no longer refused: a CHECK (body::json IS NOT NULL) would refuse it, but it
-- runs on Herald's own COPY too and costs what this migration saves (measured: session 5). Operators
-- query bodies through the views below (which expose json, as before) or with `body::json ->> 'x'`.
--
-- The ALTERs rewrite both tables under an exclusive lock (json → text is an I/O conversion, not
-- binary-coercible for PostgreSQL): minutes on a log of millions of rows, run once at upgrade.

-- Views that read these columns must go while their type changes; they come back below,
-- identical in output (each body cast to json where the view reads into it).
DROP VIEW herald_settings_current, herald_authorizations_current, herald_pending_summary_items,
          herald_held_notifications, herald_manual_focus_on;

ALTER TABLE events ALTER COLUMN body TYPE text;
ALTER TABLE deliveries ALTER COLUMN body TYPE text, ALTER COLUMN trace TYPE text;

-- As in 003, with body::json.
CREATE VIEW herald_settings_current AS
SELECT DISTINCT ON (e.user_id, coalesce(e.body::json->>'app', ''), kv.key)
       e.user_id, e.body::json->>'app' AS app, kv.key AS setting, kv.value::jsonb AS value,
       e.seq, e.engine_time AS set_at
FROM events e, json_each(e.body::json) kv
WHERE e.type = 'settings' AND kv.key NOT IN ('user', 'app')
ORDER BY e.user_id, coalesce(e.body::json->>'app', ''), kv.key, e.seq DESC;

CREATE VIEW herald_authorizations_current AS
SELECT DISTINCT ON (e.user_id, e.body::json->>'app')
       e.user_id, e.body::json->>'app' AS app,
       CASE e.type WHEN 'provisionalTurnOff' THEN 'denied' ELSE coalesce(e.body::json->>'status', 'provisional') END AS status,
       e.body::json->'options' AS options, e.type AS decided_by, e.seq, e.engine_time AS decided_at
FROM events e
WHERE e.type IN ('authorization', 'provisionalTurnOff')
ORDER BY e.user_id, e.body::json->>'app', e.seq DESC;

CREATE VIEW herald_pending_summary_items AS
SELECT q.user_id, q.app, q.notification_id, q.at AS queued_at,
       (q.body::json->>'summaryAt')::timestamptz AS summary_at, q.cursor
FROM deliveries q
WHERE q.kind = 'queued'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.user_id = q.user_id AND s.cursor > q.cursor
        AND ((s.kind = 'summary'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', q.notification_id, 'app', q.app)))
          OR (s.kind IN ('expired', 'withdrawn', 'replaced') AND s.app = q.app AND s.notification_id = q.notification_id)));

CREATE VIEW herald_held_notifications AS
SELECT h.user_id, h.app, h.notification_id, h.body::json->>'focus' AS focus, h.at AS held_at, h.cursor
FROM deliveries h
WHERE h.kind = 'held'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.user_id = h.user_id AND s.cursor > h.cursor
        AND ((s.kind = 'focusDigest'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', h.notification_id, 'app', h.app)))
          OR (s.kind IN ('expired', 'withdrawn', 'replaced') AND s.app = h.app AND s.notification_id = h.notification_id)));

CREATE VIEW herald_manual_focus_on AS
SELECT user_id, focus, since, until FROM (
    SELECT DISTINCT ON (e.user_id, e.body::json->>'focus')
           e.user_id, e.body::json->>'focus' AS focus, e.type, e.engine_time AS since,
           (e.body::json->>'until')::timestamptz AS until
    FROM events e WHERE e.type IN ('focusOn', 'focusOff')
    ORDER BY e.user_id, e.body::json->>'focus', e.seq DESC
) last
WHERE type = 'focusOn';
