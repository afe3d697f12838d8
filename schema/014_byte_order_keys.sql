-- 014: the key columns Herald looks rows up by compare bytes (COLLATE "C"), whatever the
-- database's locale (measurements in docs/store-performance.md, session 15).
--
-- Why: `events (app, notification_id, user_id)` (the idempotency key) and `deliveries (user_id,
-- user_index)` are unique B-tree indexes on text; every insert descends them comparing text. In a
-- database created with a glibc locale such as en_US.UTF-8 (the postgres Docker image's default)
-- each comparison goes through strcoll. Measured on a cluster initialised with en_US.UTF-8 against
-- one with C, same build, interleaved: the writer backends' CPU 16.7–17.8 against 12.3–12.7 µs per
-- submit (`herald bench ingest`: 60–63k against 67–71k submits/s), a 20,000-job burst's p99 157–223
-- against 132–148 ms. Herald's own private cluster is initialised with the C locale; users' are not.
--
-- What changes: equality (every look-up Herald and the operator views make) is the same — en_US
-- is a deterministic collation, equal means the same bytes. Only the ORDER BY of these columns in
-- an operator's own query changes on a database with a non-C locale: byte order instead of the
-- locale's (add COLLATE "en_US" to such an ORDER BY to get the old one). The six columns change
-- together so that comparing an events column with a deliveries one needs no COLLATE clause.
--
-- Cost at upgrade: no table is rewritten (the bytes are the same), but the two unique indexes are
-- rebuilt under an exclusive lock: about a minute per 10M rows. The operator views that read these
-- columns are dropped and created again from their current definitions (in the same transaction);
-- a view of an operator's own that reads one of them makes the migration fail with PostgreSQL's
-- message naming it: drop it, migrate, create it again.

DO $herald$
DECLARE
    v record;
    views text[] := '{}';
    defs text[] := '{}';
BEGIN
    FOR v IN SELECT c.relname, pg_get_viewdef(c.oid) AS def
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind = 'v' AND n.nspname = current_schema() AND c.relname IN (
                 'herald_settings_current', 'herald_authorizations_current', 'herald_pending_summary_items',
                 'herald_held_notifications', 'herald_manual_focus_on', 'herald_deliveries_hourly',
                 'herald_suppressions_daily')
    LOOP
        views := views || v.relname::text;
        defs := defs || v.def;
        EXECUTE format('DROP VIEW %I', v.relname);
    END LOOP;

    ALTER TABLE events ALTER COLUMN user_id TYPE text COLLATE "C",
                       ALTER COLUMN app TYPE text COLLATE "C",
                       ALTER COLUMN notification_id TYPE text COLLATE "C";
    ALTER TABLE deliveries ALTER COLUMN user_id TYPE text COLLATE "C",
                           ALTER COLUMN app TYPE text COLLATE "C",
                           ALTER COLUMN notification_id TYPE text COLLATE "C";

    FOR i IN 1 .. coalesce(array_length(views, 1), 0) LOOP
        EXECUTE format('CREATE VIEW %I AS %s', views[i], defs[i]);
    END LOOP;
END
$herald$;
