// Newline framing: split and coalesced packets, CRLF, and the 64 KiB limit.
import HeraldCore
import Testing

@Suite struct LineFramerTests {
    func lines(_ chunks: [String], max: Int = 16) -> ([String], Bool) {
        var framer = LineFramer(maxLineBytes: max)
        var out: [String] = []
        var ok = true
        for c in chunks where ok {
            ok = framer.feed(Array(c.utf8)) { out.append(String(decoding: $0, as: UTF8.self)) }
        }
        return (out, ok)
    }

    @Test func splitAndCoalescedPacketsGiveTheSameLines() {
        #expect(lines(["{\"a\":1}\n{\"b\"", ":2}\n", "\n"]).0 == ["{\"a\":1}", "{\"b\":2}", ""])
        #expect(lines(["x\ny\nz\n"]).0 == ["x", "y", "z"])
        #expect(lines(["x", "y", "z", "\n"]).0 == ["xyz"])
    }

    @Test func carriageReturnBeforeNewlineIsDropped() {
        #expect(lines(["abc\r\n"]).0 == ["abc"])
    }

    @Test func lineAtTheLimitPassesAndOneByteMoreFails() {
        #expect(lines([String(repeating: "x", count: 16) + "\n"]) == ([String(repeating: "x", count: 16)], true))
        #expect(lines([String(repeating: "x", count: 16) + "\r\n"]).1 == true)
        #expect(lines([String(repeating: "x", count: 17) + "\n"]).1 == false)
        #expect(lines([String(repeating: "x", count: 10), String(repeating: "x", count: 10)]).1 == false,
                "an unterminated line over the limit fails before its newline arrives")
    }

    @Test func afterAnOverflowNothingMoreIsFramed() {
        var framer = LineFramer(maxLineBytes: 4)
        var seen = 0
        #expect(framer.feed(Array("toolong\nok\n".utf8)) { _ in seen += 1 } == false)
        #expect(framer.feed(Array("ok\n".utf8)) { _ in seen += 1 } == false)
        #expect(seen == 0)
    }

    @Test func aGibibyteWithoutNewlineStopsOneReadPastTheLimitAndIsNeverBuffered() {
        var framer = LineFramer()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 16 * 1024)
        var fed = 0
        while fed < 1 << 30, framer.feed(chunk, line: { _ in Issue.record("no line was framed") }) {
            fed += chunk.count
            #expect(framer.bufferedBytes <= LineFramer.defaultMaxLineBytes)
        }
        #expect(fed == LineFramer.defaultMaxLineBytes, "the read that crossed 64 KiB was the last one taken")
        #expect(framer.overflowed && framer.bufferedBytes <= LineFramer.defaultMaxLineBytes + chunk.count)
    }
}
