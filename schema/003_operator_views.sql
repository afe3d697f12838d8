-- Views for operators who query PostgreSQL directly (psql, or any client). They read the
-- append-only log; Herald itself reads none of them. The engine's fold is the authority: `herald
-- state <user>` and `herald pending` answer from it, and these views read the same log and must
-- not contradict them (tests: OperatorViewsFoldTests). What needs the engine's calendars (when a
-- scheduled Focus is active, the next summary instant after a schedule change) is answered by
-- those commands only; each view's comment says its limits.
--
-- "Now" for these views is the log's clock, herald_log_time, never now(): a manual clock is far
-- from the wall clock, and the engine judges by the times it stored.
--
-- Cost: the views scan `events` (no index on type) and parse the bodies they read; meant for
-- operators' questions, not for a hot path.

-- ---------------------------------------------------------------------------------------------
-- The log's clock
-- ---------------------------------------------------------------------------------------------

-- The latest engine time it records (an event's, or a stored decision's: a timer
-- fires only once engine time reached it). With the system clock, time that passed with nothing
-- stored is not seen here: until something is stored, the log says time stands at its last record.
CREATE VIEW herald_log_time AS
SELECT greatest((SELECT max(engine_time) FROM events), (SELECT max(at) FROM deliveries)) AS latest_engine_time;
COMMENT ON VIEW herald_log_time IS
    'The log''s latest engine time (events and deliveries): the "now" the other views judge by';

-- ---------------------------------------------------------------------------------------------
-- State (what `herald state <user>` shows)
-- ---------------------------------------------------------------------------------------------

-- A user's current settings: the latest value of each per-app setting (alert, sound, badge,
-- lockScreen, notificationCenter, timeSensitive, marketingConsent, delivery) and each global one
-- (allowNotifications, showPreviews, attentionBudget), by the fold's rules: a `settings` event sets
-- what it names; an `authorization` with status authorized or provisional sets alert, sound and
-- badge exactly as its options list them (denied / notDetermined leave them); `provisionalKeep`
-- sets delivery (summary, or immediate). `set_by` is the event type that set the value.
-- Limits: a setting never set is absent (its default is SPEC §3's: `herald state` shows every one);
-- keys the fold ignores are not listed.
CREATE VIEW herald_settings_current AS
WITH changes AS (
    SELECT e.user_id, j.b->>'app' AS app, kv.key AS setting, kv.value::jsonb AS value, e.seq, e.engine_time, e.type
    FROM events e
    CROSS JOIN LATERAL (SELECT e.body::json AS b) j
    CROSS JOIN LATERAL json_each(j.b) kv
    WHERE e.type = 'settings'
      AND CASE WHEN j.b->>'app' IS NULL
               THEN kv.key IN ('allowNotifications', 'showPreviews', 'attentionBudget')
               ELSE kv.key IN ('alert', 'sound', 'badge', 'lockScreen', 'notificationCenter', 'timeSensitive',
                               'marketingConsent', 'delivery') END
    UNION ALL
    SELECT e.user_id, j.b->>'app', o.setting, to_jsonb(coalesce(j.b->'options', '[]')::jsonb ? o.setting),
           e.seq, e.engine_time, e.type
    FROM events e
    CROSS JOIN LATERAL (SELECT e.body::json AS b) j
    CROSS JOIN (VALUES ('alert'), ('sound'), ('badge')) o(setting)
    WHERE e.type = 'authorization' AND j.b->>'status' IN ('authorized', 'provisional')
    UNION ALL
    SELECT e.user_id, j.b->>'app', 'delivery',
           to_jsonb(CASE WHEN j.b->>'delivery' = 'summary' THEN 'summary' ELSE 'immediate' END),
           e.seq, e.engine_time, e.type
    FROM events e
    CROSS JOIN LATERAL (SELECT e.body::json AS b) j
    WHERE e.type = 'provisionalKeep'
)
SELECT DISTINCT ON (user_id, coalesce(app, ''), setting)
       user_id, app, setting, value, seq, engine_time AS set_at, type AS set_by
FROM changes
ORDER BY user_id, coalesce(app, ''), setting, seq DESC;
COMMENT ON VIEW herald_settings_current IS
    'Latest value of each setting a user''s events set, by the fold''s rules (settings, authorization, provisionalKeep); unset = SPEC §3 default';

-- The current authorization of each app a user's events named: the latest `authorization`
-- (its status) or `provisionalTurnOff` (denied), except that a provisional app becomes
-- `authorized` at the first later per-app `settings` event naming a presentation field (alert,
-- sound, badge, lockScreen, notificationCenter, delivery: "until settings change",
-- docs/engine.md); then `decided_by` is `settings` and `seq` / `decided_at` are that event's.
-- `options` are the latest authorization's (a turn-off keeps them, as the fold does).
-- Limits: an app with none of these events is `notDetermined` and absent here.
CREATE VIEW herald_authorizations_current AS
WITH decided AS (
    SELECT DISTINCT ON (e.user_id, e.body::json->>'app')
           e.user_id, e.body::json->>'app' AS app, e.type, e.seq, e.engine_time,
           CASE e.type WHEN 'provisionalTurnOff' THEN 'denied' ELSE e.body::json->>'status' END AS status
    FROM events e
    WHERE e.type IN ('authorization', 'provisionalTurnOff')
    ORDER BY e.user_id, e.body::json->>'app', e.seq DESC
), options AS (
    SELECT DISTINCT ON (e.user_id, e.body::json->>'app')
           e.user_id, e.body::json->>'app' AS app, e.body::json->'options' AS options
    FROM events e
    WHERE e.type = 'authorization'
    ORDER BY e.user_id, e.body::json->>'app', e.seq DESC
), presentation AS (
    SELECT e.user_id, e.body::json->>'app' AS app, e.seq, e.engine_time
    FROM events e
    WHERE e.type = 'settings'
      AND e.body::jsonb ?| ARRAY['alert', 'sound', 'badge', 'lockScreen', 'notificationCenter', 'delivery']
      AND e.body::json->>'app' IS NOT NULL
)
SELECT DISTINCT ON (d.user_id, d.app)
       d.user_id, d.app,
       CASE WHEN p.seq IS NOT NULL THEN 'authorized' ELSE d.status END AS status,
       o.options,
       CASE WHEN p.seq IS NOT NULL THEN 'settings' ELSE d.type END AS decided_by,
       coalesce(p.seq, d.seq) AS seq,
       coalesce(p.engine_time, d.engine_time) AS decided_at
FROM decided d
LEFT JOIN options o ON o.user_id = d.user_id AND o.app = d.app
LEFT JOIN presentation p ON d.status = 'provisional' AND p.user_id = d.user_id AND p.app = d.app AND p.seq > d.seq
ORDER BY d.user_id, d.app, p.seq;
COMMENT ON VIEW herald_authorizations_current IS
    'Current authorization per user and app by the fold''s rules (a presentation setting makes a provisional app authorized)';

-- The Focus a user switched on by hand and that is in force by the log's clock: the user's latest
-- `focusOn` (each replaces the previous manual Focus), not followed by a `focusOff` of that Focus,
-- and with no `until` or an `until` after herald_log_time (the Focus ends at `until`).
-- Limits: scheduled Focus windows (`focusDefine` with a schedule) need the engine's calendar in the
-- user's time zone, and a `focusOff` inside a window lasts until that window ends: `herald state
-- <user>` and `herald pending` answer those; this view lists manual Focus only.
CREATE VIEW herald_manual_focus_on AS
WITH last_on AS (
    SELECT DISTINCT ON (e.user_id)
           e.user_id, e.body::json->>'focus' AS focus, e.engine_time AS since,
           (e.body::json->>'until')::timestamptz AS until, e.seq
    FROM events e
    WHERE e.type = 'focusOn'
    ORDER BY e.user_id, e.seq DESC
), last_off AS (
    SELECT e.user_id, e.body::json->>'focus' AS focus, max(e.seq) AS seq
    FROM events e
    WHERE e.type = 'focusOff'
    GROUP BY 1, 2
)
SELECT f.user_id, f.focus, f.since, f.until, f.seq
FROM last_on f
LEFT JOIN last_off o ON o.user_id = f.user_id AND o.focus = f.focus
WHERE (o.seq IS NULL OR o.seq < f.seq)
  AND (f.until IS NULL OR f.until > (SELECT latest_engine_time FROM herald_log_time));
COMMENT ON VIEW herald_manual_focus_on IS
    'Manual Focus in force per user by the log''s clock (one at most); scheduled Focus: herald state / herald pending';

-- Apps a user muted and whose mute has not ended by the log's clock: the latest `mute` of each
-- (user, app) (each replaces the previous one; one with an `until` not after its own time unmutes,
-- as the fold does) with `until` after herald_log_time.
CREATE VIEW herald_active_mutes AS
SELECT m.user_id, m.app, m.until, m.muted_at, m.seq
FROM (
    SELECT DISTINCT ON (e.user_id, e.body::json->>'app')
           e.user_id, e.body::json->>'app' AS app, (e.body::json->>'until')::timestamptz AS until,
           e.engine_time AS muted_at, e.seq
    FROM events e
    WHERE e.type = 'mute'
    ORDER BY e.user_id, e.body::json->>'app', e.seq DESC
) m
WHERE m.until > m.muted_at
  AND m.until > (SELECT latest_engine_time FROM herald_log_time);
COMMENT ON VIEW herald_active_mutes IS
    'Mutes in force per user and app by the log''s clock';

-- ---------------------------------------------------------------------------------------------
-- Pending decisions (what `herald pending` shows)
-- ---------------------------------------------------------------------------------------------

-- Deferred submits (a `deliverAt` later than the submit's engine time) whose decision is not
-- stored yet: no delivery names them (a decision, or their replacement or withdrawal while
-- pending, is one). A deliver_at already past by the log's clock means the decision is due and
-- not stored yet (the service is behind, or stopped). `withdrawn_before_submit`: a withdraw of
-- this (user, app, id) came before the submit; the engine keeps the item until deliver_at, then
-- records it `withdrawn` (SPEC §3 rule 1) — it will not be delivered.
CREATE VIEW herald_pending_deferred AS
SELECT e.user_id, e.app, e.notification_id, (e.body::json->>'deliverAt')::timestamptz AS deliver_at, e.seq,
       EXISTS (SELECT 1 FROM events w
               WHERE w.type = 'withdraw' AND w.user_id = e.user_id AND w.seq < e.seq
                 AND w.body::json->>'app' = e.app AND w.body::json->>'id' = e.notification_id) AS withdrawn_before_submit
FROM events e
WHERE e.type = 'submit'
  AND e.body LIKE '%"deliverAt"%'  -- a cheap filter before parsing every submit's body
  AND (e.body::json->>'deliverAt')::timestamptz > e.engine_time
  AND NOT EXISTS (
      SELECT 1 FROM deliveries d
      WHERE d.user_id = e.user_id AND d.app = e.app AND d.notification_id = e.notification_id);
COMMENT ON VIEW herald_pending_deferred IS
    'Submits with a future deliverAt not decided yet (no delivery names them)';

-- Notifications queued for a Scheduled Summary that has not fired yet: not in a later summary, and
-- no later delivery names them (withdrawn, expired, replaced, suppressed when the summary was
-- screened, or decided again when a snooze ran out: the item is then gone, or pending under that
-- newer delivery, which the view lists instead). A user's queued items all go out in one summary,
-- at one instant:
--   summary_at              that instant: the one decided when the user's latest pending item was
--                           queued, or NULL when a `summarySchedule` of the user was folded after
--                           that (the engine then moved the summary to the new schedule's next
--                           time, which needs its calendar: `herald pending --user <user>` has it);
--   summary_at_when_queued  the instant decided when this item was queued (the delivery's body);
--                           history, not a promise: a later schedule change moves it;
--   schedule_changed_seq    the latest `summarySchedule` folded after the user's latest queued
--                           item (NULL if none): why summary_at is NULL.
-- "Folded after" a decision: a later seq than its cause and an engine time at or after it (timers
-- due at an event's time fire before that event is folded).
CREATE VIEW herald_pending_summary_items AS
WITH pending AS (
    SELECT q.user_id, q.app, q.notification_id, q.at AS queued_at, q.cause_seq, q.cursor,
           (q.body::json->>'summaryAt')::timestamptz AS summary_at_when_queued
    FROM deliveries q
    WHERE q.kind = 'queued'
      AND NOT EXISTS (
          SELECT 1 FROM deliveries s
          WHERE s.user_id = q.user_id AND s.cursor > q.cursor
            AND ((s.kind = 'summary'
                  AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', q.notification_id, 'app', q.app)))
              OR (s.app = q.app AND s.notification_id = q.notification_id)))
), latest AS (
    SELECT DISTINCT ON (user_id) user_id, queued_at, cause_seq, summary_at_when_queued
    FROM pending
    ORDER BY user_id, cursor DESC
), per_user AS (
    SELECT l.user_id, l.summary_at_when_queued, max(s.seq) AS schedule_changed_seq
    FROM latest l
    LEFT JOIN events s ON s.type = 'summarySchedule' AND s.user_id = l.user_id
                      AND s.seq > l.cause_seq AND s.engine_time >= l.queued_at
    GROUP BY l.user_id, l.summary_at_when_queued
)
SELECT p.user_id, p.app, p.notification_id, p.queued_at,
       CASE WHEN u.schedule_changed_seq IS NULL THEN u.summary_at_when_queued END AS summary_at,
       p.summary_at_when_queued, u.schedule_changed_seq, p.cursor
FROM pending p
JOIN per_user u ON u.user_id = p.user_id;
COMMENT ON VIEW herald_pending_summary_items IS
    'Queued summary items not yet summarized, nor named by a later delivery; summary_at NULL when a later summarySchedule moved it (herald pending has it)';

-- Notifications held by a Focus that has not ended: not in a later Focus digest, and no later
-- delivery names them (withdrawn, expired, replaced, suppressed when the digest was screened, or
-- decided again when a snooze ran out).
CREATE VIEW herald_held_notifications AS
SELECT h.user_id, h.app, h.notification_id, h.body::json->>'focus' AS focus, h.at AS held_at, h.cursor
FROM deliveries h
WHERE h.kind = 'held'
  AND NOT EXISTS (
      SELECT 1 FROM deliveries s
      WHERE s.user_id = h.user_id AND s.cursor > h.cursor
        AND ((s.kind = 'focusDigest'
              AND s.body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('notification', h.notification_id, 'app', h.app)))
          OR (s.app = h.app AND s.notification_id = h.notification_id)));
COMMENT ON VIEW herald_held_notifications IS
    'Held by a Focus that has not ended: not in a later digest, and no later delivery names them';

-- ---------------------------------------------------------------------------------------------
-- Counts and lag
-- ---------------------------------------------------------------------------------------------

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
