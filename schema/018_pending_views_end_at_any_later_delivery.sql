-- 018: the pending summary items and the held notifications end at any later delivery that names
-- the notification, not only at `expired`, `withdrawn` or `replaced` (SPEC §7, §10; the fold is the
-- authority: `herald pending`).
--
-- Why: rules "4" (session 28) let a summary or Focus digest leave out an item of an app the user
-- no longer authorizes, or silenced, with a `suppressed` delivery naming it; rules "5" (session 29)
-- let a held or queued notification be snoozed, and at its `until` it leaves its Focus or summary
-- and is decided again (alert, quiet, held or queued again, …). The 016 views knew only the three
-- removal kinds, so such an item stayed "pending" in them for good. Any delivery after the queued
-- (held) one that names the same (user, app, notification) is its next decision: the item is
-- then either gone or pending under that newer delivery, which the view lists instead.

DROP VIEW herald_pending_summary_items, herald_held_notifications;

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
    'Queued summary items not yet summarized, nor named by a later delivery; summary_at NULL when a later summarySchedule moved it (herald pending has it) (schema/018)';

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
    'Held by a Focus that has not ended: not in a later digest, and no later delivery names them (schema/018)';
