-- 006: deliveries are appended by COPY too (in the same simple query as the events' COPY; design
-- and numbers in docs/store-performance.md, session 4).
-- committed_at defaults to the statement's start, not clock_timestamp(): COPY inserts rows one at a
-- time (no heap_multi_insert) when a column it fills by default is volatile — the same change 004
-- made for events. Each append is one short statement, so the value still says when it ran.
ALTER TABLE deliveries ALTER COLUMN committed_at SET DEFAULT statement_timestamp();
