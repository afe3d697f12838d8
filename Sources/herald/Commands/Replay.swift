// `herald replay`: re-derive every delivery from the event log and diff it against the stored deliveries.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldStore

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-derive every delivery from the stored events and compare byte for byte. Exit 0: identical; 1: differences; 2: error.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Stop after this seq, or at this RFC 3339 engine time.") var until: String?
    @Option(help: "Only these users (comma-separated).") var users: String?
    @Option(help: "Only this partition (default: every partition, each replayed alone).") var partition: Int?
    @Flag(help: "Print JSON instead of text (with --what-if or --rules-version: the decisions that would change).") var json = false
    @Option(name: .customLong("what-if"), help: ArgumentHelp(
        "Replay as if this request had been made at its \"at\" (RFC 3339; without \"at\": before the first event, as if always in force); lists decisions that would change. Repeatable.",
        valueName: "JSON request")) var whatIf: [String] = []
    @Option(name: .customLong("rules-version"), help: ArgumentHelp(
        "Decide every event and timer by this rules version instead of those the log records; lists decisions that would change.",
        valueName: "version")) var rulesVersion: String?

    func run() throws {
        var replayer = Replayer()
        replayer.limit = try Replayer.Limit.parse(until)
        let userList = users.map { $0.split(separator: ",").map(String.init) }
        replayer.users = userList.map(Set.init)
        for text in whatIf { replayer.injections.append(try Self.injection(text)) }
        if let rulesVersion {
            guard Engine.knownRulesVersions.contains(rulesVersion) else {
                throw ValidationError("--rules-version \(rulesVersion) is not a version this build knows (\(Engine.knownRulesVersions.joined(separator: ", ")))")
            }
            replayer.rulesVersion = rulesVersion
        }
        let tty = isatty(2) == 1
        replayer.progress = { read, head in
            guard tty, head > 0 else { return }
            let pct = min(100, Int(Double(read) / Double(head) * 100))
            FileHandle.standardError.write(Data("\rreplay: \(read)/\(head) events (\(pct)%)".utf8))
        }
        var differences = 0
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            // A name with no history would replay as a clean, empty run (or a what-if changing nothing).
            let named = (userList ?? []) + replayer.injections.compactMap(\.draft.user)
            let unknown = try LogNames.usersWithoutEvents(conn, Array(Set(named)).sorted())
            if !unknown.isEmpty {
                throw noEvents((unknown.count == 1 ? "user " : "users ") + unknown.map { "“\($0)”" }.joined(separator: ", "),
                               plural: unknown.count > 1)
            }
            let count = try EventReader.partitioning(conn).count
            if let partition, partition < 0 || partition >= count {
                throw ValidationError("--partition \(partition) is not one of this database's \(count) partition(s) (0 … \(count - 1))")
            }
            let partitions = partition.map { [$0] } ?? Array(0..<count)
            for p in partitions {
                replayer.partition = p
                let report = try replayer.run(conn) { Date().timeIntervalSince1970 }
                if tty { FileHandle.standardError.write(Data("\n".utf8)) }
                if count > 1 { print("partition \(p):") }
                // A partition whose start was archived is replayed from the snapshot at its retention horizon.
                if let from = report.startedFrom {
                    FileHandle.standardError.write(Data(("note: \(count > 1 ? "partition \(p)" : "the log") was replayed from snapshot \(from.snapshot) "
                        + "(through seq \(from.throughSeq), its retention horizon): the events before it are archived — replay the whole log "
                        + "from herald export --archive imported into a fresh database\n").utf8))
                }
                // A seq past the log's end replays all of it: said, so a typo does not pass for a prefix.
                if case .seq(let s) = replayer.limit, let head = try? EventReader.head(conn), s > head {
                    FileHandle.standardError.write(Data("note: --until \(s) is past the log's last event (seq \(head)): the whole log was replayed\n".utf8))
                }
                // A what-if answers a question: it lists what would change and exits 0 (1 stays "the log
                // and its deliveries differ", an auditor's alarm).
                if !whatIf.isEmpty || rulesVersion != nil {
                    if json {
                        let changes: [JSONValue] = report.changes.map { c in
                            .object(["user": .string(c.user), "subject": .string(c.subject),
                                     "stored": .array(c.stored.map { .string($0) }), "derived": .array(c.derived.map { .string($0) })])
                        }
                        print(JSONValue.object(["whatIf": .bool(true), "eventsRead": .int(Int64(report.eventsRead)),
                                                "changes": .array(changes), "changed": .int(Int64(report.changes.count))]).canonicalString)
                        return
                    }
                    for c in report.changes {
                        print("\(c.user) \(c.subject): \(c.stored.joined(separator: ", ").ifEmpty("(nothing)")) → \(c.derived.joined(separator: ", ").ifEmpty("(nothing)"))")
                    }
                    print("what-if: \(report.changes.count) decisions would change (nothing was written)")
                    return
                }
                differences += report.differences.count
                if json {
                    let diffs: [JSONValue] = report.differences.map { d in
                        .object(["user": .string(d.user), "userIndex": .int(d.userIndex),
                                 "notification": d.notification.map { .string($0) } ?? .null,
                                 "stored": d.stored.map { .string($0) } ?? .null, "derived": d.derived.map { .string($0) } ?? .null])
                    }
                    let rules: [JSONValue] = report.rules.changes.map { c in
                        .object(["fromSeq": .int(c.fromSeq), "at": .string(c.at.rfc3339), "version": .string(c.version)])
                    }
                    print(JSONValue.object(["eventsRead": .int(Int64(report.eventsRead)), "deliveriesCompared": .int(Int64(report.deliveriesCompared)),
                                            "differences": .array(diffs), "eventsPerSecond": .int(Int64(report.eventsPerSecond)),
                                            "rulesVersions": .object(["initial": .string(report.rules.initial), "changes": .array(rules)])]).canonicalString)
                } else {
                    for d in report.differences {
                        print("DIFFERENT user \(d.user) delivery #\(d.userIndex) notification \(d.notification ?? "-")")
                        print("  stored:  \(d.stored ?? "(none)")")
                        print("  derived: \(d.derived ?? "(none)")")
                    }
                    print("replayed \(report.eventsRead) events, compared \(report.deliveriesCompared) deliveries, "
                          + "\(report.differences.count) differences, \(Int(report.eventsPerSecond)) events/s")
                    print("rules versions: \(report.rules.summary)")
                }
            }
        }
        if differences > 0 { throw ExitCode.differences }
    }

    static let whatIfExample = #"{"op":"settings","user":"alice","app":"com.example.mail","delivery":"summary","at":"2026-03-27T00:00:00Z"}"#

    /// Parses a what-if request: a state-changing op as on the wire, plus "at" (RFC 3339). Without
    /// "at" the request is folded before the first event, as if it had always been in force; an "at"
    /// that is not an RFC 3339 time is refused rather than silently read as the start of the log.
    static func injection(_ text: String) throws -> Replayer.Injection {
        let parsed: JSONValue
        do { parsed = try JSONValue.parse(text) } catch {
            throw ValidationError("--what-if “\(text)” is not JSON (\(error)); it takes a request such as \(whatIfExample)")
        }
        guard case .object(var o) = parsed, let op = o.removeValue(forKey: "op")?.stringValue else {
            throw ValidationError("--what-if takes a JSON request with an \"op\", such as \(whatIfExample)")
        }
        let at: Instant
        switch o.removeValue(forKey: "at") {
        case nil: at = Instant.earliestRepresentable
        case let value?:
            guard let text = value.stringValue, let instant = Instant(rfc3339: text) else {
                throw ValidationError("--what-if \"at\": \(value.canonicalString) is not an RFC 3339 time; write it with a date, a T, "
                                      + "seconds and a zone, such as 2026-03-02T08:00:00Z or 2026-03-02T08:00:00+01:00 "
                                      + "(or leave \"at\" out to apply the request before the first event)")
            }
            at = instant
        }
        switch Engine().admit(op: op, request: .object(o), apps: AppRegistry()) {
        case .accepted(let accepted):
            guard let draft = accepted.events.first, draft.user != nil else { throw ValidationError("--what-if needs a per-user request") }
            return Replayer.Injection(at: at, draft: draft)
        case .rejected(let error):
            throw ValidationError("--what-if request rejected: \(error.title). \(error.detail)")
        }
    }
}

extension String {
    func ifEmpty(_ other: String) -> String { isEmpty ? other : self }
}
