// A subscribe's filter: what it accepts, what it refuses and why, and which deliveries it matches.
@testable import HeraldCore
import Testing

@Suite struct ConsumerFilterTests {
    static func parsed(_ value: JSONValue?) -> Result<ConsumerFilter?, RequestError> { ConsumerFilter.parse(value) }

    @Test func noFilterOrNullIsNoFilter() throws {
        #expect(try Self.parsed(nil).get() == nil)
        #expect(try Self.parsed(.null).get() == nil)
    }

    @Test func appsAndKindsAreKeptAndShownSorted() throws {
        let filter = try #require(try Self.parsed(["apps": ["b.app", "a.app"], "kinds": ["suppressed", "alert"]]).get())
        #expect(filter.apps == ["a.app", "b.app"] && filter.kinds == [.alert, .suppressed])
        #expect(filter.json.canonicalString == #"{"apps":["a.app","b.app"],"kinds":["alert","suppressed"]}"#)
    }

    @Test func anUnknownKindIsRefusedNamingItAndTheKnownKinds() throws {
        guard case .failure(let error) = Self.parsed(["kinds": ["alert", "alerts"]]) else { Issue.record("accepted"); return }
        #expect(error.code == "invalid_filter")
        #expect(error.title.contains("“alerts”"))
        #expect(error.detail.contains(DeliveryKind.allCases.map(\.rawValue).joined(separator: ", ")))
    }

    @Test func emptyListsUnknownMembersAndWrongTypesAreRefused() throws {
        let refused: [JSONValue] = [
            ["kinds": []], ["apps": []], ["app": ["a"]], ["kinds": "alert"], ["apps": [1]], "alert", ["apps": [""]],
        ]
        for value in refused {
            guard case .failure(let error) = Self.parsed(value) else { Issue.record("accepted \(value.canonicalString)"); continue }
            #expect(error.code == "invalid_filter", "\(value.canonicalString)")
        }
    }

    @Test func everyKindsCodeIsItsIndexAmongTheKinds() throws {
        for (i, kind) in DeliveryKind.allCases.enumerated() {
            #expect(ConsumerFilter.kindCode(of: kind.rawValue) == UInt8(i), "\(kind)")
        }
        #expect(ConsumerFilter.kindCode(of: "nonsense") == 0xFF)
    }

    @Test func aDeliveryMatchesWhenItsKindAndAppAreListed() throws {
        let code = { (k: DeliveryKind) in ConsumerFilter.kindCode(of: k.rawValue) }
        let both = try #require(try Self.parsed(["apps": ["mail"], "kinds": ["alert"]]).get())
        #expect(both.matches(kindCode: code(.alert), app: "mail"))
        #expect(!both.matches(kindCode: code(.alert), app: "chat"))
        #expect(!both.matches(kindCode: code(.suppressed), app: "mail"))
        #expect(!both.matches(kindCode: code(.alert), app: nil))
        let kindsOnly = try #require(try Self.parsed(["kinds": ["summary", "cleared"]]).get())
        #expect(kindsOnly.matches(kindCode: code(.summary), app: nil) && kindsOnly.matches(kindCode: code(.cleared), app: "x"))
        #expect(!kindsOnly.matches(kindCode: code(.alert), app: "x"))
        let appsOnly = try #require(try Self.parsed(["apps": ["mail"]]).get())
        #expect(appsOnly.matches(kindCode: code(.withdrawn), app: "mail") && appsOnly.matches(kindCode: 0xFF, app: "mail"))
    }
}
