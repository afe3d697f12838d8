-- 010: a delivery's `trace` is stored compact: `["withdrawn","expired",…,"normal:decided"]`.
--
-- Each step is one JSON string: the bare rule code when the rule did not apply (`pass`, most
-- steps), `rule:outcome` otherwise (`focus:decided`, `critical:downgraded`, `snooze:applied`).
-- The list is still every rule evaluated, in order, ending with the one that decided (SPEC §10).
--
-- Why: a plain alert's trace was 13 objects, `{"outcome":"pass","rule":"withdrawn"}`, 494 bytes of
-- a ~1,150-byte row; compact it is ~190. PostgreSQL's single delivery writer spends its time per
-- row mostly on bytes (parse, WAL, heap), and that time bounds the 08:00 storm, the peer's p99
-- and ingest at saturation (measurements in docs/store-performance.md, session 12).
--
-- Operators: `trace::jsonb ? 'focus:decided'` finds the deliveries a Focus held;
-- `trace::jsonb ->> -1` is the deciding step. `herald explain` prints both formats expanded.
--
-- Rows stored before this migration are rewritten to the same form, so the column has one format:
-- a change of representation only (each row keeps its steps, in order; `RuleStep.steps` reads
-- both forms, and DeliveryRowBytesTests/CompactTraceMigrationTests hold the two equal). As in 004,
-- the append-only trigger is lifted inside this migration's transaction (nobody sees the gap).
-- Replay compares delivery bodies, not traces, so it is unaffected either way.
ALTER TABLE deliveries DISABLE TRIGGER deliveries_append_only;
UPDATE deliveries
SET trace = (
    SELECT '[' || string_agg(
               to_json(CASE WHEN step ->> 'outcome' = 'pass' THEN step ->> 'rule'
                            ELSE (step ->> 'rule') || ':' || (step ->> 'outcome') END)::text,
               ',' ORDER BY n) || ']'
    FROM json_array_elements(trace::json) WITH ORDINALITY AS steps(step, n))
WHERE trace LIKE '[{%';
ALTER TABLE deliveries ENABLE TRIGGER deliveries_append_only;
