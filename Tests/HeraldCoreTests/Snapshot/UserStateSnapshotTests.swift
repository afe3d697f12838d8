// The snapshot encoder's shortcuts write exactly what the fields they skip would encode to.
import Testing
@testable import HeraldCore

@Suite struct UserStateSnapshotTests {
    private func encoded(_ s: UserState) -> [UInt8] {
        var w = SnapshotWriter()
        s.encodeSnapshot(to: &w)
        return w.bytes
    }

    /// A user who never set a rare field has no box; the encoder writes the defaults' bytes
    /// without building them. They equal the encoding of a box holding the defaults.
    @Test func aStateWithoutRareFieldsEncodesAsItsDefaults() throws {
        let plain = UserState(user: "u-1")
        var boxed = UserState(user: "u-1")
        boxed.heldFocus = "Sleep"
        boxed.heldFocus = nil   // the box stays, with every field at its default
        #expect(plain.rareBox == nil)
        #expect(boxed.rareBox != nil)
        #expect(encoded(plain) == encoded(boxed))
    }

    /// Every encoded state reads back (the decoder is the format's reference) and encodes to the
    /// same bytes again; `encodeSnapshotRecord` through a reused scratch writer writes what a
    /// fresh one does, record after record.
    @Test func recordsThroughAReusedScratchEqualFreshOnes() throws {
        var a = UserState(user: "u-1")
        a.heldFocus = "Work"
        a.focusCheckAt = Instant(millisecondsSinceEpoch: 1_790_000_000_000)
        let states = [UserState(user: "u-0"), a, UserState(user: "a-much-longer-user-identifier-than-fifteen-bytes")]
        var reused = SnapshotWriter()
        var scratch = SnapshotWriter()
        var fresh = SnapshotWriter()
        for (i, s) in states.enumerated() {
            withUnsafePointer(to: s) {
                UserState.encodeSnapshotRecord(at: $0, deliveryCount: Int64(i * 300), to: &reused, scratch: &scratch)
            }
            s.encodeSnapshotRecord(deliveryCount: Int64(i * 300), to: &fresh)
            let bytes = encoded(s)
            let back = try bytes.withUnsafeBytes { raw throws(SnapshotFormatError) in
                var r = SnapshotReader(raw)
                return try UserState(snapshot: &r)
            }
            #expect(encoded(back) == bytes)
        }
        #expect(reused.bytes == fresh.bytes)
    }

    /// Varints of every length (1 to 10 bytes) read back as written.
    @Test func varintsOfEveryLengthReadBack() throws {
        var values: [UInt64] = [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, UInt64.max]
        for shift in stride(from: 7, to: 64, by: 7) { values += [1 << UInt64(shift) - 1, 1 << UInt64(shift)] }
        var w = SnapshotWriter()
        for v in values { w.varint(v) }
        let read = try w.bytes.withUnsafeBytes { raw throws(SnapshotFormatError) in
            var r = SnapshotReader(raw)
            return try values.map { _ throws(SnapshotFormatError) in try r.varint() }
        }
        #expect(read == values)
    }
}
