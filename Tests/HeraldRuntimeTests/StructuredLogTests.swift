// `herald serve --log-format json|text --log-level`: one record a line with its time, level, message and fields; ordinary closes at debug.
import Foundation
import Glibc
import HeraldWireTesting
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Logging
import Testing

@Suite struct StructuredLogTests {
    static func logPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.path + "/herald-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
    }

    /// Runs a real `herald serve` with `arguments`, opens a connection that says hello and
    /// closes, and one whose line is too long (closed by the server), then stops it; returns its stderr lines.
    static func serveAndClose(_ arguments: [String]) throws -> [String] {
        let url = try TestPostgres.freshDatabase()
        let log = logPath("structured-log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: arguments)
        try serve.start()
        let client = try WireClient(port: serve.port)
        #expect(try client.request(#"{"op":"hello","token":"x"}"#)["ok"] == true)
        client.close()
        let rude = try WireClient(port: serve.port)
        try rude.send(String(repeating: "x", count: 70_000))
        _ = try? rude.readLine(timeoutMilliseconds: 5_000)
        rude.close()
        usleep(200_000)
        #expect(serve.terminate(), "serve stops on SIGTERM")
        return try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test func jsonLogsAreOneObjectALineWithTimeLevelMessageAndFields() throws {
        let lines = try Self.serveAndClose(["--log-format", "json", "--log-level", "debug"])
        #expect(!lines.isEmpty)
        var records: [JSONValue] = []
        for line in lines {
            let record = try? JSONValue.parse(Array(line.utf8))
            #expect(record != nil, "every stderr line is a JSON object: \(line)")
            guard let record else { continue }
            #expect(line.hasPrefix(#"{"ts":""#), "ts comes first: \(line)")
            #expect(record["ts"]?.stringValue.flatMap { Instant(rfc3339: $0) } != nil, "ts is an RFC 3339 instant: \(line)")
            #expect(["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(record["level"]?.stringValue ?? ""), "\(line)")
            #expect(record["msg"]?.stringValue?.isEmpty == false, "\(line)")
            #expect(record["instance"]?.stringValue?.isEmpty == false, "every line names the instance: \(line)")
            records.append(record)
        }
        let listening = records.first { $0["msg"]?.stringValue?.hasPrefix("listening on 127.0.0.1:") == true }
        #expect(listening?["level"] == "info")
        // A client closing its end is ordinary: debug, with the connection's fields.
        let ordinary = records.first { $0["msg"] == "connection closing: client closed the connection" }
        #expect(ordinary?["level"] == "debug")
        #expect(ordinary?["connection"]?.intValue != nil)
        #expect(ordinary?["peer"]?.stringValue?.hasPrefix("127.0.0.1:") == true)
        // A line over the limit is news: info, with the refusal's code.
        let tooLong = records.first { $0["msg"]?.stringValue?.contains("sent a line over") == true }
        #expect(tooLong?["level"] == "info", "\(tooLong?.canonicalString ?? "no close for the long line")")
        #expect(records.contains { $0["msg"]?.stringValue?.hasPrefix("shutting down") == true })
    }

    @Test func textLogsCarryATimestampAndLevelAndLeaveOrdinaryClosesOutAtInfo() throws {
        let lines = try Self.serveAndClose([])
        #expect(!lines.isEmpty)
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 2)
            #expect(parts.count == 3, "\(line)")
            guard parts.count == 3 else { continue }
            #expect(Instant(rfc3339: String(parts[0])) != nil, "a line starts with its time: \(line)")
            #expect(["info", "notice", "warning", "error", "critical"].contains(String(parts[1])), "then its level: \(line)")
        }
        #expect(lines.contains { $0.contains(" info listening on 127.0.0.1:") && $0.contains(" instance=") })
        #expect(!lines.contains { $0.contains("client closed the connection") }, "ordinary closes are debug, below --log-level info")
        #expect(lines.contains { $0.contains("connection closing: sent a line over") && $0.contains(" connection=") && $0.contains(" peer=127.0.0.1:") })
    }

    @Test func serveRefusesAnUnknownLogFormatOrLevel() throws {
        let binary = try ServeProcess.findBinary()
        for (flag, value, says) in [("--log-format", "xml", "--log-format must be text or json"),
                                    ("--log-level", "loud", "--log-level must be one of")] {
            let r = try DeploymentFilesTests.run(binary, ["serve", flag, value])
            #expect(r.status != 0)
            #expect(r.stderr.contains(says), "\(r.stderr)")
        }
    }

    @Test func messagesTakeTheirLevelFromTheirPrefixAndTheirCodeFromTheEnd() {
        #expect(LogMessages.classify("warning: dev mode") == (.warning, "dev mode"))
        #expect(LogMessages.classify("WARNING: fsync off") == (.warning, "fsync off"))
        #expect(LogMessages.classify("error: SIGHUP: bad file") == (.error, "SIGHUP: bad file"))
        #expect(LogMessages.classify("notice: lock retaken") == (.notice, "lock retaken"))
        #expect(LogMessages.classify("listening on x") == (.info, "listening on x"))
        #expect(LogMessages.code(in: "refused hello: no such token (invalid_token)") == "invalid_token")
        #expect(LogMessages.code(in: "refused hello: x (invalid_token); closing: 5 hellos refused") == "invalid_token")
        #expect(LogMessages.code(in: "snapshot 3 complete (12 users)") == nil)
        #expect(LogMessages.code(in: "no hello within 10 s") == nil)
    }

    /// A refusal's warning carries the refused op and the code as fields, with the connection's.
    @Test func aRefusalIsAWarningWithItsOpAndCode() throws {
        let tokens = FileManager.default.temporaryDirectory.path + "/herald-log-tokens-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        try #"{"tokens":[{"name":"reader","token":"reader-token-123","roles":["consumer"]}]}"#.write(toFile: tokens, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: tokens) }
        let url = try TestPostgres.freshDatabase()
        let log = Self.logPath("refusal-log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--log-format", "json", "--tokens", tokens])
        try serve.start()
        let client = try WireClient(port: serve.port)
        #expect(try client.request(#"{"op":"hello","token":"reader-token-123"}"#)["ok"] == true)
        #expect(try client.request(#"{"op":"submit","app":"com.example.mail","user":"u1","id":"n1","title":"Hi"}"#)["ok"] == false)
        let wrong = try WireClient(port: serve.port)
        #expect(try wrong.request(#"{"op":"hello","token":"not-a-token"}"#)["ok"] == false)
        client.close()
        wrong.close()
        #expect(serve.terminate())
        let records = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap { try? JSONValue.parse(Array($0.utf8)) }
        let forbidden = records.first { $0["code"] == "forbidden" }
        #expect(forbidden?["level"] == "warning" && forbidden?["op"] == "submit" && forbidden?["token"] == "reader", "\(records.map(\.canonicalString))")
        #expect(forbidden?["connection"]?.intValue != nil && forbidden?["peer"]?.stringValue?.hasPrefix("127.0.0.1:") == true)
        let refusedHello = records.first { $0["code"] == "invalid_token" }
        #expect(refusedHello?["level"] == "warning" && refusedHello?["op"] == "hello", "\(records.map(\.canonicalString))")
    }

    @Test func fieldsFollowTheMessageInKeyOrderAndStringsAreEscaped() {
        let fields: Logger.Metadata = ["peer": "127.0.0.1:5", "connection": .stringConvertible(7), "msg": "ignored", "why": "a \"b\" c"]
        #expect(LineLogHandler.line(format: .json, level: .info, message: "say \"hi\"\n", fields: fields, timestamp: "2026-01-01T00:00:00.000Z")
                == #"{"ts":"2026-01-01T00:00:00.000Z","level":"info","msg":"say \"hi\"\n","connection":7,"peer":"127.0.0.1:5","why":"a \"b\" c"}"#)
        #expect(LineLogHandler.line(format: .text, level: .warning, message: "m", fields: fields, timestamp: "T")
                == #"T warning m connection=7 peer=127.0.0.1:5 why="a \"b\" c""#)
        #expect(LineLogHandler.line(format: .plain, level: .error, message: "error: x", fields: [:], timestamp: "T") == "herald: error: x")
    }
}
