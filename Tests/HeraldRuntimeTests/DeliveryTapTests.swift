// The benches' consumer hands over every line whole, whatever the reads cut, and finds its keys.
import Foundation
import Glibc
@testable import HeraldTestSupport
import Testing

@Suite struct DeliveryTapTests {
    /// Lines of many lengths — one longer than the tap's 1 MiB buffer, and enough in all (~3 MiB)
    /// that the buffer is compacted several times — written in odd-sized pieces from another
    /// thread: each arrives once, whole, in order.
    @Test func everyLineArrivesWholeAcrossReadsCompactionsAndALongLine() throws {
        var lines: [[UInt8]] = []
        for i in 0..<6_000 { lines.append(Array("{\"cursor\":\(i),\"pad\":\"\(String(repeating: "x", count: (i * 37) % 900))\"}".utf8)) }
        lines.insert(Array(repeating: UInt8(ascii: "y"), count: (1 << 20) + 12_345), at: 3_000)
        lines.append([])  // an empty line is a line too
        var wire: [UInt8] = []
        for l in lines { wire += l; wire.append(0x0A) }

        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let tap = DeliveryTap(fileDescriptor: fds[0])
        let (sendFD, bytes) = (fds[1], wire)
        let writer = Thread {
            var at = 0, piece = 1
            while at < bytes.count {
                let n = min(piece, bytes.count - at)
                let w = bytes.withUnsafeBytes { Glibc.write(sendFD, $0.baseAddress! + at, n) }
                if w <= 0 { break }
                at += w
                piece = piece * 7 % 65_521 + 1  // 1, 8, 57, … bytes: cuts anywhere
            }
            Glibc.close(sendFD)
        }
        writer.start()
        var got = 0, mismatches = 0
        try tap.read(idleTimeoutMilliseconds: 10_000) { line in
            if got >= lines.count || !line.elementsEqual(lines[got]) { mismatches += 1 }
            got += 1
            return got < lines.count
        }
        #expect(got == lines.count)
        #expect(mismatches == 0)
    }

    /// `contains`, `intAfter` and `stringField` find the first occurrence, anywhere in the line.
    @Test func keysAreFoundByTheirFirstOccurrence() {
        let line = Array(#"{"app":"a","notification":"lat-123","user":"u-9","notification":"lat-7"}"#.utf8)
        line.withUnsafeBytes { b in
            #expect(b.contains(#""notification":"lat-"#))
            #expect(!b.contains(#""kind":"summary""#))
            #expect(b.intAfter(#""notification":"lat-"#) == 123)
            #expect(b.intAfter(#""app":""#) == nil)  // no digits after the key
            #expect(b.stringField(#""user":""#) == "u-9")
            #expect(b.stringField(#""missing":""#) == nil)
        }
    }
}
