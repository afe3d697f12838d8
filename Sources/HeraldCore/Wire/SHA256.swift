// SHA-256 by OpenSSL's libcrypto: the tokens file stores token digests, not tokens.
import CCrypto

/// SHA-256 of access tokens (a few dozen bytes, once per hello). A pure function: libcrypto's
/// digest keeps no state and does no I/O, so the core stays free of I/O while using
/// the well-kept implementation the TLS layer already links.
public enum SHA256 {
    /// The 32-byte digest of `message`.
    public static func digest(_ message: some Sequence<UInt8>) -> [UInt8] {
        let bytes = Array(message)
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, algorithm, nil)
            }
        }
        return out
    }

    /// SHA-256, fetched from libcrypto's default provider once (the one-shot `SHA256()` of
    /// OpenSSL 3 fetches it by name, under a lock, on every call).
    nonisolated(unsafe) static let algorithm: OpaquePointer = EVP_MD_fetch(nil, "SHA256", nil)!

    /// The digest as 64 lowercase hex digits.
    public static func hex(_ message: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in digest(message) { out.append(digits[Int(byte >> 4)]); out.append(digits[Int(byte & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
