// Unretained: `weak` without a side table — what a closure or connection that outlives its object sees.
import Foundation
@testable import HeraldRuntime
import Testing

/// Clears its handle when its deinit starts, as the service and connections do.
private final class Owner {
    let unretained = Unretained<Owner>()
    var value = 7
    init() { unretained.object = self }
    deinit { unretained.object = nil }
}

@Suite struct UnretainedTests {
    /// A closure holding only the handle reaches the object while it lives, and finds nil after.
    @Test func aClosureThatOutlivesItsObjectFindsNil() {
        var owner: Owner? = Owner()
        let read = { [unretained = owner!.unretained] in unretained.object?.value }
        #expect(read() == 7)
        owner = nil
        #expect(read() == nil)
    }

    /// The handle holds no reference: the object is freed while closures still hold the handle.
    @Test func theHandleDoesNotKeepItsObjectAlive() {
        weak var freed: Owner?
        var handle: Unretained<Owner>?
        do {
            let owner = Owner()
            freed = owner
            handle = owner.unretained
        }
        #expect(freed == nil)
        #expect(handle?.object == nil)
    }

    /// The service's handles (its closures', its connections') are cleared once it is freed.
    @Test func theServicesHandlesAreClearedWhenItIsFreed() throws {
        weak var freed: HeraldService?
        let handles: (Unretained<HeraldService>, ConnectionDelegateRef)
        do {
            let server = try TestServer()
            freed = server.service
            handles = (server.service.unretained, server.service.asConnectionDelegate)
            let c = try server.client()
            #expect(try c.call(["op": "ping"])["op"] == "pong")
            c.close()
            server.stop()
        }
        for _ in 0..<200 where freed != nil { usleep(10_000) }
        #expect(freed == nil)
        #expect(handles.0.object == nil && handles.1.delegate == nil)
    }
}
