// The fixed, parameterized statements of the event store. Values only ever travel as parameters.

enum StoreSQL {
    /// Names of the writer's prepared statements (prepared once per connection by `GroupCommitWriter`).
    static let appendEventsName = "herald_append_events"
    static let appendDeliveriesName = "herald_append_deliveries"
    static let appendEventsParameterCount = 7
    static let appendDeliveriesParameterCount = 11

    /// Session settings of the writer connection, sent once before its first transaction.
    /// `jit = off`: the batch statements' estimates (a cross join with the head row, which has no
    /// statistics until autovacuum analyzes it, or a 10,000-row batch) exceed `jit_above_cost`, and
    /// compiling the plan with LLVM cost ~28 ms per transaction — more than executing it (~10 ms
    /// for 510 rows). These statements are all row-at-a-time OLTP work, which JIT never speeds up.
    static let writerSessionSetup = "SET jit = off"

    /// Appends a batch of events through `herald_append_events` (schema/002_append_functions.sql;
    /// the writer's fast path is COPY, `EventCopy`, and this is its fallback when a key is stored).
    /// A request (a submit's rows, recipient index 0 … n-1) whose (app, notification id) is stored, or
    /// used by an earlier request of the batch, stores none of its rows: they are reported as
    /// duplicates (the stored request's rows repeated exactly) or conflicts (anything else). Fresh
    /// rows take consecutive positions from their partition's row of `partitions`, bumped in the same transaction, so a
    /// rolled-back batch leaves no gap and positions follow commit order. Returns (ord, seq, outcome) per input row, ordered by ord,
    /// or the single row (0, base, 'batch') when every row was appended at base + ord.
    /// The writer's partition and epoch are part of the statement (a writer's scope never changes).
    static func appendEvents(_ scope: AppendScope) -> String {
        """
        SELECT r_ord, r_seq, r_outcome
        FROM herald_append_events(\(scope.sqlArguments), $1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                                  $6::timestamptz[], $7::integer[])
        """
    }

    /// Appends a batch of deliveries through `herald_append_deliveries` (schema/002_append_functions.sql).
    /// A delivery whose (user, user_index) is stored already (re-derived after a restart) is
    /// skipped; fresh ones take consecutive cursors. Returns (ord, cursor) of fresh rows, or the
    /// single row (0, base) when every row was stored at base + ord.
    static func appendDeliveries(_ scope: AppendScope) -> String {
        """
        SELECT r_ord, r_cursor
        FROM herald_append_deliveries(\(scope.sqlArguments), $1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[],
                                      $6::text[], $7::text[], $8::timestamptz[], $9::text[], $10::text[], $11::text[])
        """
    }

    /// Moves a consumer's acknowledged cursor in a partition ($1) forward (never backwards),
    /// creating the consumer if new. Not fenced: a consumer's cursor is not part of the log, and
    /// an instance acknowledges for consumers of partitions it does not own. `updated_at` takes
    /// the inserted row's default (now()): Citus refuses a volatile function in DO UPDATE SET.
    static let ackConsumer = """
        WITH named AS (INSERT INTO consumers (name) VALUES ($2) ON CONFLICT (name) DO NOTHING)
        INSERT INTO consumer_cursors (partition, name, acked) VALUES ($1, $2, $3)
        ON CONFLICT (partition, name) DO UPDATE SET acked = GREATEST(consumer_cursors.acked, EXCLUDED.acked), updated_at = EXCLUDED.updated_at
        RETURNING acked
        """

    static let readEvents = """
        SELECT seq, user_id, type, app, notification_id, body, (extract(epoch FROM engine_time) * 1000)::bigint,
               recipient_index
        FROM events WHERE partition = $3 AND seq > $1 ORDER BY seq LIMIT $2
        """

    /// As `readEvents`, for one user ($4) and the global events (user_id NULL).
    static let readUserEvents = """
        SELECT seq, user_id, type, app, notification_id, body, (extract(epoch FROM engine_time) * 1000)::bigint,
               recipient_index
        FROM events WHERE partition = $3 AND seq > $1 AND (user_id = $4 OR user_id IS NULL) ORDER BY seq LIMIT $2
        """

    static let readDeliveries = """
        SELECT cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason,
               (extract(epoch FROM at) * 1000)::bigint, rules_version, trace, body
        FROM deliveries WHERE partition = $3 AND cursor > $1 ORDER BY cursor LIMIT $2
        """
}

/// The consumer look-ups the service makes on its reader connection.
public enum ConsumerSQL {
    /// A consumer's acknowledged cursor in a partition ($2): one row when the consumer exists (0
    /// when it acknowledged nothing there), none when it does not.
    public static let ackedCursor = """
        SELECT coalesce((SELECT k.acked FROM consumer_cursors k WHERE k.name = c.name AND k.partition = $2::integer), 0)
        FROM consumers c WHERE c.name = $1
        """

    /// As `ackedCursor`, with the consumer's stored filter (canonical JSON, or NULL) beside it.
    public static let ackedCursorAndFilter = """
        SELECT coalesce((SELECT k.acked FROM consumer_cursors k WHERE k.name = c.name AND k.partition = $2::integer), 0), c.filter
        FROM consumers c WHERE c.name = $1
        """
}
