-- 015: which rules version decided each part of the log, so a newer build replays an older log
-- byte for byte (docs/engine.md, "Rules versions").
--
-- Why: every delivery records the rules version that made it (SPEC §10), and a build that changes
-- a rule bumps the version. Replay must then decide the events an older build decided by that
-- build's rules, and the rest by the new ones: the switch point has to be in the database.
--
-- One row per start-up of `herald serve` (or load of a synthetic history) whose build's version
-- differs from the latest row's, or that finds no row; a log with no row was written before
-- versions were recorded (version "1"). An event at seq s is decided by the version of the last
-- row with from_seq <= s; a timer by its arming event's version when it fires as that event folds,
-- otherwise by the last row with at < its deadline (timers due by a start-up were owed by the
-- build that stopped); a row with from_seq = 1 (recorded on an empty log) governs every timer.
-- `at` is the latest of the start-up's engine time, the log's and the newest stored decision's.
-- Never updated or deleted; `herald export` / `import` carry the rows.
CREATE TABLE rules_versions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- recording order
    from_seq    bigint      NOT NULL CHECK (from_seq > 0),  -- not unique: two take-overs may meet no event between them
    at          timestamptz NOT NULL,               -- engine time of the start-up
    version     text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()  -- wall clock, for operators
);
COMMENT ON TABLE rules_versions IS 'Rules version in force from each seq (events) and engine time (timers); see schema/015_rules_versions.sql';
