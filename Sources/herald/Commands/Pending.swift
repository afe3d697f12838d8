// `herald pending [--user U]`: everything scheduled — deferred, queued for a summary, held by Focus, mutes and snoozes.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldStore

struct Pending: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every scheduled decision per user (from the folded log), with its deadline and the next wake.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Only this user.") var user: String?
    @Flag(help: "One JSON line per user instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            if let user, try !LogNames.usersWithoutEvents(conn, [user]).isEmpty { throw noEvents("user “\(user)”") }
            let users = try user.map { [$0] } ?? UserHistory.users(conn)
            var listed = 0
            for u in users {
                let folded = try UserHistory.fold(conn, user: u, limit: .everything)
                let state = folded.state.json(at: folded.at)
                let pending = state["pending"]?.arrayValue ?? []
                let snoozes = state["snoozes"]?.arrayValue ?? []
                // Focus and mute ends are scheduled decisions too (SPEC §10): the Focus in force
                // (and its next change) and the mutes not over, as of the log's latest instant.
                let focus = state["activeFocus"]
                let mutes = state["mutes"]?.arrayValue ?? []
                let focusesOff = state["focusesOff"]?.arrayValue ?? []
                if pending.isEmpty && snoozes.isEmpty && mutes.isEmpty && focusesOff.isEmpty && focus == nil
                    && state["nextWake"] == nil { continue }
                listed += 1
                if json {
                    print(JSONValue.object(["user": .string(u), "pending": .array(pending), "snoozes": .array(snoozes),
                                            "activeFocus": focus ?? .null, "focusesOff": .array(focusesOff), "mutes": .array(mutes),
                                            "nextWake": state["nextWake"] ?? .null]).canonicalString)
                } else {
                    print("\(u)  next wake \(state["nextWake"]?.stringValue ?? "-")")
                    if let focus { print("  focus " + focus.canonicalString) }
                    for f in focusesOff { print("  focus off " + f.canonicalString) }
                    for m in mutes { print("  mute " + m.canonicalString) }
                    for p in pending + snoozes { print("  " + p.canonicalString) }
                }
            }
            // The table says so when it is empty; `--json` prints no line, as for a user with nothing pending.
            if listed == 0 && !json { print(user.map { "nothing is pending for \($0)" } ?? "nothing is pending") }
        }
    }
}
