// A growable byte buffer for the canonical encoders: one capacity check per append, nothing else.

/// Where the canonical JSON writers put their bytes. `[UInt8].append` checks uniqueness and
/// capacity and goes through generic sequence code on every call; a delivery line is some
/// fifty small appends, and that overhead was most of the cost of encoding one (callgrind:
/// ~11k instructions per delivery). A sink is a plain pointer, count and capacity.
///
/// Owns its memory but is copyable: call `deallocate()` once when done (or use
/// `withSink(_:)`), and never use a copy after that.
public struct ByteSink {
    public private(set) var base: UnsafeMutablePointer<UInt8>
    public private(set) var count = 0
    private var capacity: Int

    public init(capacity: Int = 1024) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    public func deallocate() { base.deallocate() }

    /// Forgets the contents, keeps the memory.
    public mutating func removeAll() { count = 0 }

    /// Forgets what was written after the first `count` bytes.
    public mutating func truncate(to count: Int) { self.count = min(self.count, max(0, count)) }

    /// The bytes written so far (valid until the next append or `deallocate`).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// The bytes written so far, copied into an array. (Not `init(unsafeUninitializedCapacity:)`:
    /// it reaches an unspecialized allocation in the standard library that looks up the storage
    /// type's metadata on every call, ~400 instructions more per array under callgrind.)
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
        UnsafeMutableRawPointer(base + count).copyMemory(from: source, byteCount: bytes.count)
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
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
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
