-- 001: the event store. Every accepted request is one immutable row of `events`; every
-- delivery decision is one immutable row of `deliveries`; consumers keep a durable cursor.

-- Global positions. Each append transaction bumps the head row in the same statement that
-- inserts its rows, so positions are gap-free (a rolled-back append rolls back its bump) and
-- commit-ordered (the row lock serialises appenders until COMMIT): a reader that has seen
-- position N has seen everything below N. A bare sequence gives neither (see ARCHITECTURE.md).
CREATE TABLE event_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq bigint NOT NULL DEFAULT 0
);
INSERT INTO event_head DEFAULT VALUES;

CREATE TABLE delivery_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cursor bigint NOT NULL DEFAULT 0
);
INSERT INTO delivery_head DEFAULT VALUES;

-- The event log. `body` is the normalized request as canonical JSON text (the `json` type keeps
-- the bytes exactly; cast to jsonb to query). `engine_time` is the instant the engine saw.
CREATE TABLE events (
    seq             bigint      PRIMARY KEY,
    user_id         text,                       -- partition key; NULL for global events (registerApp)
    type            text        NOT NULL,
    app             text,
    notification_id text,
    body            json        NOT NULL,
    body_hash       bytea       NOT NULL,       -- sha256 of body: detects "same id, different payload"
    engine_time     timestamptz NOT NULL,
    committed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (seq > 0)
);
-- Idempotency: (app, notification id) is unique forever, per recipient (a fan-out is one event per user).
CREATE UNIQUE INDEX events_idempotency ON events (app, notification_id, user_id) WHERE notification_id IS NOT NULL;
CREATE INDEX events_user_seq ON events (user_id, seq);

-- Deliveries: decisions of the engine, derived from events (replay re-derives them byte for byte).
-- `user_index` is the delivery's ordinal in its user's own stream (deterministic from the fold).
CREATE TABLE deliveries (
    cursor          bigint      PRIMARY KEY,
    user_id         text        NOT NULL,
    user_index      bigint      NOT NULL,
    cause_seq       bigint      NOT NULL,       -- the event whose fold produced it
    kind            text        NOT NULL,
    app             text,
    notification_id text,
    reason          text        NOT NULL,
    at              timestamptz NOT NULL,       -- engine time of the decision
    rules_version   text        NOT NULL,
    trace           json        NOT NULL,       -- ordered rules evaluated, with their outcome
    body            json        NOT NULL,       -- the delivery line without op/cursor, canonical bytes
    committed_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (cursor > 0),
    UNIQUE (user_id, user_index)
);
CREATE INDEX deliveries_notification ON deliveries (app, notification_id) WHERE notification_id IS NOT NULL;
CREATE INDEX deliveries_cause ON deliveries (cause_seq);

-- Durable consumers: the last cursor each named consumer acknowledged.
CREATE TABLE consumers (
    name        text        PRIMARY KEY,
    acked       bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (acked >= 0)
);

-- The log is append-only: the database refuses UPDATE, DELETE and TRUNCATE, whoever asks.
CREATE FUNCTION herald_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'herald: % on % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'HE001',
              HINT = 'Events and deliveries are immutable history; correct state by appending a new event.';
END;
$$;
-- Statement-level, so the refusal does not depend on whether any row matched.
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();
CREATE TRIGGER deliveries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION herald_refuse_change();
