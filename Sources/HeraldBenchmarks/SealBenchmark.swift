// Sealing a submit's and a delivery's content (ContentSeal) per CPU-second, beside the cipher alone and encoding the body.
import HeraldCore

/// `seal [--n N]`: the CPU each stored row's sealing costs on the service's loop — the whole
/// transform (parse, split, AES-256-GCM, encode) for a typical submit body and its delivery body,
/// the cipher alone on the same bytes, and opening (what replay and export pay per row).
public func runSealBenchmark(arguments: [String]) {
    let n = arguments.firstIndex(of: "--n").flatMap { Int(arguments[$0 + 1]) } ?? 200_000
    let key = ContentKey(generation: 1, bytes: (0..<32).map { UInt8($0 &* 7 &+ 3) })
    let submit = JSONValue.object([
        "id": "n-123456", "app": "com.example.mail", "user": "user-4711", "interruptionLevel": "active",
        "title": "Your order has shipped", "body": "Order 12345 is on its way and arrives on Thursday.",
        "hiddenPreviewsBodyPlaceholder": "Order update", "threadId": "orders",
    ]).canonicalBytes
    var h = (engine: Engine(), apps: AppRegistry(), state: UserState(user: "user-4711"))
    let auth = try! JSONValue.parse(#"{"user":"user-4711","app":"com.example.mail","status":"authorized","options":["alert","sound","badge"]}"#)
    if case .accepted(let a) = h.engine.admit(op: "authorization", request: auth, apps: h.apps, now: .epoch) {
        _ = h.engine.apply(StoredEvent(a.events[0], seq: 1, at: .epoch), to: &h.state, apps: &h.apps)
    }
    let event = StoredEvent(seq: 2, user: "user-4711", type: "submit", body: try! JSONValue.parse(submit), at: .epoch)
    let delivery = h.engine.apply(event, to: &h.state, apps: &h.apps).deliveries.first!.bodyBytes
    var sink = 0
    func line(_ what: String, _ m: (wall: Double, cpu: Double)) {
        print("seal.\(what)  \(String(format: "%.2f", m.cpu / Double(n) * 1e6)) µs each (\(Int(Double(n) / m.cpu))/s per CPU-second)")
    }
    line("submit         ", measure { for _ in 0..<n { sink &+= ContentSeal.sealSubmit(submit, key: key).count } })
    line("delivery       ", measure { for _ in 0..<n { sink &+= ContentSeal.sealDelivery(delivery, key: key).count } })
    line("cipher-only    ", measure { for _ in 0..<n { sink &+= ContentCipher.seal(submit, key: key.bytes).count } })
    let sealed = ContentSeal.sealSubmit(submit, key: key)
    line("open-submit    ", measure { for _ in 0..<n { sink &+= ContentSeal.readable(sealed, key: { _ in key.bytes }).count } })
    line("parse+encode   ", measure { for _ in 0..<n { sink &+= (try! JSONValue.parse(submit)).canonicalBytes.count } })
    print("(\(submit.count)-byte submit body, \(delivery.count)-byte delivery body; checksum \(sink))")
}
