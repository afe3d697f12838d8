// TLS over real TCP: producers and consumers over TLS 1.2+, refusals, and client certificates mapped to grants.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestCertificates.opensslPath != nil, "needs the openssl program to make test certificates"))
struct TLSTests {
    static let mail = ServiceTests.mail

    static func tlsServer(_ certs: TestCertificates, clientCA: Bool = false, tokens: String? = nil,
                          configure: (inout ServiceConfiguration) -> Void = { _ in }) throws -> TestServer {
        var tokensFile: String?
        if let tokens {
            tokensFile = certs.directory + "/tokens-\(UInt32.random(in: 0...UInt32.max)).json"
            try tokens.write(toFile: tokensFile!, atomically: true, encoding: .utf8)
        }
        return try TestServer { config in
            config.tls = TLSSettings(certificateFile: certs.serverCertificate, keyFile: certs.serverKey,
                                     clientCAFile: clientCA ? certs.caFile : nil)
            config.tokensFile = tokensFile
            configure(&config)
        }
    }

    @Test func producerAndConsumerWorkOverTLS() throws {
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs)
        defer { server.stop() }
        let producer = try server.tlsClient(TLSClientOptions(caFile: certs.caFile))
        #expect(producer.tlsProtocol == "TLSv1.3")
        try ServiceTests.setUpAlice(producer)
        let ack = try producer.call(ServiceTests.submit("n1", extra: ["rid": 1]))
        #expect(ack["ok"] == true && ack["rid"] == 1)

        let consumer = try server.tlsClient(TLSClientOptions(caFile: certs.caFile))
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        let d = try #require(consumer.deliveries(1).first)
        #expect(d["notification"] == "n1" && d["kind"] == "alert")
        let cursor = try #require(d["cursor"]?.intValue)
        try consumer.send(JSONValue.object(["op": "ack", "consumer": "push", "cursor": .int(cursor)]).canonicalString)
        #expect(try consumer.readJSON()["ok"] == true)
    }

    /// SIGHUP reads `--tls-cert` and `--tls-key` again: later connections get the renewed
    /// certificate, open ones carry on with the session they have, and files that do not load
    /// (here a key that is not the certificate's) change nothing.
    @Test func aRenewedCertificateIsServedAfterSIGHUPWithoutARestart() throws {
        let first = try TestCertificates(), second = try TestCertificates()
        let live = first.directory + "/live"
        try FileManager.default.createDirectory(atPath: live, withIntermediateDirectories: true)
        let certificate = live + "/server.pem", key = live + "/server.key"
        func install(_ from: String, at path: String) throws {
            try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: from, toPath: path)
        }
        try install(first.serverCertificate, at: certificate)
        try install(first.serverKey, at: key)
        let server = try TestServer { $0.tls = TLSSettings(certificateFile: certificate, keyFile: key) }
        defer { server.stop() }
        let open = try server.tlsClient(TLSClientOptions(caFile: first.caFile))
        #expect(try open.call(["op": "ping"])["op"] == "pong")

        try install(second.serverCertificate, at: certificate)
        try install(second.serverKey, at: key)
        let stats = try TokenReloadTests.reload(server, observer: open, until: "certificateReloads", reaches: 1)
        #expect(stats["certificateReloads"] == 1 && stats["certificateReloadFailures"] == 0)
        #expect(throws: (any Error).self, "a client trusting only the old CA now refuses the server") {
            _ = try server.tlsClient(TLSClientOptions(caFile: first.caFile))
        }
        #expect(try server.tlsClient(TLSClientOptions(caFile: second.caFile)).call(["op": "ping"])["op"] == "pong")
        #expect(try open.call(["op": "ping"])["op"] == "pong", "an open connection keeps its session")

        try install(first.serverKey, at: key)
        let after = try TokenReloadTests.reload(server, observer: open, until: "certificateReloadFailures", reaches: 1)
        #expect(after["certificateReloads"] == 1 && after["certificateReloadFailures"] == 1)
        #expect(try server.tlsClient(TLSClientOptions(caFile: second.caFile)).call(["op": "ping"])["op"] == "pong",
                "the renewed certificate stays in use")
    }

    @Test func tls12IsAcceptedAndTLS11IsRefused() throws {
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs)
        defer { server.stop() }
        let tls12 = try server.tlsClient(TLSClientOptions(caFile: certs.caFile, maxVersion: 0x0303))
        #expect(tls12.tlsProtocol == "TLSv1.2")
        #expect(try tls12.call(["op": "ping"])["op"] == "pong")
        // The client offers TLS 1.1 (its security level lowered so OpenSSL 3 will); the server answers with an alert.
        #expect {
            _ = try WireClient(port: server.port, tls: .tls11Only(caFile: certs.caFile))
        } throws: { error in
            "\(error)".contains("protocol version")
        }
        #expect(try tls12.call(["op": "ping"])["op"] == "pong", "the refusal harms no one else")
    }

    @Test func aPlaintextClientOnTheTLSPortIsClosedWithoutAReply() throws {
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs)
        defer { server.stop() }
        let plain = try WireClient(port: server.port)
        try plain.send(#"{"op":"hello","token":"x"}"#)
        // At most a TLS alert record (no newline, not JSON), then the connection ends.
        var ended = false
        do {
            while let line = try plain.readLine(timeoutMilliseconds: 10_000) {
                #expect((try? JSONValue.parse(line)) == nil, "no protocol reply in plaintext")
            }
        } catch WireClient.Failure.closed {
            ended = true
        }
        #expect(ended, "the server closes the connection")
        let ok = try server.tlsClient(TLSClientOptions(caFile: certs.caFile))
        #expect(try ok.call(["op": "ping"])["op"] == "pong")
    }

    @Test func aConnectionWhoseTLSSessionCannotBeMadeIsClosedNotServedInPlaintext() throws {
        // When libevent cannot make the TLS bufferevent (memory exhausted; injected here), the
        // connection is refused: no plaintext bufferevent takes its place on the TLS port.
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs) { $0.tls?.failBuffereventsForTesting = true }
        defer { server.stop() }
        let plain = try WireClient(port: server.port)
        try? plain.send(#"{"op":"ping"}"#)
        var ended = false
        do {
            while let line = try plain.readLine(timeoutMilliseconds: 10_000) {
                Issue.record("a reply in plaintext on the TLS port: \(line)")
            }
            ended = true
        } catch WireClient.Failure.closed {
            ended = true
        } catch {
            ended = "\(error)".contains("reset") || "\(error)".contains("closed")
        }
        #expect(ended, "the server closes the connection")
        #expect(throws: (any Error).self, "a TLS client cannot connect either") {
            _ = try server.tlsClient(TLSClientOptions(caFile: certs.caFile))
        }
    }

    @Test func aClientCertificateActsOnlyForItsApp() throws {
        let certs = try TestCertificates()
        let tokens = #"""
        {"tokens":[
          {"name":"mail-cert","certificate":"mail.producers.test","roles":["producer"],"apps":["com.example.mail"]},
          {"name":"ops","sha256":"\#(SHA256.hex("ops-secret-token".utf8))","roles":["admin","settings","consumer"]}]}
        """#
        let server = try Self.tlsServer(certs, clientCA: true, tokens: tokens)
        defer { server.stop() }
        let ops = try server.tlsClient(TLSClientOptions(caFile: certs.caFile), token: "ops-secret-token")
        try ServiceTests.setUpAlice(ops)

        let identity = try certs.client("mail.producers.test")
        let mail = try server.tlsClient(TLSClientOptions(caFile: certs.caFile, certificateFile: identity.certificate, keyFile: identity.key),
                                        hello: false)
        let hello = try mail.call(["op": "hello"])
        #expect(hello["ok"] == true && hello["roles"] == ["producer"] && hello["apps"] == [.string(Self.mail)])
        #expect(try mail.call(ServiceTests.submit("c1"))["ok"] == true)
        var other = ServiceTests.submit("c2")
        if case .object(var o) = other { o["app"] = "com.example.bank"; other = .object(o) }
        #expect(try mail.call(other)["error"]?["code"] == "forbidden_app")

        // A certificate the CA did not sign fails the handshake; one it signed but the tokens file
        // does not name grants nothing by itself.
        let stranger = try certs.untrustedClient("mail.producers.test")
        #expect {
            let c = try WireClient(port: server.port, tls: TLSClientOptions(caFile: certs.caFile, certificateFile: stranger.certificate, keyFile: stranger.key))
            // TLS 1.3: the server's verdict on the client certificate arrives after the client's handshake ends.
            _ = try c.readLine(timeoutMilliseconds: 10_000)
        } throws: { error in
            "\(error)".contains("unknown ca")
        }
        let unnamed = try certs.client("someone.else")
        let u = try server.tlsClient(TLSClientOptions(caFile: certs.caFile, certificateFile: unnamed.certificate, keyFile: unnamed.key), hello: false)
        #expect(try u.call(["op": "hello"])["error"]?["code"] == "invalid_token")
    }

    /// With `--tls-client-crl`, a client certificate its CA revoked fails the handshake; SIGHUP reads
    /// a renewed list (open connections keep their sessions), and a file that is no CRL changes nothing.
    @Test func aRevokedClientCertificateFailsTheHandshakeAndSIGHUPReadsANewList() throws {
        let certs = try TestCertificates()
        let tokens = #"""
        {"tokens":[
          {"name":"mail-cert","certificate":"mail.producers.test","roles":["producer"],"apps":["com.example.mail"]},
          {"name":"old-cert","certificate":"old.producers.test","roles":["producer"],"apps":["com.example.mail"]}]}
        """#
        let mail = try certs.client("mail.producers.test"), old = try certs.client("old.producers.test")
        try certs.revoke(old.certificate)
        let live = certs.directory + "/live-crl.pem"
        func install(_ from: String) throws {
            try? FileManager.default.removeItem(atPath: live)
            try FileManager.default.copyItem(atPath: from, toPath: live)
        }
        try install(try certs.revocationList())
        let server = try Self.tlsServer(certs, clientCA: true, tokens: tokens) { $0.tls?.clientCRLFile = live }
        defer { server.stop() }
        func client(_ identity: (certificate: String, key: String)) throws -> WireClient {
            try WireClient(port: server.port, tls: TLSClientOptions(caFile: certs.caFile, certificateFile: identity.certificate, keyFile: identity.key))
        }
        func refused(_ identity: (certificate: String, key: String)) -> Bool {
            do {
                let c = try client(identity)
                // TLS 1.3: the server's verdict on the client certificate arrives after the client's handshake ends.
                _ = try c.readLine(timeoutMilliseconds: 10_000)
                return false
            } catch {
                return "\(error)".contains("certificate revoked")
            }
        }
        let open = try client(mail)
        #expect(try open.call(["op": "hello"])["roles"] == ["producer"])
        #expect(refused(old), "the revoked certificate fails the handshake")

        try certs.revoke(mail.certificate)
        try install(try certs.revocationList())
        let stats = try TokenReloadTests.reload(server, observer: open, until: "certificateReloads", reaches: 1)
        #expect(stats["certificateReloads"] == 1 && stats["certificateReloadFailures"] == 0)
        #expect(refused(mail), "SIGHUP read the list that revokes it")
        #expect(try open.call(["op": "ping"])["op"] == "pong", "an open connection keeps its session")

        try "not a revocation list".write(toFile: live, atomically: true, encoding: .utf8)
        let after = try TokenReloadTests.reload(server, observer: open, until: "certificateReloadFailures", reaches: 1)
        #expect(after["certificateReloads"] == 1 && after["certificateReloadFailures"] == 1)
        #expect(refused(mail), "the last list that loaded stays in force")
    }

    @Test func aClientCRLNeedsTheClientCAAndMustHoldRevocationLists() throws {
        let certs = try TestCertificates()
        #expect {
            _ = try TLSContext(TLSSettings(certificateFile: certs.serverCertificate, keyFile: certs.serverKey, clientCRLFile: certs.caFile))
        } throws: { "\($0)".contains("without --tls-client-ca") }
        #expect {
            _ = try TLSContext(TLSSettings(certificateFile: certs.serverCertificate, keyFile: certs.serverKey,
                                           clientCAFile: certs.caFile, clientCRLFile: certs.caFile))
        } throws: { "\($0)".contains("\(certs.caFile) (--tls-client-crl) could not be loaded") }
        #expect {
            _ = try TLSContext(TLSSettings(certificateFile: certs.serverCertificate, keyFile: certs.serverKey,
                                           clientCAFile: certs.caFile, clientCRLFile: "/nonexistent/ca.crl"))
        } throws: { "\($0)".contains("/nonexistent/ca.crl (--tls-client-crl) cannot be read") }
        _ = try TLSContext(TLSSettings(certificateFile: certs.serverCertificate, keyFile: certs.serverKey,
                                       clientCAFile: certs.caFile, clientCRLFile: try certs.revocationList()))
    }

    @Test func aLoopbackPlaintextPortCanServeBesideTLS() throws {
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs) { $0.plaintextListen = ("127.0.0.1", 0) }
        defer { server.stop() }
        let plainPort = try #require(server.service.plaintextPort)
        let plain = try WireClient(port: plainPort)
        #expect(try plain.call(["op": "ping"])["op"] == "pong")
    }

    @Test func aClientThatNeverFinishesTheHandshakeIsClosedAtTheHelloDeadline() throws {
        let certs = try TestCertificates()
        let server = try Self.tlsServer(certs) { $0.helloTimeoutMilliseconds = 300 }
        defer { server.stop() }
        let silent = try WireClient(port: server.port)  // TCP only: no ClientHello is ever sent
        #expect {
            while try silent.readLine(timeoutMilliseconds: 10_000) != nil {}
        } throws: { error in
            if case WireClient.Failure.closed = error { true } else { false }
        }
    }

    @Test func aPlaintextPortBesideTLSMustBeOnLoopback() throws {
        let certs = try TestCertificates()
        #expect {
            _ = try Self.tlsServer(certs) { $0.plaintextListen = ("0.0.0.0", 0) }
        } throws: { error in
            "\(error)".contains("loopback")
        }
    }

    @Test func aMissingCertificateFileIsNamedWithItsFlag() throws {
        var config = ServiceConfiguration(databaseURL: "unused")
        config.tls = TLSSettings(certificateFile: "/nonexistent/herald.pem", keyFile: "/nonexistent/herald.key")
        #expect {
            _ = try TLSContext(config.tls!)
        } throws: { error in
            "\(error)".contains("/nonexistent/herald.pem (--tls-cert)")
        }
    }
}
