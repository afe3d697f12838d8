// SHA-256 (FIPS 180-4) in plain Swift: the tokens file stores token digests, not tokens.

/// A small SHA-256 for hashing access tokens (a few dozen bytes, once per hello). Not tuned for
/// bulk data. HeraldCore stays free of C, so this does not call libcrypto; tests check it
/// against the FIPS 180-4 vectors and against `openssl dgst -sha256`.
public enum SHA256 {
    /// The 32-byte digest of `message`.
    public static func digest(_ message: some Sequence<UInt8>) -> [UInt8] {
        var bytes = Array(message)
        pad(&bytes)
        var w = [UInt32](repeating: 0, count: 64)
        let h = bytes.withUnsafeBufferPointer { m in w.withUnsafeMutableBufferPointer { words(ofPadded: m, schedule: $0) } }
        return (0..<8).flatMap { i in (0..<4).map { UInt8(truncatingIfNeeded: h[i] >> UInt32(24 - 8 * $0)) } }
    }

    /// Appends the FIPS 180-4 padding to a message in place: 0x80, zeros, the length in bits.
    private static func pad(_ bytes: inout [UInt8]) {
        let bitLength = UInt64(bytes.count) &* 8
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        withUnsafeBytes(of: bitLength.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// The eight digest words of a padded message (`pad`), with `w` (64 words) as the message schedule.
    private static func words(ofPadded m: UnsafeBufferPointer<UInt8>, schedule w: UnsafeMutableBufferPointer<UInt32>) -> SIMD8<UInt32> {
        var h0: UInt32 = 0x6a09e667, h1: UInt32 = 0xbb67ae85, h2: UInt32 = 0x3c6ef372, h3: UInt32 = 0xa54ff53a
        var h4: UInt32 = 0x510e527f, h5: UInt32 = 0x9b05688c, h6: UInt32 = 0x1f83d9ab, h7: UInt32 = 0x5be0cd19
        k.withUnsafeBufferPointer { k in
            var chunk = 0
            while chunk + 64 <= m.count {
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
        return SIMD8(h0, h1, h2, h3, h4, h5, h6, h7)
    }

    /// The digest as 64 lowercase hex digits.
    public static func hex(_ message: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in digest(message) { out.append(digits[Int(byte >> 4)]); out.append(digits[Int(byte & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    @inline(__always) private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

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
