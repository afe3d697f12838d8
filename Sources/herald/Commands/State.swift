// `herald state USER [--at SEQ|TIME]`: a user's settings, Focus, summary schedule, badges and pending items at a point in time.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldStore

struct State: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a user's folded state as of a seq or time (default: now, after every event).")

    @OptionGroup var database: DatabaseOptions
    @Argument(help: "The user.") var user: String
    @Option(help: "A seq number or an RFC 3339 engine time.") var at: String?
    @Flag(help: "One line of canonical JSON on a terminal too (indented there by default; a pipe or file always gets one line).") var json = false

    func run() throws {
        let limit = try Replayer.Limit.parse(at)
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            guard try LogNames.usersWithoutEvents(conn, [user]).isEmpty else { throw noEvents("user “\(user)”") }
            let folded = try UserHistory.fold(conn, user: user, limit: limit)
            // As of the instant the fold reached: with the Focus in force and the mutes not over.
            var doc = folded.state.json(at: folded.at)
            if let note = ErasureRecord.note(try ErasureRecord.erasures(conn, user: user)), case .object(var o) = doc {
                o["contentErased"] = note
                doc = .object(o)
            }
            printJSON(doc, pretty: !json && isatty(1) == 1)
        }
    }
}
