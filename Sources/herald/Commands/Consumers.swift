// `herald consumers list|delete`: the admin ops `consumers` and `deleteConsumer` from the command line.
import ArgumentParser
import Foundation
import HeraldClient
import HeraldCommandLine
import HeraldCore

struct Consumers: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List or delete durable consumers of a running herald serve (needs the admin role).",
        discussion: "Both go through the server's admin ops (`consumers`, `deleteConsumer`): the list shows the live connections of each consumer besides what the database holds, and a delete closes those connections before it removes the cursor.",
        subcommands: [List.self, Delete.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every durable consumer: its acknowledged cursor, lag, filter, last ack time and live connections.")
        @OptionGroup var server: ServerConnectionOptions
        @Flag(help: "Print the op's JSON reply instead of a table.") var json = false

        func run() throws {
            let reply = try Consumers.reply(server.withProducer { producer throws(HeraldError) in try await producer.consumers() })
            if json {
                print(reply.canonicalString)
                return
            }
            print(Consumers.table(reply))
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a durable consumer: its live connections are closed (error consumer_deleted), its cursor removed; the name then starts afresh.")
        @OptionGroup var server: ServerConnectionOptions
        @Argument(help: "The consumer's name.") var name: String

        func run() throws {
            let name = name
            let reply = try Consumers.reply(server.withProducer { producer throws(HeraldError) in try await producer.deleteConsumer(name) })
            print("deleted consumer \(name) (acknowledged cursor \(reply["acked"]?.intValue ?? 0), \(reply["closedConnections"]?.intValue ?? 0) live connection(s) closed)")
        }
    }

    /// The reply as the server sent it, less the request number the client put on it.
    static func reply(_ ack: Ack) throws -> JSONValue {
        guard case .object(var members) = try JSONValue.parse(ack.line) else { return .object([:]) }
        members["rid"] = nil
        return .object(members)
    }

    /// The list as aligned columns: name, acked, head, lag, last ack, members, filter.
    static func table(_ reply: JSONValue) -> String {
        var rows = [["CONSUMER", "ACKED", "HEAD", "LAG", "LAST ACK (UTC)", "LIVE", "FILTER"]]
        for c in reply["consumers"]?.arrayValue ?? [] {
            let p = c["partitions"]?.arrayValue?.first
            let filter = c["filter"].flatMap { $0 == .null ? nil : $0.canonicalString } ?? "-"
            rows.append([
                c["consumer"]?.stringValue ?? "", String(p?["acked"]?.intValue ?? 0), String(p?["head"]?.intValue ?? 0),
                String(c["lag"]?.intValue ?? 0), c["ackedAt"]?.stringValue ?? "-",
                (c["members"]?.arrayValue ?? []).map { $0["peer"]?.stringValue ?? "?" }.joined(separator: ",").ifEmpty("-"), filter,
            ])
        }
        let widths = rows[0].indices.map { col in rows.map { $0[col].count }.max() ?? 0 }
        var out = rows.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
        let ephemeral = reply["ephemeral"]?.arrayValue ?? []
        if !ephemeral.isEmpty {
            out.append("ephemeral streams: " + ephemeral.map { "\($0["peer"]?.stringValue ?? "?") at \($0["position"]?.intValue ?? 0)" }.joined(separator: ", "))
        }
        return out.joined(separator: "\n")
    }
}
