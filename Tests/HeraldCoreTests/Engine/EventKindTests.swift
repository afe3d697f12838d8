// Every stored event type name decodes back to its kind; anything else is `.other`.
import HeraldCore
import Testing

@Suite struct EventKindTests {
    @Test func typeNameDecodesBackToItsKind() {
        for kind in EventKind.allCases {
            #expect(kind == .other || EventKind(kind.typeName) == kind)
        }
        #expect(EventKind("badgeClear").typeName == "badgeClear")
        #expect(EventKind("submitted") == .other)
        #expect(EventKind("") == .other)
    }
}
