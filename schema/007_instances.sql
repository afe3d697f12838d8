-- Instances (SPEC §9): the `herald serve` processes that share the database, each live while its
-- heartbeat is, so that every instance computes the same fair share of the partitions from the
-- same list; and the conditional take by which an instance acquires a free partition. Liveness and
-- leases are judged on the database's clock (now()), never an instance's.
--
-- Adds a table and functions only: nothing to rewrite on an existing database. Under Citus,
-- `instances` is a reference table (a handful of rows, written once per tick per instance).

-- One row per instance that announced itself. An instance whose heartbeat expired is not counted
-- (it died, or cannot reach the database); a graceful stop deletes its row.
CREATE TABLE instances (
    name              text        COLLATE "C" PRIMARY KEY,  -- byte equality, as every key (0019)
    address           text        NOT NULL,       -- where it serves (host:port)
    started_at        timestamptz NOT NULL,       -- its first heartbeat since it was last live
    heartbeat_at      timestamptz NOT NULL,       -- its last heartbeat
    heartbeat_expires timestamptz NOT NULL        -- it is live until then
);

-- Writes the heartbeat of `p_instance`, serving at `p_address`: live for `p_ttl_ms` milliseconds
-- more. An instance back after its heartbeat expired (a restart, a long pause) starts anew. (The
-- DO UPDATE uses only EXCLUDED's values: Citus refuses non-immutable functions such as now()
-- there.)
CREATE FUNCTION herald_heartbeat(p_instance text, p_address text, p_ttl_ms bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO instances AS i (name, address, started_at, heartbeat_at, heartbeat_expires)
    VALUES (p_instance, p_address, now(), now(), now() + p_ttl_ms * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE
    SET address = EXCLUDED.address,
        started_at = CASE WHEN i.heartbeat_expires < EXCLUDED.heartbeat_at THEN EXCLUDED.started_at ELSE i.started_at END,
        heartbeat_at = EXCLUDED.heartbeat_at,
        heartbeat_expires = EXCLUDED.heartbeat_expires;
$$;

-- Takes partition `p_partition` for `p_instance` (serving at `p_address`) for `p_ttl_ms`
-- milliseconds, iff its epoch is still `p_expected_epoch` (the one the caller read) and it is
-- free: never owned, released, or its lease expired. Returns the new epoch, or NULL when the
-- partition was not takeable. Two instances racing for one partition: the second's UPDATE waits
-- for the first's row lock, re-reads the row, finds the epoch moved on and takes nothing.
-- The database's clock when called: clock_timestamp(), not now(). A take or a renewal may wait for
-- the partition's row while an append (a paused owner's, say) holds it; a lease counted from when
-- the statement began would be expired on arrival. Declared STABLE so that Citus accepts it in an
-- UPDATE of a distributed table (it then evaluates it on the coordinator); PL/pgSQL, so that it is
-- never inlined into clock_timestamp() itself.
CREATE FUNCTION herald_clock() RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN clock_timestamp();
END;
$$;

CREATE FUNCTION herald_take_partition(p_partition integer, p_instance text, p_address text, p_ttl_ms bigint,
                                      p_expected_epoch bigint) RETURNS bigint
LANGUAGE sql AS $$
    UPDATE partitions
    SET epoch = epoch + 1, owner = p_instance, address = p_address,
        lease_expires = herald_clock() + p_ttl_ms * interval '1 millisecond'
    WHERE partition = p_partition AND epoch = p_expected_epoch
      AND (owner IS NULL OR lease_expires IS NULL OR lease_expires < herald_clock())
    RETURNING epoch;
$$;

-- A graceful stop: deletes the instance's row, so that the others count it out at once. Its
-- partitions are released one by one beforehand (LeaseSQL.release), each after a drain.
CREATE FUNCTION herald_leave(p_instance text) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM instances WHERE name = p_instance;
$$;

-- The instances, for operators: live or not, how many partitions each holds a live lease on, and
-- how long ago it last wrote its heartbeat.
CREATE VIEW herald_instances AS
SELECT i.name, i.address, i.heartbeat_expires > now() AS live, coalesce(p.partitions, 0) AS partitions,
       now() - i.heartbeat_at AS heartbeat_age, i.started_at, i.heartbeat_expires
FROM instances i
LEFT JOIN (
    SELECT owner, count(*) AS partitions FROM partitions
    WHERE owner IS NOT NULL AND lease_expires >= now()
    GROUP BY owner
) p ON p.owner = i.name;
