// The Swift client over TLS against a real `herald serve` with the test certificates.
import Foundation
import HeraldClient
import HeraldTestSupport
import Testing

@Suite struct TLSClientTests {
    /// With the CA that signed the server's certificate, the producer and the consumer work over
    /// TLS 1.3; a client trusting another CA is refused at the handshake with `tls_failed`.
    @Test func aProducerAndAConsumerWorkOverTLSAndAnUntrustedServerIsRefused() async throws {
        guard TestCertificates.opensslPath != nil else {
            Issue.record("openssl is not installed, so no test certificates can be made (bash scripts/bootstrap)")
            return
        }
        let certificates = try TestCertificates(), stranger = try TestCertificates()
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-client-tls-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let plain = LocalClusterPort.free()
        let serve = try ServeProcess(databaseURL: url, logPath: log, extraArguments: [
            "--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey, "--plain-listen", "127.0.0.1:\(plain)",
        ])
        serve.readinessPort = plain
        try serve.start()
        defer { serve.terminate() }

        let tls = TLSOptions(caFile: certificates.caFile)
        let herald = try await HeraldProducer.connect(port: serve.port, tls: tls)
        #expect(herald.tlsProtocol == "TLSv1.3")
        try await herald.authorization(Authorization(user: "alice", app: "com.example.mail", status: .authorized, options: [.alert]))
        let consumer = try await herald.subscribe(consumer: "push")
        let ack = try await herald.submit(Submit(id: "t1", app: "com.example.mail", user: "alice", title: "Over TLS", hiddenPreviewsBodyPlaceholder: "x"))
        #expect(ack.seq > 0)
        let delivery = try await consumer.next(timeoutMilliseconds: 10_000)
        #expect(delivery?.notification == "t1" && delivery?.kind == .alert)
        await consumer.close()
        await herald.close()

        do {
            _ = try await HeraldProducer.connect(port: serve.port, tls: TLSOptions(caFile: stranger.caFile))
            Issue.record("a server signed by an untrusted CA was accepted")
        } catch {
            #expect(error.code == "tls_failed" && error.title.contains("did not verify"), "\(error)")
        }
    }
}
