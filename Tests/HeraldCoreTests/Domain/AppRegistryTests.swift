// The app registry answers the same whether it searches its few apps by comparison or many by hash.
import Testing
@testable import HeraldCore

@Suite struct AppRegistryTests {
    /// Apps registered one by one past the scan limit: after each registration every app has its
    /// own entitlements and an unknown app has none, on both sides of the switch to hashing.
    @Test func everyAppKeepsItsEntitlementsAcrossTheScanLimit() {
        var registry = AppRegistry()
        let grants: [Entitlements] = [.critical, .communication, .government, [.critical, .communication], []]
        let count = AppRegistry.scanLimit + 4
        for k in 0..<count {
            registry.register("app-\(k)", entitlements: grants[k % grants.count])
            for j in 0...k { #expect(registry.entitlements(of: "app-\(j)") == grants[j % grants.count], "\(k) \(j)") }
            #expect(registry.entitlements(of: "app-\(k + 1)") == [])
            #expect(registry.entitlements(of: "") == [])
        }
        // Re-registering replaces, in both modes.
        registry.register("app-0", entitlements: .government)
        #expect(registry.entitlements(of: "app-0") == .government)
        var small = AppRegistry()
        small.register("a", entitlements: .critical)
        small.register("a", entitlements: .communication)
        #expect(small.entitlements(of: "a") == .communication)
        #expect(small.apps == ["a"])
    }

    /// Two registries with the same apps are equal (and hash alike) whatever order they were registered in.
    @Test func equalityIsTheContentsNotTheOrder() {
        var a = AppRegistry(), b = AppRegistry()
        a.register("x", entitlements: .critical); a.register("y", entitlements: .government)
        b.register("y", entitlements: .government); b.register("x", entitlements: .critical)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        b.register("x", entitlements: [])
        #expect(a != b)
    }

    /// The fold names a user's app entry with the registry's string for a registered app (one
    /// string shared by every user), and with the event's own for an app never registered.
    @Test func usersAppEntriesShareTheRegisteredName() {
        func storage(_ s: String) -> UnsafeRawPointer? {
            var s = s
            return s.withUTF8 { UnsafeRawPointer($0.baseAddress) }
        }
        let name = "com.example.shared-app-name"   // past 15 bytes: a string with storage of its own
        for many in [false, true] {
            var h = EngineHarness()
            if many { for k in 0...AppRegistry.scanLimit { h.register("com.example.other-\(k)") } }
            h.register(name)
            h.authorize("u1", name)
            h.send("settings", #"{"user":"u2","app":"\#(name)","sound":false}"#)
            h.send("mute", #"{"user":"u3","app":"\#(name)","until":"2030-01-01T00:00:00Z"}"#)
            h.authorize("u4", "com.example.never-registered")
            let shared = try! #require(h.apps.registeredName(name))
            for user in ["u1", "u2", "u3"] {
                let entry = try! #require(h.states[user]?.apps.entries.first { $0.name == name })
                #expect(storage(entry.name) == storage(shared), "\(user), \(many ? "hashed" : "scanned") registry")
            }
            #expect(h.states["u4"]?.apps.entries.first?.name == "com.example.never-registered")
            #expect(h.apps.sharedName("com.example.never-registered") == "com.example.never-registered")
        }
    }
}
