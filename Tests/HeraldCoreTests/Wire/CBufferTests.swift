// Text out of fixed-size C buffers: up to the first NUL, never past the end, UTF-8 repaired.
import Testing
import HeraldCore

@Suite struct CBufferTests {
    @Test func readsUpToTheFirstNulAndNeverPastTheEnd() {
        var buffer = [CChar](repeating: 0, count: 16)
        for (i, b) in "127.0.0.1".utf8.enumerated() { buffer[i] = CChar(bitPattern: b) }
        buffer[12] = 0x41  // after the NUL: not read
        #expect(String(cBuffer: buffer) == "127.0.0.1")
        #expect(String(cBuffer: [0x61, 0x62, 0x63]) == "abc")  // no NUL at all
        #expect(String(cBuffer: []) == "")
        #expect(String(cBuffer: [0]) == "")
    }

    @Test func invalidUTF8IsRepairedNotTrapped() {
        let bytes: [UInt8] = [0x63, 0x6E, 0x3D, 0xC3, 0xA9, 0xFF, 0x0A, 0x78, 0x00]  // "cn=é", a stray 0xFF, "\nx"
        #expect(String(cBuffer: bytes.map { CChar(bitPattern: $0) }) == "cn=é\u{FFFD}\nx")
    }
}
