// The top-level members of a canonical JSON object as byte ranges: sealing splices them without building a tree.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A canonical JSON object's members (sorted keys, no whitespace), each as the range of its key's
/// bytes (without quotes) and of its value's bytes. Sealing and opening move whole members between
/// the clear body and the sealed one: copying the bytes keeps them canonical, and a sorted subset
/// (or a merge by key) of sorted members is still sorted, so no value is parsed or encoded again.
struct CanonicalMembers {
    struct Member {
        var key: Range<Int>
        var value: Range<Int>
    }

    let bytes: UnsafeRawBufferPointer
    private(set) var members: [Member] = []

    /// Nil when `bytes` is not an object of that shape, or a key has an escape (the caller then
    /// takes the tree path, which handles any JSON).
    init?(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        let n = bytes.count
        guard n >= 2, bytes[0] == UInt8(ascii: "{"), bytes[n - 1] == UInt8(ascii: "}") else { return nil }
        if n == 2 { return }
        members.reserveCapacity(16)
        var i = 1
        while true {
            guard i < n, bytes[i] == UInt8(ascii: "\""), let keyEnd = Self.stringEnd(bytes, from: i) else { return nil }
            let key = (i + 1)..<keyEnd
            for j in key where bytes[j] == UInt8(ascii: "\\") { return nil }
            i = keyEnd + 1
            guard i < n, bytes[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            guard let valueEnd = Self.valueEnd(bytes, from: i) else { return nil }
            members.append(Member(key: key, value: i..<valueEnd))
            i = valueEnd
            guard i < n else { return nil }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard bytes[i] == UInt8(ascii: "}"), i == n - 1 else { return nil }
            return
        }
    }

    /// Whether member `m`'s key is `name`.
    func key(_ m: Member, is name: StaticString) -> Bool {
        guard m.key.count == name.utf8CodeUnitCount else { return false }
        let p = name.utf8Start
        for (k, j) in m.key.enumerated() where bytes[j] != p[k] { return false }
        return true
    }

    /// The member named `name`.
    func member(_ name: StaticString) -> Member? { members.first { key($0, is: name) } }

    /// The position of the closing quote of the string opening at `q`: the next quote found by
    /// `memchr` that an even number of backslashes precedes.
    static func stringEnd(_ b: UnsafeRawBufferPointer, from q: Int) -> Int? {
        guard let base = b.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var j = q + 1
        while j < b.count {
            guard let found = memchr(base + j, Int32(UInt8(ascii: "\"")), b.count - j) else { return nil }
            let k = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            var slashes = 0
            while k - slashes - 1 > q && base[k - slashes - 1] == UInt8(ascii: "\\") { slashes += 1 }
            if slashes % 2 == 0 { return k }
            j = k + 1
        }
        return nil
    }

    /// The end (exclusive) of the value starting at `s`.
    static func valueEnd(_ b: UnsafeRawBufferPointer, from s: Int) -> Int? {
        guard s < b.count else { return nil }
        switch b[s] {
        case UInt8(ascii: "\""):
            return stringEnd(b, from: s).map { $0 + 1 }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var j = s
            while j < b.count {
                let c = b[j]
                if c == UInt8(ascii: "\"") {
                    guard let e = stringEnd(b, from: j) else { return nil }
                    j = e + 1
                    continue
                }
                if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
                else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { return j + 1 }
                }
                j += 1
            }
            return nil
        default:
            var j = s
            while j < b.count, b[j] != UInt8(ascii: ","), b[j] != UInt8(ascii: "}"), b[j] != UInt8(ascii: "]") { j += 1 }
            return j > s ? j : nil
        }
    }
}

/// Members being assembled into a canonical object: each a key and its value's bytes, written in
/// key order (bytes compared, as canonical JSON sorts keys). Members of a source body are kept as
/// views of its bytes (no copy until `object()`), valid while that body's buffer is. A value (not
/// a class): no allocation of its own, and no run-time exclusivity checks on every access.
struct MemberList {
    /// A member's value: a view of a source body's bytes, or one of `owned`.
    private enum Value {
        case view(UnsafeRawBufferPointer)
        case owned(Int)
    }
    private var entries: [(key: UnsafeRawBufferPointer, value: Value)] = []
    /// The values of members added as arrays, kept with the list.
    private var owned: [[UInt8]] = []

    init() { entries.reserveCapacity(16) }

    var isEmpty: Bool { entries.isEmpty }

    /// A new member (its value kept, not copied).
    mutating func add(_ key: StaticString, _ value: [UInt8]) {
        owned.append(value)
        entries.append((UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount), .owned(owned.count - 1)))
    }

    mutating func add(_ m: CanonicalMembers.Member, of source: CanonicalMembers) {
        entries.append((UnsafeRawBufferPointer(rebasing: source.bytes[m.key]), .view(UnsafeRawBufferPointer(rebasing: source.bytes[m.value]))))
    }

    private func count(_ v: Value) -> Int {
        switch v {
        case .view(let b): b.count
        case .owned(let i): owned[i].count
        }
    }

    /// `{"k":v,…}` with the members sorted by key bytes.
    mutating func object() -> [UInt8] {
        entries.sort { $0.key.lexicographicallyPrecedes($1.key) }
        let total = entries.reduce(2) { $0 + $1.key.count + count($1.value) + 4 }
        return [UInt8](unsafeUninitializedCapacity: total) { out, written in
            var i = 0
            func put(_ b: UInt8) { out[i] = b; i += 1 }
            func put(_ bytes: UnsafeRawBufferPointer) {
                if let base = bytes.baseAddress, bytes.count > 0 {
                    UnsafeMutableRawPointer(out.baseAddress! + i).copyMemory(from: base, byteCount: bytes.count)
                }
                i += bytes.count
            }
            put(UInt8(ascii: "{"))
            for (n, e) in entries.enumerated() {
                if n > 0 { put(UInt8(ascii: ",")) }
                put(UInt8(ascii: "\""))
                put(e.key)
                put(UInt8(ascii: "\""))
                put(UInt8(ascii: ":"))
                switch e.value {
                case .view(let b): put(b)
                case .owned(let index): owned[index].withUnsafeBytes { put($0) }
                }
            }
            put(UInt8(ascii: "}"))
            written = i
        }
    }
}
