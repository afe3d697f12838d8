-- 005: engine-state snapshots, so start-up folds only the events after the latest one
-- (docs/restart.md). Not on the hot path: a snapshot is written by its own connection, in
-- parts, while the service keeps serving.

-- One row per snapshot. `through_seq`: every event at or below it is in the snapshot's state
-- (the position when capture began; each user's state also records the seq of its last folded
-- event, so events between through_seq and a later part's capture are recognised and skipped).
-- `header`: format version, the app registry at through_seq, the engine time at capture.
-- `completed_at` is set (the row's only update) once every part is stored and every delivery
-- the captured states had decided is committed: a snapshot without it is ignored (a crash
-- between part writes leaves one; the next snapshot deletes it).
CREATE TABLE snapshots (
    id           bigserial PRIMARY KEY,
    through_seq  bigint NOT NULL,
    format       integer NOT NULL,
    header       bytea NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    users        bigint,
    parts        integer,
    bytes        bigint
);

-- The users' encoded states, a few MB a part, in capture order.
CREATE TABLE snapshot_parts (
    snapshot_id bigint NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    part        integer NOT NULL,
    users       integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (snapshot_id, part)
);
-- Varints and short strings compress little; pglz on every part would cost the writer CPU.
ALTER TABLE snapshot_parts ALTER COLUMN data SET STORAGE EXTERNAL;
