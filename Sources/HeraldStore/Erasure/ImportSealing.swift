// `herald import` seals the content it stores under keys of the target database, as the service does.
import HeraldCore

/// An export holds bodies opened (content in clear, or erased), each marked `"sealed":true` when it
/// was stored sealed; importing seals those again under a key created for the user in the target
/// database, in the import's transaction, so the imported log stays erasable. A row stored in
/// clear (before schema 006) is imported in clear, byte for byte. An imported `erase` event names the target's
/// generation it erased (the export's numbers mean nothing here), and the user's later content
/// gets a new key, as it did live.
struct ImportSealing {
    let connection: PGConnection
    var keys = KeyRing()
    /// Users whose last imported event is an erasure: their next content takes a new key.
    var erased: Set<String> = []

    init(_ connection: PGConnection) { self.connection = connection }

    mutating func event(_ body: String, type: String, user: String?, sealed: Bool) throws(StoreError) -> String {
        guard let user else { return body }
        if type == "erase" {
            erased.insert(user)
            let generation = keys.newest(user: user)?.generation ?? 0
            return JSONValue.object(["user": .string(user), "generation": .int(generation)]).canonicalString
        }
        guard type == "submit", sealed else { return body }
        return String(decoding: ContentSeal.sealSubmit(Array(body.utf8), key: try key(user)), as: UTF8.self)
    }

    mutating func delivery(_ body: String, user: String, sealed: Bool) throws(StoreError) -> String {
        let bytes = Array(body.utf8)
        guard sealed, bytes.withUnsafeBytes({ ContentSeal.contains($0, Array("\"content\":".utf8)) }) else { return body }
        return String(decoding: ContentSeal.sealDelivery(bytes, key: try key(user)), as: UTF8.self)
    }

    private mutating func key(_ user: String) throws(StoreError) -> ContentKey {
        if let k = keys.newest(user: user), !erased.contains(user) { return k }
        erased.remove(user)
        let k = try UserKeyStore.create(connection, user: user)
        keys.add(user: user, k)
        return k
    }
}
