// Sealed content on the service's side: each user's key in memory, sealing rows before they are stored, erasing keys.
import HeraldCore
import HeraldStore

/// The content keys the service seals with and opens with (schema/006_user_keys.sql). Every key is
/// read once at start-up; a user's first content creates one (a blocking insert on a connection
/// of its own, once per user); `erase` rotates and then deletes them.
final class ContentKeys {
    /// Every key this process knows: those stored at start-up and those it created since.
    var ring = KeyRing()
    /// Users with an erasure admitted and not yet folded → the generation it erases (and below).
    /// Their events are sealed under a new key already; their deliveries, decided before the
    /// erasure folds, still under the old one, so the erasure makes those unreadable too.
    var erasing: [String: Int64] = [:]
    /// The connection that inserts and deletes keys, opened when first needed.
    var connection: PGConnection?
    /// Keys created and erased by this process (stats, tests).
    var created = 0
    var erased = 0
}

extension HeraldService {
    /// Reads every stored key (start-up, before the log is folded).
    func loadContentKeys(_ conn: PGConnection) throws {
        contentKeys.ring = try KeyRing.load(conn)
    }

    /// The key connection, opened on first use.
    private func keyConnection() throws(StoreError) -> PGConnection {
        if let c = contentKeys.connection { return c }
        let c = try PGConnection.connect(configuration.databaseURL)
        try UserKeyStore.prepare(c)
        contentKeys.connection = c
        return c
    }

    /// Creates and remembers a new key for `user`.
    private func createKey(user: String) throws(StoreError) -> ContentKey {
        do {
            let key = try UserKeyStore.create(try keyConnection(), user: user)
            contentKeys.ring.add(user: user, key)
            contentKeys.created += 1
            return key
        } catch {
            contentKeys.connection?.close()
            contentKeys.connection = nil
            throw error
        }
    }

    /// Seals a row about to be appended: a submit's content under its user's newest key. A user's
    /// first event (of any type) creates the key, as does the first after an erasure was
    /// admitted (that user's events are then sealed under the new key). An `erase` records the
    /// generation it erases and turns the user's later events to a new key. Other rows are
    /// unchanged. Throws when a key cannot be created (PostgreSQL is unreachable): nothing is stored.
    func sealForStore(_ row: inout EventRow) throws(StoreError) {
        guard configuration.sealsContent, let user = row.user else { return }
        if row.type != "erase" {
            var key = contentKeys.ring.newest(user: user)
            if key == nil || key!.generation <= (contentKeys.erasing[user] ?? 0) { key = try createKey(user: user) }
            if row.type == "submit" { row.bodyBytes = ContentSeal.sealSubmit(row.bodyBytes, key: key!) }
        } else {
            let generation = max(contentKeys.ring.newest(user: user)?.generation ?? 0, contentKeys.erasing[user] ?? 0)
            contentKeys.erasing[user] = generation
            row.bodyBytes = JSONValue.object(["user": .string(user), "generation": .int(generation)]).canonicalBytes
        }
    }

    /// The stored form of a delivery's body (sealed when it has content), for a row whose live
    /// consumers get `body` itself.
    func sealedDeliveryBody(_ body: [UInt8], user: String) -> [UInt8] {
        guard configuration.sealsContent, body.withUnsafeBytes({ ContentSeal.contains($0, Self.contentMember) }) else { return body }
        let key: ContentKey
        if let g = contentKeys.erasing[user], let bytes = contentKeys.ring.key(user: user, generation: g) {
            key = ContentKey(generation: g, bytes: bytes)
        } else if let newest = contentKeys.ring.newest(user: user), newest.generation > (contentKeys.erasing[user] ?? 0) {
            key = newest
        } else {
            do {
                key = try createKey(user: user)
            } catch {
                // Only a user whose content was erased (or who has none) meets this: what it
                // would seal is erased already.
                log("warning: no content key for \(user) (\(error)); the delivery is stored unsealed")
                return body
            }
        }
        return ContentSeal.sealDelivery(body, key: key)
    }

    private static let contentMember = Array("\"content\":".utf8)

    /// An `erase` folded (live or at start-up): the user's state carries no content now; the keys
    /// of the generations it names are deleted, so every stored copy of that content is
    /// unreadable, and snapshots captured before it (which hold the content that was pending)
    /// are deleted. Retried at the next start-up when PostgreSQL cannot be reached now.
    func erasureFolded(_ event: StoredEvent) {
        guard let user = event.user else { return }
        let generation = event.body["generation"]?.intValue ?? contentKeys.erasing[user] ?? contentKeys.ring.newest(user: user)?.generation ?? 0
        do {
            let conn = try keyConnection()
            let deleted = try UserKeyStore.erase(conn, user: user, through: generation)
            if try SnapshotStore.deleteSnapshotsOfRetainedPartition(conn, partition: partition, before: event.seq) {
                // Restart needs a snapshot here: the latest stays until the one begun now replaces it.
                restart.snapshotWanted = true
            } else {
                try SnapshotStore.deleteSnapshots(conn, partition: partition, before: event.seq)
            }
            contentKeys.ring.remove(user: user, through: generation)
            if contentKeys.erasing[user] == generation { contentKeys.erasing[user] = nil }
            contentKeys.erased += 1
            log("erased the content of \(user): \(deleted) key(s) through generation \(generation) deleted (event \(event.seq))")
        } catch {
            log("warning: erasing \(user)'s keys failed (\(error)); the erasure is stored (event \(event.seq)) and its keys are deleted at the next start-up")
        }
    }

    /// `body` as stored, opened with `user`'s key (erased form without it): lean content read back.
    func readableBody(_ body: [UInt8], user: String) -> [UInt8] {
        contentKeys.ring.readable(body, user: user)
    }
}

extension HeraldService {
    /// A delivery row as stored: its body sealed, the body in clear kept for live consumers.
    func sealed(_ row: DeliveryRow) -> DeliveryRow {
        var row = row
        let stored = sealedDeliveryBody(row.bodyBytes, user: row.user)
        if stored != row.bodyBytes {
            row.liveBody = row.bodyBytes
            row.bodyBytes = stored
        }
        return row
    }
}
