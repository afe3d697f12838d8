-- 004: the idempotency key covers submits only. withdraw, snooze and opened name the
-- notification they act on (kept in notification_id for operators), and must not collide
-- with the submit that created it.
DROP INDEX events_idempotency;
CREATE UNIQUE INDEX events_idempotency ON events (app, notification_id, user_id)
    WHERE notification_id IS NOT NULL AND type = 'submit';
CREATE INDEX events_notification ON events (app, notification_id) WHERE notification_id IS NOT NULL;
