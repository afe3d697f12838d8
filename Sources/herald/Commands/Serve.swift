// `herald serve`: the TCP service on its libevent loop.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the service: producers and the settings service submit over TCP, consumers receive deliveries.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "HOST:PORT to listen on.") var listen = "127.0.0.1:7411"
    /// Not an option: `--port` is what many servers take, and ArgumentParser's nearest-name
    /// suggestion for it was `--start`. Given, it is refused with a pointer to `--listen`.
    @Option(name: .customLong("port"), help: .hidden) var portFlag: String?
    @Option(help: "system (default) or manual (moved only by the admin clock op).") var clock = "system"
    @Option(help: "The manual clock's first instant (RFC 3339).") var start: String?
    @Option(help: "JSON file of tokens and their roles (reloaded on SIGHUP); without it, dev mode grants every role.") var tokens: String?
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain: serve TLS (1.2+) on --listen (read again, with --tls-key, on SIGHUP).") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key of --tls-cert.") var tlsKey: String?
    @Option(name: .customLong("tls-client-ca"), help: "PEM CA certificates for optional client certificates (mapped to grants by the tokens file).")
    var tlsClientCA: String?
    @Option(name: .customLong("tls-client-crl"), help: "PEM revocation lists of --tls-client-ca: revoked client certificates fail the handshake (read again on SIGHUP).")
    var tlsClientCRL: String?
    @Option(name: .customLong("plain-listen"), help: "With TLS: also serve plaintext on this loopback HOST:PORT (local tools).")
    var plainListen: String?
    @Option(help: "Maximum client connections.") var maxConnections = 10_000
    @Option(help: "Serve as a cluster member named NAME: one of several instances sharing the database's partitions, each forwarding what the others own (docs/operations.md, \"Several instances\").")
    var instance: String?
    @Option(name: .customLong("peer-token-file"), help: "A cluster member's token for forwarding to the other instances (a file holding one token with every role in their --tokens; not needed in dev mode).")
    var peerTokenFile: String?
    @Option(help: "HOST:PORT where clients reach this instance, published in its leases and hello's routes (default: --listen).")
    var advertise: String?
    @Option(name: .customLong("lease-ttl"), help: "Seconds a partition's lease lasts without renewal (renewed every third of it).")
    var leaseTTL: Double = 5
    @Option(help: "Write a snapshot of every user's state after this many events (0: never); start-up loads the latest and folds only the events after it.")
    var snapshotEvery = 250_000
    @Option(help: "With many users, snapshot at most every this many events per user instead (a capture's cost grows with the users; 0: --snapshot-every alone).")
    var snapshotEventsPerUser = 1
    @Flag(help: "Serve even if PostgreSQL runs with fsync or synchronous_commit off (acknowledged events may be lost).")
    var unsafeDurability = false
    @OptionGroup var writer: WriterOptions
    @OptionGroup var logging: LogOptions
    @Option(help: "HOST:PORT to serve HTTP on: /metrics (Prometheus), /healthz, /readyz (off unless given).") var http: String?
    /// The reliability experiments' negative control; hidden, and never for production.
    @Flag(name: .customLong("unsafe-acknowledge-before-commit-for-testing"), help: .hidden)
    var acknowledgeBeforeCommitForTesting = false

    func run() throws {
        logging.configure(instance: LogOptions.defaultInstance())
        if let portFlag {
            Log.info("error: serve has no --port: use --listen HOST:PORT (e.g. --listen 127.0.0.1:\(Int(portFlag) ?? 7411))")
            throw ExitCode.error
        }
        guard let (host, port) = hostAndPort(listen) else {
            Log.info("error: --listen must be HOST:PORT, e.g. 127.0.0.1:7411")
            throw ExitCode.error
        }
        if let advertise, hostAndPort(advertise) == nil {
            Log.info("error: --advertise must be HOST:PORT, e.g. herald-1.internal:7411")
            throw ExitCode.error
        }
        guard leaseTTL >= 0.5, leaseTTL <= 600 else {
            Log.info("error: --lease-ttl \(leaseTTL) is out of range: use 0.5 … 600 seconds")
            throw ExitCode.error
        }
        var plainAddress: (host: String, port: Int)?
        if let plainListen {
            guard let address = hostAndPort(plainListen) else {
                Log.info("error: --plain-listen must be HOST:PORT on loopback, e.g. 127.0.0.1:7412")
                throw ExitCode.error
            }
            plainAddress = address
        }
        var httpAddress: (host: String, port: Int)?
        if let http {
            guard let address = hostAndPort(http) else {
                Log.info("error: --http must be HOST:PORT, e.g. 127.0.0.1:9411")
                throw ExitCode.error
            }
            httpAddress = address
        }
        // A port in use is told before any database work (migrations, a restore), not minutes after.
        do throws(ServiceError) {
            try Listener.checkAvailable(host: host, port: port)
            if let plainAddress { try Listener.checkAvailable(host: plainAddress.host, port: plainAddress.port, flag: "--plain-listen") }
            if let httpAddress { try Listener.checkAvailable(host: httpAddress.host, port: httpAddress.port, flag: "--http") }
        } catch {
            Log.info("error: \(error)")
            throw ExitCode.error
        }
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close { Log.info($0) } }
            var config = ServiceConfiguration(databaseURL: location.url)
            config.host = host
            config.port = port
            config.maxConnections = maxConnections
            config.snapshotEveryEvents = snapshotEvery > 0 ? snapshotEvery : nil
            config.snapshotEventsPerUser = snapshotEventsPerUser
            config.allowUnsafeDurability = unsafeDurability
            writer.apply(to: &config)
            if acknowledgeBeforeCommitForTesting {
                Log.info("WARNING: --unsafe-acknowledge-before-commit-for-testing: requests are acknowledged before they are stored; acknowledged events WILL be lost in a crash. Only for testing the reliability checker.")
                config.acknowledgeBeforeCommitForTesting = true
            }
            switch clock {
            case "system": config.clock = .system
            case "manual":
                guard let startText = start ?? Optional("2026-01-01T00:00:00Z"), let instant = Instant(rfc3339: startText) else {
                    Log.info("error: --start must be an RFC 3339 instant such as 2026-03-29T00:00:00Z")
                    throw ExitCode.error
                }
                config.clock = .manual(start: instant)
            default:
                Log.info("error: --clock must be system or manual")
                throw ExitCode.error
            }
            config.tokensFile = tokens
            switch (tlsCert, tlsKey) {
            case (nil, nil):
                if tlsClientCA != nil || tlsClientCRL != nil || plainListen != nil {
                    Log.info("error: --tls-client-ca, --tls-client-crl and --plain-listen need TLS: pass --tls-cert and --tls-key too")
                    throw ExitCode.error
                }
            case (let cert?, let key?):
                config.tls = TLSSettings(certificateFile: cert, keyFile: key, clientCAFile: tlsClientCA, clientCRLFile: tlsClientCRL)
            default:
                Log.info("error: TLS needs both --tls-cert and --tls-key (the certificate and its private key)")
                throw ExitCode.error
            }
            if let plainAddress { config.plaintextListen = plainAddress }
            config.instanceName = instance
            config.advertise = advertise
            config.leaseTTLMilliseconds = Int64(leaseTTL * 1000)
            if instance != nil {
                try serveAsMember(config, http: httpAddress)
                return
            }
            let service = HeraldService(configuration: config, logger: Log.logger)
            var observability: ServiceObservability?
            do {
                try service.start()
                if let httpAddress {
                    observability = try HTTPSide.start(service, host: httpAddress.host, port: httpAddress.port)
                }
            } catch let error as ServiceError {
                Log.info("error: \(error)")
                throw ExitCode.error
            }
            service.run()
            observability?.stop()
            Log.info("stopped")
        }
    }

    /// `--instance`: a cluster member (a router and the services of the partitions it holds).
    private func serveAsMember(_ config: ServiceConfiguration, http: (host: String, port: Int)?) throws {
        let member = ClusterMember(configuration: config, log: LogMessages.sink(Log.logger))
        if let peerTokenFile {
            guard let text = try? String(contentsOfFile: peerTokenFile, encoding: .utf8),
                  case let token = text.trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
                Log.info("error: --peer-token-file \(peerTokenFile) cannot be read or is empty: it holds the token this instance presents to the others")
                throw ExitCode.error
            }
            member.peerToken = token
        }
        do {
            // Before the start, so that the partitions it takes publish their series from the first.
            if let http { try HTTPSide.start(member, host: http.host, port: http.port) }
            try member.start()
        } catch let error as ServiceError {
            Log.info("error: \(error)")
            throw ExitCode.error
        }
        member.run()
        Log.info("stopped")
    }
}
