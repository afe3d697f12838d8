// Export and import of the log as newline-delimited JSON, so an audit can replay it elsewhere.
import HeraldCore

/// One line per stored row: `{"rules":{fromSeq,at,version}}` (first: where each rules version
/// took over: the table `rules_versions`), `{"event":{seq,user,type,app,notificationId,engineTime,body}}` or
/// `{"delivery":{cursor,user,userIndex,causeSeq,kind,app,notificationId,reason,at,rulesVersion,trace,body}}`,
/// with `body` and `trace` as the exact stored text, and last `{"end":{"events":N,"deliveries":M}}`,
/// which an export cut after any whole line — even right after its last event — lacks. Import
/// restores positions and bytes, so replay on the copy gives the same result as on the original.
///
/// A database of P > 1 partitions (SPEC §9) is exported partition after partition: a first line
/// `{"partitions":{"count":P,"hash":"fnv1a64"}}`, then each partition's rules, events and
/// deliveries, each naming its `partition` (events also their `recipientIndex`, counted per
/// partition). A database of one partition is exported as before, without either.
public enum LogTransfer {
    /// Writes the log as of one snapshot (a read-only repeatable-read transaction): a service
    /// appending meanwhile adds nothing half-way, and every delivery's cause is in the export.
    /// `only`: one partition of a partitioned database (`herald export --partition N`). A log that
    /// `herald retain` moved partly into archive segments is exported whole only with `archive`
    /// (the segments' directory): their lines first, then the hot rows after them.
    public static func export(_ connection: PGConnection, only: Int? = nil, archive: ArchiveSegments? = nil,
                              write: (String) -> Void) throws(StoreError) -> (events: Int, deliveries: Int) {
        try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do throws(StoreError) {
            let partitioning = try EventReader.partitioning(connection)
            if let only, only < 0 || only >= partitioning.count {
                throw StoreError.configuration("--partition \(only) is not one of this database's \(partitioning.count) partitions (0 … \(partitioning.count - 1))")
            }
            let horizon = try connection.execute("SELECT coalesce(max(seq), 0), coalesce(max(cursor), 0) FROM retention_horizons")
            let dropped = (events: horizon.int64(0, 0) ?? 0, deliveries: horizon.int64(0, 1) ?? 0)
            if archive == nil, dropped.events > 0 || dropped.deliveries > 0 {
                throw StoreError.configuration("events up to seq \(dropped.events) and deliveries up to cursor \(dropped.deliveries) were archived "
                    + "and dropped by herald retain: export the whole log with --archive DIR (the archive's directory)")
            }
            if archive != nil, partitioning.count > 1 {
                throw StoreError.configuration("herald export --archive reads the archive of a database of one partition; this one has \(partitioning.count)")
            }
            var counts = (events: 0, deliveries: 0)
            if partitioning.count == 1 {
                counts = try exportRows(connection, partition: nil, archive: archive, write: write)
            } else {
                write(JSONValue.object(["partitions": .object(["count": .int(Int64(partitioning.count)),
                                                               "hash": .string(Partitioning.hashName)])]).canonicalString)
                for p in (only.map { [$0] } ?? Array(partitioning.all)) {
                    let c = try exportRows(connection, partition: p, archive: nil, write: write)
                    counts.events += c.events
                    counts.deliveries += c.deliveries
                }
            }
            write(JSONValue.object(["end": .object(["events": .int(Int64(counts.events)),
                                                    "deliveries": .int(Int64(counts.deliveries))])]).canonicalString)
            try connection.execute("COMMIT")
            return counts
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// One partition's rows (`partition` nil: the single log of a one-partition database, whose
    /// lines name no partition).
    private static func exportRows(_ connection: PGConnection, partition: Int?, archive: ArchiveSegments?,
                                   write: (String) -> Void) throws(StoreError) -> (events: Int, deliveries: Int) {
        var after: Int64 = 0, events = 0, deliveries = 0
        let p = partition ?? 0
        // Bodies are exported opened (`ContentSeal`): the content in clear where its key exists,
        // the erased form where it was erased. No key leaves the database.
        let keys = try KeyRing.load(connection)
        for c in try RulesVersionStore.history(connection, partition: p).changes {
            var o: [String: JSONValue] = ["fromSeq": .int(c.fromSeq), "at": .string(c.at.rfc3339), "version": .string(c.version)]
            if let partition { o["partition"] = .int(Int64(partition)) }
            write(JSONValue.object(["rules": .object(o)]).canonicalString)
        }
        if let archive {
            let archived = try archive.write(connection, kind: "events", keys: keys, write)
            events += archived.lines
            after = archived.last
        }
        while true {
            let page = try EventReader.events(connection, partition: p, after: after, limit: 10_000)
            if page.isEmpty { break }
            for e in page {
                after = e.seq
                events += 1
                write(eventLine(e, keys: keys, partition: partition))
            }
        }
        after = 0
        if let archive {
            let archived = try archive.write(connection, kind: "deliveries", keys: keys, write)
            deliveries += archived.lines
            after = archived.last
        }
        while true {
            let page = try EventReader.deliveries(connection, partition: p, after: after, limit: 10_000)
            if page.isEmpty { break }
            for d in page {
                after = d.cursor
                deliveries += 1
                write(deliveryLine(d, keys: keys, partition: partition))
            }
        }
        return (events, deliveries)
    }

    /// An event's export line: content opened where its key exists (`keys` nil: as stored, for
    /// the archive). In a partitioned database's export it names its `partition` and
    /// `recipientIndex` (counted per partition).
    static func eventLine(_ e: StoredEventRow, keys: KeyRing?, partition: Int? = nil) -> String {
        let body = keys?.readable(e.row.bodyBytes, user: e.row.user) ?? e.row.bodyBytes
        var o: [String: JSONValue] = ["seq": .int(e.seq), "type": .string(e.row.type), "body": .string(String(decoding: body, as: UTF8.self)),
                                      "engineTime": .string(e.row.engineTime.rfc3339)]
        if let u = e.row.user { o["user"] = .string(u) }
        if let a = e.row.app { o["app"] = .string(a) }
        if let n = e.row.notificationId { o["notificationId"] = .string(n) }
        if body != e.row.bodyBytes { o["sealed"] = true }  // stored sealed: import seals it again
        if let partition {
            o["partition"] = .int(Int64(partition))
            o["recipientIndex"] = .int(Int64(e.row.recipientIndex))
        }
        return JSONValue.object(["event": .object(o)]).canonicalString
    }

    /// A delivery's export line.
    static func deliveryLine(_ d: StoredDeliveryRow, keys: KeyRing?, partition: Int? = nil) -> String {
        let r = d.row
        var o: [String: JSONValue] = ["cursor": .int(d.cursor), "user": .string(r.user), "userIndex": .int(r.userIndex),
                                      "causeSeq": .int(r.causeSeq), "kind": .string(r.kind), "reason": .string(r.reason),
                                      "at": .string(r.at.rfc3339), "rulesVersion": .string(r.rulesVersion),
                                      "trace": .string(r.trace)]
        let body = keys?.readable(r.bodyBytes, user: r.user) ?? r.bodyBytes
        o["body"] = .string(String(decoding: body, as: UTF8.self))
        if body != r.bodyBytes { o["sealed"] = true }
        if let a = r.app { o["app"] = .string(a) }
        if let n = r.notificationId { o["notificationId"] = .string(n) }
        if let partition { o["partition"] = .int(Int64(partition)) }
        return JSONValue.object(["delivery": .object(o)]).canonicalString
    }

    public enum ImportError: Error, CustomStringConvertible {
        case notEmpty, badLine(Int, String), store(StoreError)
        /// No end line: the export was cut after a whole line, or written by a Herald without end lines.
        case noEnd(lines: Int)
        /// The end line's counts differ from the rows before it.
        case endMismatch(line: Int, expected: (events: Int64, deliveries: Int64), found: (events: Int, deliveries: Int))
        /// Positions must be gap-free (SPEC §7): line `line` holds `found` where `expected` was due.
        case gap(line: Int, what: String, expected: Int64, found: Int64)
        /// A delivery names a cause past the export's last event.
        case missingCause(line: Int, cursor: Int64, causeSeq: Int64, lastSeq: Int64)
        public var description: String {
            // The import is one transaction: any refusal leaves the target as it was.
            let nothing = "Nothing was imported; the target database is as it was."
            switch self {
            case .notEmpty: return "The target database already holds events; import only into a fresh, migrated database."
            case .badLine(let n, let why):
                return n > 0 ? "Line \(n) is not an exported row (\(why)). \(nothing)" : "The import failed (\(why)). \(nothing)"
            case .gap(let n, let what, let expected, let found):
                return "The export lacks \(what) \(expected)\(found > expected + 1 ? "–\(found - 1)" : ""): line \(n) holds \(what) \(found) "
                    + "where \(expected) was due, and \(what)s are gap-free. The export was cut or edited: export the log again. \(nothing)"
            case .missingCause(let n, let cursor, let cause, let last):
                return "Line \(n): delivery \(cursor) was caused by event seq \(cause), but the export's events end at seq \(last). "
                    + "The export lacks its last events: export the log again. \(nothing)"
            case .store(let e): return "\(e.oneShotDescription) \(nothing)"
            case .noEnd(let lines):
                return "The export ends without its end line (after \(lines) lines): it was cut, so its last events or deliveries may be "
                    + "missing. Export the log again; an export written by an earlier Herald that wrote no end line "
                    + "is taken as it is by `herald import --allow-missing-end`. \(nothing)"
            case .endMismatch(let n, let expected, let found):
                return "Line \(n), the end line, counts \(expected.events) events and \(expected.deliveries) deliveries, but the export "
                    + "holds \(found.events) and \(found.deliveries): it was edited. Export the log again. \(nothing)"
            }
        }
    }

    /// Imports exported lines into an empty migrated database, keeping every position and byte.
    /// The export must end with its end line, unless `allowMissingEnd` (exports written by an
    /// earlier Herald have none).
    public static func `import`(_ connection: PGConnection, lines: some Sequence<String>,
                                allowMissingEnd: Bool = false) throws(ImportError) -> (events: Int, deliveries: Int) {
        // Not under a running service (it would not see the rows, and its own rules version row
        // is replaced below): the instance lock, held for the import only (given up after any
        // ROLLBACK below: in an aborted transaction the unlock itself would fail).
        do { try InstanceLock.take(connection, waitMilliseconds: 0) } catch { throw .store(error) }
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [String(InstanceLock.key)]) }
        do {
            guard try connection.execute("SELECT EXISTS (SELECT 1 FROM events) OR EXISTS (SELECT 1 FROM deliveries)").string(0, 0) == "f"
            else { throw ImportError.notEmpty }
            var partitions = try EventReader.partitioning(connection).count
            try connection.execute("BEGIN")
            // A start-up on the empty target recorded its own version: the imported log's replace it.
            try connection.execute("DELETE FROM rules_versions")
            var events = 0, deliveries = 0, number = 0
            // Export writes each partition's events in seq order from 1, then its deliveries in
            // cursor order from 1.
            var lastSeq: [Int: Int64] = [:], lastCursor: [Int: Int64] = [:]
            var header = false
            /// The partition a line names (0 when it names none), one of the target's.
            func partitionOf(_ o: JSONValue, _ number: Int) throws(ImportError) -> Int {
                guard let named = o["partition"] else { return 0 }
                guard let p = named.intValue, p >= 0, p < Int64(partitions) else {
                    throw ImportError.badLine(number, "partition \(named.canonicalString) is not one of the \(partitions) partitions the export declares")
                }
                return Int(p)
            }
            var ended = false
            // Content is sealed again, under keys of this database (`ImportSealing`).
            var sealing = ImportSealing(connection)
            for line in lines {
                number += 1
                if line.isEmpty { continue }
                guard let v = try? JSONValue.parse(line) else { throw ImportError.badLine(number, "not JSON") }
                guard !ended else { throw ImportError.badLine(number, "a line after the end line; an export ends with it") }
                if let declared = v["partitions"] {
                    guard number == 1 || (events == 0 && deliveries == 0 && !header),
                          let count = declared["count"]?.intValue, count >= 1, count <= 1024,
                          declared["hash"]?.stringValue == Partitioning.hashName
                    else { throw ImportError.badLine(number, "a partitions line comes first, with a count of 1–1024 and hash \(Partitioning.hashName)") }
                    header = true
                    if Int(count) != partitions {
                        // The target is empty: it takes the export's P (as `herald migrate --partitions` would).
                        try connection.execute("SELECT herald_set_partitions($1::integer)", [String(count)])
                        partitions = Int(count)
                    }
                } else if let end = v["end"] {
                    guard let e = end["events"]?.intValue, let d = end["deliveries"]?.intValue
                    else { throw ImportError.badLine(number, "an end line needs events and deliveries") }
                    guard e == Int64(events), d == Int64(deliveries) else {
                        throw ImportError.endMismatch(line: number, expected: (e, d), found: (events, deliveries))
                    }
                    ended = true
                } else if let e = v["event"] {
                    guard let seq = e["seq"]?.intValue, let type = e["type"]?.stringValue, let body = e["body"]?.stringValue,
                          let at = e["engineTime"]?.stringValue else { throw ImportError.badLine(number, "an event needs seq, type, body, engineTime") }
                    let p = try partitionOf(e, number)
                    let last = lastSeq[p] ?? 0
                    guard seq == last + 1 else {
                        if seq > last + 1 { throw ImportError.gap(line: number, what: "event seq", expected: last + 1, found: seq) }
                        throw ImportError.badLine(number, "event seq \(seq) comes after seq \(last); an export lists events in seq order, each once")
                    }
                    lastSeq[p] = seq
                    let sealedBody = try sealing.event(body, type: type, user: e["user"]?.stringValue, sealed: e["sealed"] == true)
                    // The recipient index, where the export leaves it out (one partition), is the
                    // row's place among the rows of its (app, id) in seq order (one request's
                    // recipients), so it is counted here.
                    try connection.execute("""
                        INSERT INTO events (partition, seq, user_id, type, app, notification_id, body, engine_time, recipient_index)
                        VALUES ($8, $1, $2, $3, $4, $5, $6::json, $7,
                                coalesce($9::integer, (SELECT count(*) FROM events WHERE partition = $8 AND app = $4 AND notification_id = $5)))
                        """, [String(seq), e["user"]?.stringValue, type, e["app"]?.stringValue, e["notificationId"]?.stringValue, sealedBody, at,
                              String(p), e["recipientIndex"]?.intValue.map { String($0) }])
                    events += 1
                } else if let d = v["delivery"] {
                    guard let cursor = d["cursor"]?.intValue, let user = d["user"]?.stringValue, let index = d["userIndex"]?.intValue,
                          let cause = d["causeSeq"]?.intValue, let kind = d["kind"]?.stringValue, let reason = d["reason"]?.stringValue,
                          let at = d["at"]?.stringValue, let rules = d["rulesVersion"]?.stringValue, let trace = d["trace"]?.stringValue,
                          let body = d["body"]?.stringValue else { throw ImportError.badLine(number, "a delivery misses a field") }
                    let p = try partitionOf(d, number)
                    let last = lastCursor[p] ?? 0
                    guard cursor == last + 1 else {
                        if cursor > last + 1 { throw ImportError.gap(line: number, what: "delivery cursor", expected: last + 1, found: cursor) }
                        throw ImportError.badLine(number, "delivery cursor \(cursor) comes after cursor \(last); an export lists deliveries in cursor order, each once")
                    }
                    guard cause <= lastSeq[p] ?? 0 else {
                        throw ImportError.missingCause(line: number, cursor: cursor, causeSeq: cause, lastSeq: lastSeq[p] ?? 0)
                    }
                    lastCursor[p] = cursor
                    let sealedBody = try sealing.delivery(body, user: user, sealed: d["sealed"] == true)
                    try connection.execute("""
                        INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                                rules_version, trace, body)
                        VALUES ($13, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12::json)
                        """, [String(cursor), user, String(index), String(cause), kind, d["app"]?.stringValue,
                              d["notificationId"]?.stringValue, reason, at, rules, trace, sealedBody, String(p)])
                    deliveries += 1
                } else if let c = v["rules"] {
                    guard let from = c["fromSeq"]?.intValue, let at = c["at"]?.stringValue, let version = c["version"]?.stringValue
                    else { throw ImportError.badLine(number, "a rules line needs fromSeq, at, version") }
                    try connection.execute("INSERT INTO rules_versions (partition, from_seq, at, version) VALUES ($4, $1, $2, $3)",
                                           [String(from), at, version, String(try partitionOf(c, number))])
                } else {
                    throw ImportError.badLine(number, "neither an event, a delivery, a rules version nor the end line")
                }
            }
            guard ended || allowMissingEnd else { throw ImportError.noEnd(lines: number) }
            for (p, seq) in lastSeq { try connection.execute("UPDATE partitions SET seq = $2 WHERE partition = $1", [String(p), String(seq)]) }
            for (p, cursor) in lastCursor { try connection.execute("UPDATE delivery_heads SET cursor = $2 WHERE partition = $1", [String(p), String(cursor)]) }
            try connection.execute("COMMIT")
            return (events, deliveries)
        } catch let error as ImportError {
            _ = try? connection.execute("ROLLBACK")
            throw error
        } catch let error as StoreError {
            _ = try? connection.execute("ROLLBACK")
            throw .store(error)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw .badLine(0, "\(error)")
        }
    }
}
