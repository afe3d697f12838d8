// A real `herald serve` on a fresh database for the client's tests, with the tokens they need.
import Foundation
import HeraldStore
import HeraldTestSupport

/// One `herald serve` child process (restartable on the same port and database) and a tokens file:
/// `ClientTestServer.adminToken` grants every role; `producerToken` may submit for `mail` only.
final class ClientTestServer: @unchecked Sendable {
    static let adminToken = "client-tests-admin-token"
    static let producerToken = "client-tests-producer-token"
    static let mail = "com.example.mail"

    let serve: ServeProcess
    let url: String
    private let files: [String]

    init() throws {
        url = try TestPostgres.freshDatabase()
        let tag = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let tmp = FileManager.default.temporaryDirectory.path
        let tokens = "\(tmp)/herald-client-tokens-\(tag).json", log = "\(tmp)/herald-client-\(tag).log"
        try #"""
        {"tokens":[
          {"name":"admin","token":"\#(Self.adminToken)","roles":["admin","settings","producer","consumer"],"apps":["\#(Self.mail)","com.example.roundtrip"]},
          {"name":"mail","token":"\#(Self.producerToken)","roles":["producer"],"apps":["\#(Self.mail)"]}
        ]}
        """#.write(toFile: tokens, atomically: true, encoding: .utf8)
        files = [tokens, log]
        serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: ["--tokens", tokens, "--log-level", "debug"])
        try serve.start()
    }

    deinit {
        serve.terminate()
        for f in files { try? FileManager.default.removeItem(atPath: f) }
    }

    var port: Int { serve.port }

    /// Submit events stored for `app` (each (app, id) once).
    func storedSubmits(app: String = ClientTestServer.mail) throws -> Int {
        let c = try PGConnection.connect(url)
        defer { c.close() }
        return Int(try c.execute("SELECT count(*) FROM events WHERE type = 'submit' AND app = $1", [app]).int64(0, 0) ?? 0)
    }
}
