-- A durable consumer's delivery filter (SPEC §5 `subscribe` `filter`), as its last subscribe gave
-- it: canonical JSON `{"apps":[…],"kinds":[…]}` (either list may be absent), NULL for none. Kept
-- so that the admin op `consumers` and `herald consumers list` show it while the consumer is away.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE consumers ADD COLUMN filter text;
