// The partition function of SPEC §9: FNV-1a 64 of the user id's UTF-8 bytes, modulo the partition count.

public enum Partitioning {
    /// FNV-1a, 64-bit: offset basis 0xcbf29ce484222325, prime 0x100000001b3.
    public static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// The partition of `user` among `partitions` (0 when there is one).
    public static func partition(ofUser user: String, partitions: Int) -> Int {
        guard partitions > 1 else { return 0 }
        return Int(fnv1a64(user.utf8) % UInt64(partitions))
    }
}
