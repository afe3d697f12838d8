// copyBytes: every size up to past its inline limit, at every alignment, touches exactly its bytes.
import Testing
import HeraldCore

@Suite struct SmallCopyTests {
    /// Sizes 0…48 from and to offsets 0…7: the destination holds the source's bytes at exactly
    /// `count` places, and the guard bytes around them are untouched.
    @Test func copiesExactlyCountBytesAtAnyAlignment() {
        let source = (0..<64).map { UInt8($0 + 1) }
        for count in 0...48 {
            for from in 0..<8 {
                for to in 0..<8 {
                    var destination = [UInt8](repeating: 0xEE, count: 64)
                    source.withUnsafeBytes { s in
                        destination.withUnsafeMutableBytes { d in
                            copyBytes(to: d.baseAddress! + to, from: s.baseAddress! + from, count: count)
                        }
                    }
                    let expected = [UInt8](repeating: 0xEE, count: to) + source[from..<(from + count)]
                        + [UInt8](repeating: 0xEE, count: 64 - to - count)
                    #expect(destination == expected, "count \(count), from \(from), to \(to)")
                }
            }
        }
    }
}
