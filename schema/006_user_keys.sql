-- Per-user content keys, for erasure by crypto-shredding (docs/decisions, "Erasure"; SPEC §14).
--
-- The content of a user's submits and deliveries (titles, subtitles, bodies, placeholders, data,
-- sender names, action titles) is stored sealed under the user's key: AES-256-GCM, the sealed
-- bytes in one `sealed` member of the row's body ("<generation>.<base64>"), every decision field
-- beside it in clear. This table holds the keys, and it is the one thing erasure deletes: once a
-- user's key rows are gone, every copy of their sealed content — in `events`, `deliveries`, in
-- exports and backups taken afterwards — is unreadable, while the log itself stays append-only.
-- A backup taken *before* an erasure still holds the key: see docs/operations.md, "Erasure".
--
-- A key row is created (by `herald serve`, before the first row it seals) with the user's first
-- content; `erase {user}` deletes the user's rows and appends an `erase` event, and the user's
-- later content is sealed under a new key of a higher generation. Not on the hot path: the
-- service reads every key once at start-up and keeps them in memory; a new user's first
-- submit inserts one row. Adds nothing to existing tables.
CREATE TABLE user_keys (
    user_id     text        COLLATE "C" NOT NULL,
    -- Numbered across all users, so a user's later key always has a higher one.
    generation  bigint      GENERATED ALWAYS AS IDENTITY,
    key         bytea       NOT NULL CHECK (octet_length(key) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, generation)
);
COMMENT ON TABLE user_keys IS
    'Per-user AES-256-GCM content keys; deleting a user''s rows erases their stored content (schema/006_user_keys.sql)';
