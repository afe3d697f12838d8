// Replay's table of user ids: dense ordinals by bytes, one shared string per name.
@testable import HeraldStore
import Testing

@Suite struct NameTableTests {
    @Test func equalBytesGetTheSameOrdinalAndNewNamesTheNextOne() {
        var table = NameTable(capacity: 4)
        var seen: [String: Int] = [:]
        // Enough names to grow the table several times; short, 8-byte and long names (the hash
        // reads eight bytes at a time, then a tail).
        let names = (0..<5_000).map { i in i % 3 == 0 ? "u\(i)" : (i % 3 == 1 ? "user-\(i % 1000)xyz"
                                                                    : "a-rather-long-user-identifier-\(i)") }
        for name in names {
            let o = table.ordinal(of: name)
            if let known = seen[name] {
                #expect(o == known)
            } else {
                #expect(o == seen.count)
                seen[name] = o
            }
            #expect(table.names[o] == name)
        }
        #expect(table.count == seen.count)
        // Lookup by bytes agrees with lookup by string; the empty name is a name too.
        var bytes = Array("u3".utf8)
        #expect(bytes.withUnsafeBytes { table.ordinal(of: $0) } == seen["u3"])
        bytes = []
        let empty = bytes.withUnsafeBytes { table.ordinal(of: $0) }
        #expect(empty == seen.count)
        #expect(table.ordinal(of: "") == empty)
    }
}
