// A growable byte buffer for the canonical encoders: one capacity check per append, nothing else.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Where the canonical JSON writers put their bytes. `[UInt8].append` checks uniqueness and
/// capacity and goes through generic sequence code on every call; a delivery line is some
/// fifty small appends, and that overhead would be most of the cost of encoding one. A sink is
/// a plain pointer, count and capacity.
///
/// Owns its memory but is copyable: call `deallocate()` once when done (or use
/// `withSink(_:)`), and never use a copy after that.
///
/// The memory is C's `malloc`/`realloc`/`free`, not `UnsafeMutablePointer.allocate`: on Linux
/// the latter asks for "default alignment", which Swift's runtime serves with `posix_memalign`
/// (past glibc's per-thread cache, several times dearer than `malloc`), and growing by `realloc` often extends the block in place instead of copying it.
public struct ByteSink {
    public private(set) var base: UnsafeMutablePointer<UInt8>
    public private(set) var count = 0
    private var capacity: Int

    public init(capacity: Int = 1024) {
        self.capacity = max(capacity, 16)
        base = Self.reallocate(nil, self.capacity)
    }

    public func deallocate() { free(base) }

    private static func reallocate(_ old: UnsafeMutablePointer<UInt8>?, _ capacity: Int) -> UnsafeMutablePointer<UInt8> {
        guard let p = realloc(old, capacity) else {
            fatalError("ByteSink: out of memory allocating \(capacity) bytes")
        }
        return p.assumingMemoryBound(to: UInt8.self)
    }

    /// Forgets the contents, keeps the memory.
    public mutating func removeAll() { count = 0 }

    /// Forgets what was written after the first `count` bytes.
    public mutating func truncate(to count: Int) { self.count = min(self.count, max(0, count)) }

    /// The bytes written so far (valid until the next append or `deallocate`).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// The bytes written so far, copied into an array. (Not `init(unsafeUninitializedCapacity:)`:
    /// it reaches an unspecialized allocation in the standard library that looks up the storage
    /// type's metadata on every call.)
    public var array: [UInt8] {
        Array(bytes)
    }

    @inline(__always)
    public mutating func append(_ byte: UInt8) {
        if count == capacity { grow(to: count + 1) }
        base[count] = byte
        count += 1
    }

    @inline(__always)
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        if count + bytes.count > capacity { grow(to: count + bytes.count) }
        copyBytes(to: base + count, from: source, count: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    public mutating func append(_ literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Lets `body` write at most `maximum` bytes straight into the buffer; it returns how many
    /// it wrote. For fixed-width fields (timestamps): one capacity check, no per-byte append.
    @inline(__always)
    public mutating func appendInPlace(maximum: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        if count + maximum > capacity { grow(to: count + maximum) }
        count += body(base + count)
    }

    @inline(never)
    private mutating func grow(to needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        base = Self.reallocate(base, newCapacity)
        capacity = newCapacity
    }
}

/// Runs `body` with a fresh sink and returns what it wrote as an array.
@inline(__always)
func withSink(capacity: Int = 512, _ body: (inout ByteSink) -> Void) -> [UInt8] {
    var sink = ByteSink(capacity: capacity)
    defer { sink.deallocate() }
    body(&sink)
    return sink.array
}
