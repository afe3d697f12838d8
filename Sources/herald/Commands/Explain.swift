// `herald explain APP ID`: the story of one notification — its event, the rules, the deliveries, the state it met.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldStore

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain one notification: its event, every rule evaluated with its outcome, the deliveries, and the user's state then.")

    @OptionGroup var database: DatabaseOptions
    @Argument(help: "The app.") var app: String
    @Argument(help: "The notification id.") var id: String
    @Flag(help: "One JSON document instead of text.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            let events = try conn.execute("""
                SELECT seq, user_id, body, (extract(epoch FROM engine_time) * 1000)::bigint FROM events
                WHERE app = $1 AND notification_id = $2 AND type = 'submit' ORDER BY seq
                """, [app, id])
            // An unknown notification is an error (2), not a difference (1, which README keeps for replay's diffs).
            guard events.rowCount > 0 else { throw noEvents("notification “\(id)” of app “\(app)”",
                hint: "check the app and the id (SELECT app, notification_id FROM events WHERE type = 'submit' lists them)") }
            var stories: [JSONValue] = []
            for i in 0..<events.rowCount {
                let seq = events.int64(i, 0) ?? 0, user = events.string(i, 1) ?? ""
                // Sealed content opened with the user's keys; once erased, the erased form.
                let keys = try KeyRing.load(conn, user: user)
                func opened(_ text: String?) -> JSONValue {
                    (try? JSONValue.parse(keys.readable(Array((text ?? "null").utf8), user: user))) ?? .null
                }
                let at = Instant(millisecondsSinceEpoch: events.int64(i, 3) ?? 0)
                let before = try UserHistory.fold(conn, user: user, limit: .seq(seq - 1)).state
                let d = try conn.execute("""
                    SELECT cursor, kind, reason, body, trace FROM deliveries
                    WHERE user_id = $1 AND (notification_id = $2 AND app = $3 OR body::jsonb -> 'items' @> jsonb_build_array(jsonb_build_object('app', $3::text, 'notification', $2::text)))
                    ORDER BY cursor
                    """, [user, id, app])
                var deliveries: [JSONValue] = []
                for j in 0..<d.rowCount {
                    let delivery = opened(d.string(j, 3))
                    var o: [String: JSONValue] = [
                        "cursor": .int(d.int64(j, 0) ?? 0), "kind": .string(d.string(j, 1) ?? ""), "reason": .string(d.string(j, 2) ?? ""),
                        "delivery": delivery,
                        "trace": RuleStep.steps(storedTrace: d.string(j, 4) ?? "[]").map { .array($0.map(\.expandedJSON)) } ?? .null,
                    ]
                    // A decision made later than the submit (deferred, a summary, a Focus's digest, a
                    // snooze, after a mute…) met the state of its own instant, not the submit's: the
                    // user's events and timers before it (engine times are whole milliseconds).
                    if let decided = delivery["at"]?.stringValue.flatMap(Instant.init(rfc3339:)), decided > at {
                        let met = decided.adding(.init(milliseconds: -1))
                        o["stateMet"] = try UserHistory.fold(conn, user: user, limit: .time(met)).state.json(at: met)
                    }
                    deliveries.append(.object(o))
                }
                stories.append(.object([
                    "seq": .int(seq), "user": .string(user), "acceptedAt": .string(at.rfc3339),
                    "event": opened(events.string(i, 2)),
                    // As of the submit's instant: the Focus in force and the mutes not over then.
                    "stateBefore": before.json(at: at), "deliveries": .array(deliveries),
                ].merging(ErasureRecord.note(try ErasureRecord.erasures(conn, user: user)).map { ["contentErased": $0] } ?? [:]) { a, _ in a }))
            }
            let doc = JSONValue.object(["app": .string(app), "id": .string(id), "recipients": .array(stories)])
            if json { print(doc.canonicalString); return }
            for s in stories {
                print("\(app) \(id) → \(s["user"]!.stringValue!): accepted at seq \(s["seq"]!.intValue!), \(s["acceptedAt"]!.stringValue!)")
                print("  event: \(s["event"]!.canonicalString)")
                for d in s["deliveries"]!.arrayValue! {
                    let at = d["delivery"]?["at"]?.stringValue ?? "?"
                    print("  delivery cursor \(d["cursor"]!.intValue!) at \(at): \(d["kind"]!.stringValue!) (reason \(d["reason"]!.stringValue!))")
                    for step in d["trace"]?.arrayValue ?? [] {
                        print("      \(step["rule"]?.stringValue ?? "?"): \(step["outcome"]?.stringValue ?? "?")")
                    }
                    if let focus = d["delivery"]?["focus"]?.stringValue { print("      Focus: \(focus)") }
                    if let met = d["stateMet"] { print("      state it met: " + met.canonicalString) }
                }
                print("  state before the submit: " + (s["stateBefore"]?.canonicalString ?? ""))
                if let erased = s["contentErased"]?["note"]?.stringValue { print("  \(erased)") }
            }
        }
    }
}
