// `herald-roundtrip`: the shortest example of the Swift client, and its round trip against a running server.
// Reads HERALD_ADDR (host:port, default 127.0.0.1:7411), HERALD_TOKEN (optional), N (default 1000) and
// HERALD_APP (default com.example.roundtrip); prints `roundtrip: N acked, N delivered` last and exits 0,
// or prints the error and exits 1.
import HeraldClient
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    let text = String(cString: value)
    return text.isEmpty ? nil : text
}

func roundtrip(address: String, token: String?, n: Int, app: String) async throws(HeraldError) -> (acked: Int, delivered: Int) {
    let run = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let user = "roundtrip-\(run)"
    let herald = try await HeraldProducer.connect(address: address, token: token)
    try await herald.registerApp(app)
    try await herald.authorization(Authorization(user: user, app: app, status: .authorized, options: [.alert, .sound, .badge]))
    // A new consumer starts at the head: subscribe before submitting so it sees every delivery.
    let deliveries = try await herald.subscribe(consumer: "roundtrip-\(run)", filter: DeliveryFilter(apps: [app]))
    var pending: [PendingAck] = []
    for i in 0..<n {
        pending.append(await herald.send(Submit(id: "\(run)-\(i)", app: app, user: user, title: "Round trip \(i)",
                                                body: "Hello from Swift", hiddenPreviewsBodyPlaceholder: "Round trip")))
    }
    var acked = 0
    for ack in pending where try await !ack.value.duplicate { acked += 1 }
    var seen = Set<String>()
    while seen.count < n, let delivery = try await deliveries.next(timeoutMilliseconds: 60_000) {
        if delivery.user == user, let id = delivery.notification { seen.insert(id) }
    }
    await deliveries.close()
    await herald.close()
    return (acked, seen.count)
}

let address = environment("HERALD_ADDR") ?? "127.0.0.1:7411"
let n = Int(environment("N") ?? "1000") ?? 1000
do {
    let (acked, delivered) = try await roundtrip(address: address, token: environment("HERALD_TOKEN"), n: n,
                                                 app: environment("HERALD_APP") ?? "com.example.roundtrip")
    print("roundtrip: \(acked) acked, \(delivered) delivered")
    exit(acked == n && delivered == n ? 0 : 1)
} catch {
    let message = Array("roundtrip failed: \(error)\n".utf8)
    _ = write(2, message, message.count)
    exit(1)
}
