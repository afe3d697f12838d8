// One fuzz input through the door: framing, the session (hello, roles), admission, the fold and the encoders.
import HeraldCore

/// Drives the wire-facing code with arbitrary bytes and checks what must hold for any input:
/// nothing crashes or traps, every reply is one valid JSON line, a line over the limit stops
/// the framer, accepted bodies survive canonical encoding, and the engine folds whatever the
/// door accepted. A violated property traps (`precondition`), which libFuzzer reports as a crash.
enum FuzzHarness {
    static let tokens = TokenTable([
        "producer-token": Grant(name: "mail", roles: [.producer], apps: ["com.example.mail"]),
        "everything-token": Grant(name: "ops", roles: [.admin, .settings, .consumer, .producer], apps: nil),
    ])
    static let engine = Engine()
    static let start = Instant(rfc3339: "2026-03-27T07:00:00Z")!

    /// What one input exercised (the replay runner prints the totals, to show seeds reach deep).
    struct Reach { var lines = 0, accepted = 0, deliveries = 0 }

    @discardableResult
    static func run(_ input: UnsafeRawBufferPointer) -> Reach {
        var reach = Reach()
        guard !input.isEmpty else { return reach }
        // The first byte picks the framer's limit and where TCP would have split the stream.
        let control = input[0]
        let bytes = UnsafeRawBufferPointer(rebasing: input[1...])
        var framer = LineFramer(maxLineBytes: control & 1 == 0 ? LineFramer.defaultMaxLineBytes : 512)
        var session = ClientSession(tokens: control & 2 == 0 ? tokens : TokenTable(), serverName: "herald/fuzz")
        var apps = AppRegistry()
        var users: [String: UserState] = [:]
        /// Every submit folded, by seq: what the store would read back for a snooze of an old one.
        var submitted: [Int64: SubmittedNotification] = [:]
        var seq: Int64 = 0
        var now = start
        let step = Int(control >> 2) + 1

        func check(_ actions: [ClientSession.Action]) {
            for action in actions {
                switch action {
                case .send(let out):
                    precondition(out.last == 0x0A, "a reply ends with a newline")
                    for line in out.split(separator: 0x0A) {
                        guard case .object(let reply)? = try? JSONValue.parse(Array(line)), reply["ok"] != nil else {
                            preconditionFailure("every reply is one JSON object with ok")
                        }
                    }
                case .dispatch(let request):
                    admit(request)
                case .close, .closeAfterReplies, .warn:
                    break
                }
            }
        }

        func admit(_ request: ClientSession.Request) {
            // The reply is irrelevant here; admission must finish for every request.
            defer { check(session.replyCompleted(ticket: request.ticket, reply: WireReply.ok(rid: request.rid))) }
            guard request.op.path == .door else { return }
            guard case .accepted(let accepted) = engine.admit(request, apps: apps, now: now) else { return }
            reach.accepted += 1
            for draft in accepted.events {
                let canonical = draft.body.canonicalString
                guard let reparsed = try? JSONValue.parse(canonical) else {
                    preconditionFailure("an accepted body re-parses from its canonical form")
                }
                precondition(reparsed.canonicalString == canonical, "canonical encoding is a fixed point")
                seq += 1
                let event = StoredEvent(draft.user == nil && draft.type != "registerApp" ? draft.withUser("someone") : draft,
                                        seq: seq, at: now)
                let user = event.user ?? ""
                var state = users[user] ?? UserState(user: user)
                if event.kind == .submit { submitted[seq] = SubmittedNotification(body: event.body) }
                if let wanted = state.contentNeeded(toApply: event), let n = submitted[wanted] { state.supplyContent(n, seq: wanted) }
                let outcome = engine.apply(event, to: &state, apps: &apps)
                for d in outcome.deliveries { _ = d.bodyBytes }
                reach.deliveries += outcome.deliveries.count
                users[user] = state
            }
            now = now.adding(.minutes(7))
        }

        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + step)
            var actions: [ClientSession.Action] = []
            let ok = framer.feed(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) {
                reach.lines += 1
                let line = $0
                precondition(line.withUnsafeBytes { SubmitLine.agreesWithGeneralPath($0, engine: engine, apps: apps, now: now) },
                             "a submit read straight from its line is admitted as the general path admits it")
                actions += session.lineReceived(line)
            }
            check(actions)
            if !ok {
                precondition(framer.overflowed && framer.bufferedBytes <= framer.maxLineBytes + step, "the framer stops within a read of the limit")
                break
            }
            precondition(framer.bufferedBytes <= framer.maxLineBytes, "no more than a line is buffered")
            offset = end
        }
        // Let pending timers (deferred, summary, Focus end, mute, snooze) fire: two days on, then the end of time.
        for (user, var state) in users {
            for horizon in [now.adding(.days(2)), Instant.latestRepresentable] {
                let fired = engine.advance(&state, to: horizon, apps: apps).deliveries
                for d in fired { _ = d.bodyBytes }
                reach.deliveries += fired.count
            }
            users[user] = state
        }
        return reach
    }
}
