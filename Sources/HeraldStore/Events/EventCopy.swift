// The writer's COPY fast path: rows of `events` in PostgreSQL's binary COPY format, with their idempotency keys.

/// Binary `COPY events (…) FROM STDIN (FORMAT binary)` data for a batch whose positions are
/// known (base + 1 … base + n, claimed by `UPDATE event_head … RETURNING` in the same
/// transaction). Binary: no escaping on either side; text fields still pass the server's encoding
/// check (a NUL byte is refused, not truncated) and `json` fields its JSON check.
enum EventCopy {
    /// The COPY's column list, in the order `encode` writes the fields.
    static let columns = "seq, user_id, type, app, notification_id, idempotency_key, body, engine_time"

    /// The simple query that opens a COPY transaction for `count` rows: claims the positions, then
    /// starts the COPY. With `commit`, COMMIT follows the COPY in the same query (the server runs
    /// it once the data has ended). `count` is an integer Herald formats; nothing else varies.
    static func startQuery(count: Int, commit: Bool) -> String {
        "BEGIN;UPDATE event_head SET seq = seq + \(count) RETURNING seq - \(count);"
            + "COPY events (\(columns)) FROM STDIN (FORMAT binary)" + (commit ? ";COMMIT" : "")
    }

    private static let signature: [UInt8] = [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00]

    /// The whole COPY data for `rows` at base + 1 …: header, one tuple per row, trailer.
    static func encode(_ rows: some Collection<EventRow>, base: Int64) -> [UInt8] {
        var capacity = 32
        for r in rows {
            capacity += 2 + 8 * 4 + 8 + 16 + 8 + r.body.utf8.count + r.type.utf8.count
                + (r.user?.utf8.count ?? 0) + (r.app?.utf8.count ?? 0) + (r.notificationId?.utf8.count ?? 0)
        }
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out += signature
        be32(0, &out)          // flags: no OIDs
        be32(0, &out)          // header extension length
        var hasher = IdempotencyKey.Hasher()
        var seq = base
        for r in rows {
            seq += 1
            be16(8, &out)
            be32(8, &out); be64(UInt64(bitPattern: seq), &out)
            text(r.user, &out)
            text(r.type, &out)
            text(r.app, &out)
            text(r.notificationId, &out)
            if let user = r.user, let app = r.app, let id = r.notificationId {
                be32(16, &out)
                hasher.appendKey(user: user, app: app, id: id, to: &out)
            } else {
                be32(UInt32(bitPattern: -1), &out)
            }
            text(r.body, &out)
            be32(8, &out)
            be64(UInt64(bitPattern: (r.engineTime.millisecondsSinceEpoch - PGBinaryParameters.postgresEpochMilliseconds) * 1000), &out)
        }
        be16(0xFFFF, &out)     // trailer: field count -1
        return out
    }

    @inline(__always) private static func text(_ value: String?, _ out: inout [UInt8]) {
        guard var value else { be32(UInt32(bitPattern: -1), &out); return }
        value.withUTF8 { utf8 in
            be32(UInt32(utf8.count), &out)
            out.append(contentsOf: utf8)
        }
    }

    @inline(__always) private static func be16(_ v: UInt16, _ out: inout [UInt8]) {
        out.append(UInt8(v >> 8)); out.append(UInt8(v & 0xFF))
    }

    @inline(__always) private static func be32(_ v: UInt32, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }

    @inline(__always) private static func be64(_ v: UInt64, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }
}

/// The idempotency key of an event: the first 16 bytes of SHA-256(user ‖ 0x00 ‖ app ‖ 0x00 ‖ id),
/// exactly as `herald_idempotency_key` computes it in SQL (schema/004_copy_append.sql); no key when
/// any part is missing. NUL never occurs in a stored text value, so the separators are unambiguous.
public enum IdempotencyKey {
    /// The key as 16 bytes, or nil when the row has no user, app or notification id.
    public static func bytes(user: String?, app: String?, id: String?) -> [UInt8]? {
        guard let user, let app, let id else { return nil }
        var hasher = Hasher()
        var out: [UInt8] = []
        hasher.appendKey(user: user, app: app, id: id, to: &out)
        return out
    }

    /// SHA-256 without allocations per key: the message and the schedule live in buffers reused
    /// for a whole batch (the writer hashes one key per submit on the service's thread).
    struct Hasher {
        private var message: [UInt8] = []
        private var w = [UInt32](repeating: 0, count: 64)

        init() { message.reserveCapacity(256) }

        /// Appends the 16-byte key of (user, app, id) to `out`.
        mutating func appendKey(user: String, app: String, id: String, to out: inout [UInt8]) {
            message.removeAll(keepingCapacity: true)
            var user = user, app = app, id = id
            user.withUTF8 { message.append(contentsOf: $0) }
            message.append(0)
            app.withUTF8 { message.append(contentsOf: $0) }
            message.append(0)
            id.withUTF8 { message.append(contentsOf: $0) }
            let bitLength = UInt64(message.count) &* 8
            message.append(0x80)
            while message.count % 64 != 56 { message.append(0) }
            withUnsafeBytes(of: bitLength.bigEndian) { message.append(contentsOf: $0) }

            var h0: UInt32 = 0x6a09e667, h1: UInt32 = 0xbb67ae85, h2: UInt32 = 0x3c6ef372, h3: UInt32 = 0xa54ff53a
            var h4: UInt32 = 0x510e527f, h5: UInt32 = 0x9b05688c, h6: UInt32 = 0x1f83d9ab, h7: UInt32 = 0x5be0cd19
            message.withUnsafeBufferPointer { m in
                w.withUnsafeMutableBufferPointer { w in
                    Self.k.withUnsafeBufferPointer { k in
                        var chunk = 0
                        while chunk < m.count {
                            for i in 0..<16 {
                                let j = chunk + i * 4
                                w[i] = UInt32(m[j]) << 24 | UInt32(m[j + 1]) << 16 | UInt32(m[j + 2]) << 8 | UInt32(m[j + 3])
                            }
                            for i in 16..<64 {
                                let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
                                let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
                                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
                            }
                            var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, hh = h7
                            for i in 0..<64 {
                                let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                                let ch = (e & f) ^ (~e & g)
                                let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
                                let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                                let maj = (a & b) ^ (a & c) ^ (b & c)
                                hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ s0 &+ maj
                            }
                            h0 = h0 &+ a; h1 = h1 &+ b; h2 = h2 &+ c; h3 = h3 &+ d
                            h4 = h4 &+ e; h5 = h5 &+ f; h6 = h6 &+ g; h7 = h7 &+ hh
                            chunk += 64
                        }
                    }
                }
            }
            // 16 bytes: the first four words, big-endian.
            withUnsafeBytes(of: h0.bigEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: h1.bigEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: h2.bigEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: h3.bigEndian) { out.append(contentsOf: $0) }
        }

        private static let k: [UInt32] = [
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
            0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
            0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
            0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
            0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
            0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
            0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
            0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
        ]
    }
}

@inline(__always) private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
