// Ordinals by string key, for a table whose rows hold their own keys (the service's users by id).

/// Where a key's row is, in one array of 8-byte slots: each holds the top 32 bits of the key's
/// hash (its tag) and the row's ordinal. A look-up reads its slot — and, on a matching tag, the
/// row it names, which the caller reads next anyway — where a `Dictionary<String, Int>` reads its
/// occupancy bitmap, its keys and then its values: at a million users a look-up and its row
/// take about half a `Dictionary`'s time, the reason it is hand-written. Keys hash with the process's
/// seeded hasher (`String.hashValue`), so ids cannot be chosen to collide any more than in a
/// `Dictionary`. Linear probing, at most half full; ordinals are never removed, only all at once.
public struct OrdinalIndex: Sendable {
    /// 0: empty; else `tag << 32 | (ordinal + 1)`. The slot of a tag is `tag & mask` (first try).
    private var slots: [UInt64]
    private var mask: Int
    /// Ordinals held.
    public private(set) var count = 0

    /// An empty index for at least `minimumCapacity` ordinals before it grows.
    public init(minimumCapacity: Int = 0) {
        let size = Self.size(for: minimumCapacity)
        slots = [UInt64](repeating: 0, count: size)
        mask = size - 1
    }

    /// Slots for `n` ordinals: a power of two, at least twice `n`, at least 16.
    private static func size(for n: Int) -> Int {
        var size = 16
        while size < 2 * n { size <<= 1 }
        return size
    }

    @inline(__always)
    private static func tag(_ key: String) -> UInt64 {
        UInt64(bitPattern: Int64(key.hashValue)) >> 32
    }

    /// The ordinal of `key`, nil when it has none. `isKey(o)` says whether ordinal `o`'s row has
    /// `key` (asked only for ordinals whose tag matches).
    @inline(__always)
    public func ordinal(of key: String, isKey: (Int) -> Bool) -> Int? {
        find(tag: Self.tag(key), isKey: isKey)
    }

    @inline(__always)
    private func find(tag: UInt64, isKey: (Int) -> Bool) -> Int? {
        slots.withUnsafeBufferPointer { s in
            var i = Int(truncatingIfNeeded: tag) & mask
            while true {
                let slot = s[i]
                if slot == 0 { return nil }
                if slot >> 32 == tag {
                    let o = Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1
                    if isKey(o) { return o }
                }
                i = (i + 1) & mask
            }
        }
    }

    /// Adds `ordinal` for `key`, which must have none yet (ask `ordinal(of:isKey:)` first).
    public mutating func insert(_ key: String, ordinal: Int) {
        insert(tag: Self.tag(key), ordinal: ordinal)
    }

    /// `key`'s ordinal when it has one (nothing added); else adds `ordinal` for it and returns
    /// nil — one hash of the key for both (`isKey` as in `ordinal(of:isKey:)`).
    public mutating func ordinal(of key: String, orInsert ordinal: Int, isKey: (Int) -> Bool) -> Int? {
        let tag = Self.tag(key)
        if let found = find(tag: tag, isKey: isKey) { return found }
        insert(tag: tag, ordinal: ordinal)
        return nil
    }

    private mutating func insert(tag: UInt64, ordinal: Int) {
        precondition(ordinal >= 0 && ordinal < Int(UInt32.max), "OrdinalIndex holds ordinals below 2^32 - 1")
        if 2 * (count + 1) > slots.count { grow(to: 2 * slots.count) }
        place(tag << 32 | UInt64(ordinal + 1))
        count += 1
    }

    /// Room for `n` ordinals without growing.
    public mutating func reserveCapacity(_ n: Int) {
        let size = Self.size(for: n)
        if size > slots.count { grow(to: size) }
    }

    /// Forgets every ordinal.
    public mutating func removeAll() {
        self = OrdinalIndex()
    }

    private mutating func place(_ slot: UInt64) {
        let m = mask
        slots.withUnsafeMutableBufferPointer { s in
            var i = Int(truncatingIfNeeded: slot >> 32) & m
            while s[i] != 0 { i = (i + 1) & m }
            s[i] = slot
        }
    }

    /// Rehashes into `size` slots: a slot's tag gives its new place, so no key is read again.
    private mutating func grow(to size: Int) {
        let old = slots
        slots = [UInt64](repeating: 0, count: size)
        mask = size - 1
        for slot in old where slot != 0 { place(slot) }
    }
}
