// The `user_keys` table: creating a user's content key, and erasing a user's keys.
import CCrypto
import HeraldCore

/// Blocking statements on `user_keys` (schema/006_user_keys.sql).
public enum UserKeyStore {
    /// Creates and stores a fresh random key for `user`, returning it with its generation.
    ///
    /// Committed with `synchronous_commit = off` on `connection`: no WAL flush of its own. It still
    /// survives any crash that keeps a row sealed under it, because the sealed row is appended
    /// after this commit returns, by a transaction whose synchronous commit flushes the WAL up to
    /// its own commit record, past this one's.
    public static func create(_ connection: PGConnection, user: String) throws(StoreError) -> ContentKey {
        let bytes = randomKey()
        let r = try connection.execute("""
            INSERT INTO user_keys (user_id, key) VALUES ($1, decode($2, 'hex')) RETURNING generation
            """, [user, hex(bytes)])
        return ContentKey(generation: r.int64(0, 0) ?? 0, bytes: bytes)
    }

    /// Turns off synchronous commit for the key inserts of `connection` (see `create`).
    public static func prepare(_ connection: PGConnection) throws(StoreError) {
        _ = try connection.execute("SET synchronous_commit TO off")
    }

    /// Deletes `user`'s keys of `generation` and below (synchronously committed): their content is
    /// erased. Returns how many keys were deleted.
    @discardableResult
    public static func erase(_ connection: PGConnection, user: String, through generation: Int64) throws(StoreError) -> Int {
        let r = try connection.execute("""
            WITH gone AS (DELETE FROM user_keys WHERE user_id = $1 AND generation <= $2::bigint RETURNING 1)
            SELECT count(*) FROM gone
            """, [user, String(generation)])
        return Int(r.int64(0, 0) ?? 0)
    }

    /// 32 bytes from libcrypto's random generator (seeded from the operating system).
    public static func randomKey() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: ContentCipher.keyLength)
        let ok = RAND_bytes(&bytes, Int32(bytes.count))
        precondition(ok == 1, "libcrypto could not produce random bytes for a content key")
        return bytes
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes from PostgreSQL's text form of a bytea (`\x` and hex digits).
    static func bytes(fromHex text: String) -> [UInt8]? {
        var chars = Array(text.utf8)
        if chars.starts(with: [92, 120]) { chars.removeFirst(2) }
        guard chars.count % 2 == 0 else { return nil }
        func v(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            guard let h = v(chars[i]), let l = v(chars[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }
}
