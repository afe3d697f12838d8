// AES-256-GCM through libcrypto: the sealed content of a user's events and deliveries.
import CCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Seals and opens bytes under a user's 32-byte key. Pure: the same bytes and key give the same
/// result, with no I/O; the per-thread contexts it reuses (`ThreadCipherContexts`) are a cache.
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
        plaintext.withUnsafeBytes { p in
            [UInt8](unsafeUninitializedCapacity: sealedLength(p.count)) { out, count in
                seal(p, key: key, nonceKey: nonceKey, into: UnsafeMutableRawBufferPointer(out))
                count = sealedLength(p.count)
            }
        }
    }

    /// The length of `seal`'s result for a plaintext of `count` bytes.
    static func sealedLength(_ count: Int) -> Int { nonceLength + count + tagLength }

    /// Writes nonce ‖ ciphertext ‖ tag of `plaintext` into `out` (`sealedLength` bytes), with this
    /// thread's cipher context (`ThreadCipherContexts`).
    static func seal(_ plaintext: UnsafeRawBufferPointer, key: [UInt8], nonceKey: [UInt8], into out: UnsafeMutableRawBufferPointer) {
        precondition(key.count == keyLength, "a content key is 32 bytes")
        precondition(out.count >= sealedLength(plaintext.count))
        let o = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let contexts = ThreadCipherContexts.current
        // The synthetic nonce: SHA-256 of nonce key ‖ plaintext, its first 12 bytes.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(SHA256_DIGEST_LENGTH)) { digest in
            var length: UInt32 = 0
            _ = EVP_DigestInit_ex(contexts.digest, SHA256.algorithm, nil)
            _ = nonceKey.withUnsafeBytes { EVP_DigestUpdate(contexts.digest, $0.baseAddress, $0.count) }
            if plaintext.count > 0 { _ = EVP_DigestUpdate(contexts.digest, plaintext.baseAddress, plaintext.count) }
            _ = EVP_DigestFinal_ex(contexts.digest, digest.baseAddress, &length)
            o.update(from: digest.baseAddress!, count: nonceLength)
        }
        let ctx = contexts.sealing
        if contexts.sealingKey == key {
            _ = EVP_EncryptInit_ex(ctx, nil, nil, nil, o)
        } else {
            _ = EVP_EncryptInit_ex(ctx, gcm, nil, key, o)
            contexts.sealingKey = key
        }
        var written: Int32 = 0
        _ = EVP_EncryptUpdate(ctx, o + nonceLength, &written, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count))
        var final: Int32 = 0
        _ = EVP_EncryptFinal_ex(ctx, o + nonceLength + Int(written), &final)
        _ = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), o + nonceLength + plaintext.count)
    }

    /// The plaintext of `sealed` (from `seal`), nil when the key is not the one that sealed it or the
    /// bytes were changed.
    public static func open(_ sealed: [UInt8], key: [UInt8]) -> [UInt8]? {
        guard key.count == keyLength, sealed.count >= nonceLength + tagLength else { return nil }
        let length = sealed.count - nonceLength - tagLength
        var out = [UInt8](repeating: 0, count: max(length, 1))
        let ctx = ThreadCipherContexts.current.opening
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

/// One encryption, one decryption and one digest context per thread, reused from call to call: a context
/// made and freed per call (and the key schedule set up again for the same key) cost about as
/// much as the cipher's work on a body. The sealing context keeps the schedule of the last key it
/// sealed under, as the key ring keeps the keys themselves in memory.
final class ThreadCipherContexts {
    let sealing = EVP_CIPHER_CTX_new()!
    let opening = EVP_CIPHER_CTX_new()!
    let digest = EVP_MD_CTX_new()!
    var sealingKey: [UInt8] = []

    deinit {
        EVP_CIPHER_CTX_free(sealing)
        EVP_CIPHER_CTX_free(opening)
        EVP_MD_CTX_free(digest)
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { p in
            if let p { Unmanaged<ThreadCipherContexts>.fromOpaque(p).release() }
        }
        return key
    }()

    /// This thread's contexts, made on first use and freed when the thread ends.
    static var current: ThreadCipherContexts {
        if let p = pthread_getspecific(slot) { return Unmanaged<ThreadCipherContexts>.fromOpaque(p).takeUnretainedValue() }
        let contexts = ThreadCipherContexts()
        pthread_setspecific(slot, Unmanaged.passRetained(contexts).toOpaque())
        return contexts
    }
}
