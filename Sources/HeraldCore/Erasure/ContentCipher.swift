// AES-256-GCM through libcrypto: the sealed content of a user's events and deliveries.
import CCrypto

/// Seals and opens bytes under a user's 32-byte key. Pure: libcrypto's cipher contexts keep no
/// state between calls and do no I/O.
///
/// The nonce is synthetic: the first 12 bytes of SHA-256 of a nonce key (derived from the content
/// key) followed by the plaintext. The same plaintext under the same key seals to the same bytes,
/// which the log needs: a client's retry of a submit is recognised as a duplicate by comparing
/// stored bodies byte for byte. Different plaintexts get different nonces (a collision needs
/// ~2^48 messages under one user's key), so GCM's one-nonce-one-message rule holds. The nonce is
/// stored in clear, so it must not let anyone confirm a guessed plaintext: the secret nonce key
/// in the hash prevents that, also after the key is erased. What an observer learns is only which
/// sealed values are equal, as with any deterministic encryption.
public enum ContentCipher {
    public static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    /// AES-256-GCM, fetched from libcrypto's default provider once: fetching it by name on every
    /// call (what `EVP_aes_256_gcm()` does in OpenSSL 3) takes locks and compares strings each time.
    nonisolated(unsafe) private static let gcm: OpaquePointer = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)!

    /// nonce ‖ ciphertext ‖ tag of `plaintext` under `key` (32 bytes).
    public static func seal(_ plaintext: [UInt8], key: [UInt8]) -> [UInt8] {
        seal(plaintext, key: key, nonceKey: nonceKey(key))
    }

    /// `seal` with the nonce key derived already (`ContentKey` keeps it).
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonceKey: [UInt8]) -> [UInt8] {
        precondition(key.count == keyLength, "a content key is 32 bytes")
        let nonce = SHA256.digest(nonceKey + plaintext)
        var out = [UInt8](repeating: 0, count: nonceLength + plaintext.count + tagLength)
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var written: Int32 = 0
        out.withUnsafeMutableBufferPointer { o in
            for i in 0..<nonceLength { o[i] = nonce[i] }
            _ = EVP_EncryptInit_ex(ctx, gcm, nil, key, nonce)
            plaintext.withUnsafeBufferPointer { p in
                _ = EVP_EncryptUpdate(ctx, o.baseAddress! + nonceLength, &written, p.baseAddress, Int32(p.count))
            }
            var final: Int32 = 0
            _ = EVP_EncryptFinal_ex(ctx, o.baseAddress! + nonceLength + Int(written), &final)
            _ = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), o.baseAddress! + nonceLength + plaintext.count)
        }
        return out
    }

    /// The plaintext of `sealed` (from `seal`), nil when the key is not the one that sealed it or the
    /// bytes were changed.
    public static func open(_ sealed: [UInt8], key: [UInt8]) -> [UInt8]? {
        guard key.count == keyLength, sealed.count >= nonceLength + tagLength else { return nil }
        let length = sealed.count - nonceLength - tagLength
        var out = [UInt8](repeating: 0, count: max(length, 1))
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        let ok: Bool = sealed.withUnsafeBufferPointer { s in
            out.withUnsafeMutableBufferPointer { o in
                var written: Int32 = 0
                guard EVP_DecryptInit_ex(ctx, gcm, nil, key, s.baseAddress) == 1,
                      EVP_DecryptUpdate(ctx, o.baseAddress, &written, s.baseAddress! + nonceLength, Int32(length)) == 1
                else { return false }
                var tag = Array(s[(nonceLength + length)...])
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else { return false }
                var final: Int32 = 0
                return EVP_DecryptFinal_ex(ctx, o.baseAddress! + Int(written), &final) == 1
            }
        }
        guard ok else { return nil }
        return Array(out.prefix(length))
    }

    /// The key the nonces are derived under: SHA-256 of a label and the content key, so the
    /// content key itself is used by AES only.
    static func nonceKey(_ key: [UInt8]) -> [UInt8] {
        SHA256.digest(Array("herald content nonce\u{0}".utf8) + key)
    }
}
