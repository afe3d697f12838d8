import Testing
import HeraldCore
@testable import HeraldRuntime

/// The key a submit holds while in flight (a re-send racing it waits for it): equal exactly
/// when (app, id, user) are byte for byte equal, as the store's unique index tells them apart
/// (SPEC §3: unique forever per user).
@Suite struct InFlightKeyTests {
    private func key(_ app: String, _ id: String, _ user: String, type: String = "submit") -> HeraldService.InFlightKey? {
        HeraldService.InFlightKey(EventDraft(user: user, type: type, app: app, notificationId: id, body: .object([:])))
    }

    @Test func theSameSubmitGivesEqualKeysWithEqualHashes() {
        let a = key("com.example.mail", "n-1", "alice"), b = key("com.example.mail", "n-1", "alice")
        #expect(a != nil && a == b && a?.hashValue == b?.hashValue)
        #expect(Set([a, b, key("com.example.mail", "n-2", "alice")]).count == 2)
    }

    @Test func theUserIsPartOfTheKey() {
        // The same id for another user is another notification.
        #expect(key("com.example.mail", "n-1", "alice") != key("com.example.mail", "n-1", "bob"))
        #expect(key("com.example.mail", "n-1", "alice")?.hashValue != key("com.example.mail", "n-1", "bob")?.hashValue)
    }

    @Test func fieldBoundariesMatter() {
        // Hashing the two strings back to back without a separator would make these collide.
        #expect(key("ab", "c", "u") != key("a", "bc", "u"))
        #expect(key("ab", "c", "u")?.hashValue != key("a", "bc", "u")?.hashValue)
        #expect(key("abc", "", "u")?.hashValue != key("a", "bc", "u")?.hashValue)
    }

    @Test func canonicallyEquivalentSpellingsAreDifferentKeysAsInTheStore() {
        // "é" precomposed and decomposed: `String ==` calls them equal, PostgreSQL stores both.
        let composed = key("app", "jos\u{E9}", "u"), decomposed = key("app", "jose\u{301}", "u")
        #expect(composed != decomposed)
    }

    @Test func manyKeysSpreadOverTheHashes() {
        // 100,000 keys as a busy service holds them (ids and apps that differ in a few
        // bytes, at every length up to 24): the mixing keeps their hashes apart, also in the low
        // bits a dictionary's buckets use.
        var hashes = Set<Int>(), buckets = Set<Int>()
        for i in 0..<100_000 {
            let k = key("com.example.app\(i % 7)", "n-\(i)" + String(repeating: "x", count: i % 13), "user")!
            hashes.insert(k.hashValue)
            buckets.insert(k.hashValue & 0x1_FFFF)
        }
        #expect(hashes.count >= 99_990)
        #expect(buckets.count >= 55_000)  // 100,000 into 131,072 buckets at random: ~70,000 distinct
    }

    @Test func onlySubmitsWithAnAppAnIdAndAUserHaveOne() {
        #expect(key("app", "n", "u", type: "withdraw") == nil)
        #expect(HeraldService.InFlightKey(EventDraft(user: "u", type: "submit", app: nil, notificationId: "n", body: .null)) == nil)
        #expect(HeraldService.InFlightKey(EventDraft(user: nil, type: "submit", app: "app", notificationId: "n", body: .null)) == nil)
    }
}
