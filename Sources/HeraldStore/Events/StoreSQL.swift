// The fixed, parameterized statements of the event store. Values only ever travel as parameters.

enum StoreSQL {
    /// Appends a batch of events. Submits whose idempotency key (app, notification id, user) exists are not inserted and are
    /// reported as duplicates (same body) or conflicts (different body). Fresh rows take
    /// consecutive positions from `event_head`, bumped in the same statement, so a rolled-back
    /// batch leaves no gap and positions follow commit order. Returns (ord, seq, outcome) per input row.
    static let appendEvents = """
        WITH input AS (
            SELECT t.*, sha256(convert_to(t.body, 'UTF8')) AS body_hash
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
                 WITH ORDINALITY AS t(user_id, type, app, notification_id, body, engine_time, ord)
        ),
        existing AS (
            -- LATERAL … LIMIT 1 keeps this an index probe per row: a hash join would scan the whole log.
            SELECT i.ord, e.seq, e.body_hash = i.body_hash AS same
            FROM input i
            CROSS JOIN LATERAL (
                SELECT seq, body_hash FROM events
                WHERE app = i.app AND notification_id = i.notification_id AND user_id = i.user_id AND type = 'submit'
                LIMIT 1
            ) e
            WHERE i.notification_id IS NOT NULL AND i.type = 'submit'
        ),
        fresh AS (
            SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
            FROM input i
            WHERE NOT EXISTS (SELECT 1 FROM existing x WHERE x.ord = i.ord)
        ),
        head AS (
            UPDATE event_head SET seq = seq + (SELECT count(*) FROM fresh)
            RETURNING seq - (SELECT count(*) FROM fresh) AS base
        ),
        inserted AS (
            INSERT INTO events (seq, user_id, type, app, notification_id, body, body_hash, engine_time)
            SELECT head.base + f.rn, f.user_id, f.type, f.app, f.notification_id, f.body::json, f.body_hash, f.engine_time
            FROM fresh f, head
            RETURNING seq
        )
        SELECT f.ord, head.base + f.rn, 'appended' FROM fresh f, head
        UNION ALL
        SELECT x.ord, x.seq, CASE WHEN x.same THEN 'duplicate' ELSE 'conflict' END FROM existing x
        ORDER BY 1
        """

    /// Appends a batch of deliveries. A delivery whose (user, user_index) is stored already (re-derived
    /// after a restart) is skipped; fresh ones take consecutive cursors. Returns (ord, cursor) of fresh rows.
    static let appendDeliveries = """
        WITH input AS (
            SELECT t.*
            FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
                        $8::timestamptz[], $9::text[], $10::text[], $11::text[])
                 WITH ORDINALITY AS t(user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                      rules_version, trace, body, ord)
        ),
        fresh AS (
            SELECT i.*, row_number() OVER (ORDER BY i.ord) AS rn
            FROM input i
            WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.user_id = i.user_id AND d.user_index = i.user_index LIMIT 1)
        ),
        head AS (
            UPDATE delivery_head SET cursor = cursor + (SELECT count(*) FROM fresh)
            RETURNING cursor - (SELECT count(*) FROM fresh) AS base
        ),
        inserted AS (
            INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                    rules_version, trace, body)
            SELECT head.base + f.rn, f.user_id, f.user_index, f.cause_seq, f.kind, f.app, f.notification_id, f.reason,
                   f.at, f.rules_version, f.trace::json, f.body::json
            FROM fresh f, head
            RETURNING cursor
        )
        SELECT f.ord, head.base + f.rn FROM fresh f, head ORDER BY 1
        """

    /// Moves a consumer's acknowledged cursor forward (never backwards), creating the consumer if new.
    static let ackConsumer = """
        INSERT INTO consumers (name, acked) VALUES ($1, $2)
        ON CONFLICT (name) DO UPDATE SET acked = GREATEST(consumers.acked, EXCLUDED.acked), updated_at = now()
        RETURNING acked
        """

    static let readEvents = """
        SELECT seq, user_id, type, app, notification_id, body, (extract(epoch FROM engine_time) * 1000)::bigint
        FROM events WHERE seq > $1 ORDER BY seq LIMIT $2
        """

    static let readDeliveries = """
        SELECT cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason,
               (extract(epoch FROM at) * 1000)::bigint, rules_version, trace, body
        FROM deliveries WHERE cursor > $1 ORDER BY cursor LIMIT $2
        """
}
