// The service's connection log lines as structured records: connection, peer and token fields; ordinary closes at debug.
import HeraldCore
import Logging

extension HeraldService {
    /// A service that logs to `logger`: messages at the level their prefix names
    /// (`LogMessages`), connections' lines with the fields `connection`, `peer` and `token`.
    public convenience init(configuration: ServiceConfiguration, logger: Logger) {
        self.init(configuration: configuration, log: LogMessages.sink(logger))
        self.logger = logger
    }

    /// Closes every client sees in ordinary operation: logged at debug, not as news.
    static func isOrdinaryClose(_ reason: String) -> Bool {
        reason == "client closed the connection" || reason.hasPrefix("server shutting down")
    }

    func logConnectionClosing(_ connection: ClientConnection, reason: String) {
        guard let logger else {
            log("connection \(connection.id) from \(connection.peer) closing: \(reason)")
            return
        }
        let level: Logger.Level = Self.isOrdinaryClose(reason) ? .debug : .info
        guard logger.logLevel <= level else { return }
        var fields = connectionFields(connection)
        if let code = LogMessages.code(in: reason) { fields["code"] = .string(code) }
        logger.log(level: level, "connection closing: \(reason)", metadata: fields)
    }

    func logConnectionWarning(_ connection: ClientConnection, _ message: String) {
        guard let logger else {
            log("warning: connection \(connection.id) from \(connection.peer): \(message)")
            return
        }
        var fields = connectionFields(connection)
        if let op = Self.refusedOp(message) { fields["op"] = .string(op) }
        LogMessages.log("warning: " + message, to: logger, metadata: fields)
    }

    /// The op a refusal names (`refused submit for app …`, `refused hello: …`), if any.
    static func refusedOp(_ message: String) -> String? {
        guard message.hasPrefix("refused ") else { return nil }
        let word = message.dropFirst("refused ".count).prefix(while: { $0.isLetter })
        return Op.allCases.first { $0.name == word }?.name
    }

    func connectionFields(_ connection: ClientConnection) -> Logger.Metadata {
        var fields: Logger.Metadata = ["connection": .stringConvertible(connection.id), "peer": .string(connection.peer)]
        if let grant = connection.session.grant { fields["token"] = .string(grant.name) }
        return fields
    }
}
