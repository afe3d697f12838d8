// The event kinds' two spellings agree, and every stored name decodes back to its kind.
import HeraldCore
import Testing

@Suite struct EventKindTests {
    @Test func typeNameIsTheStoredNameAndDecodesBack() {
        for kind in EventKind.allCases {
            #expect(kind.typeName == kind.name.description)
            #expect(kind == .other || EventKind(kind.typeName) == kind)
        }
        #expect(EventKind("submitted") == .other)
        #expect(EventKind("") == .other)
    }
}
