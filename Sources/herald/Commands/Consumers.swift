// `herald consumers list|delete`: the admin ops `consumers` and `deleteConsumer` from the command line.
import ArgumentParser
import Foundation
import HeraldWireTesting
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
            let reply = try adminRequest(server, #"{"op":"consumers"}"#)
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
            let reply = try adminRequest(server, JSONValue.object(["op": "deleteConsumer", "consumer": .string(name)]).canonicalString)
            print("deleted consumer \(name) (acknowledged cursor \(reply["acked"]?.intValue ?? 0), \(reply["closedConnections"]?.intValue ?? 0) live connection(s) closed)")
        }
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

/// Sends one admin request after the hello and returns its reply; a refusal ends the command (exit 1).
func adminRequest(_ server: ServerConnectionOptions, _ line: String) throws -> JSONValue {
    do {
        let client = try server.connectAndHello()
        defer { client.close() }
        let reply = try client.request(line)
        guard reply["ok"]?.boolValue == true else {
            let error = reply["error"]
            Log.info("error: \(error?["title"]?.stringValue ?? reply.canonicalString)\n\(error?["detail"]?.stringValue ?? "")")
            throw ExitCode.error
        }
        return reply
    } catch let error as WireClient.Failure {
        Log.info("error: \(error)")
        throw ExitCode.error
    }
}
