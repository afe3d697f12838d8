// Ports for listeners a test starts (a child `herald serve`, a private cluster): below the kernel's
// ephemeral range, so no outgoing connection can be handed the port before the listener binds it.
import Glibc
@testable import HeraldStore
import Testing

@Suite struct FreePortTests {
    @Test func aFreePortLiesBelowTheEphemeralRangeAndCanBeBound() throws {
        let low = try #require(LocalCluster.ephemeralRangeLow())
        for _ in 0..<20 {
            let port = LocalCluster.freePort()
            #expect(port >= 10_000 && port < low, "port \(port), ephemeral range from \(low)")
            #expect(LocalCluster.bindable(port))
        }
    }

    @Test func aPortSomeoneListensOnIsNotBindable() throws {
        let port = LocalCluster.freePort()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = LocalCluster.loopback(port: port)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(fd, 1) == 0)
        #expect(!LocalCluster.bindable(port))
    }
}
