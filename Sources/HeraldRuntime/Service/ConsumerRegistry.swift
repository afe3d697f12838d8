// The subscribed consumers: one stream per durable name, each on one connection; and the ephemeral streams.

/// The streams by consumer name. A name streams on one connection at a time: a subscribe on
/// another connection takes it over, and the one it displaced streams nothing more.
struct ConsumerRegistry {
    private(set) var streams: [String: ConsumerStream] = [:]
    /// Names whose `deleteConsumer` is under way: their acks and subscribes are refused meanwhile.
    var deleting: Set<String> = []
    /// Ephemeral streams (no durable cursor, displace nobody), by their connection.
    private(set) var ephemeral: [ObjectIdentifier: ConsumerStream] = [:]

    /// Every stream to wake when deliveries commit.
    var allStreams: [ConsumerStream] { Array(streams.values) + Array(ephemeral.values) }

    /// The streams of a durable name now (its live members).
    func members(of name: String) -> [ConsumerStream] { streams[name].map { [$0] } ?? [] }

    /// An ephemeral stream starts on its connection.
    mutating func subscribedEphemeral(_ stream: ConsumerStream) {
        guard let c = stream.connection else { return }
        ephemeral[ObjectIdentifier(c)] = stream
    }

    /// `deleteConsumer`: the name's streams end; their connections are returned, to be told why and closed.
    mutating func deleted(_ name: String) -> [ClientConnection] {
        guard let s = streams.removeValue(forKey: name) else { return [] }
        defer { s.connection = nil }
        return s.connection.map { [$0] } ?? []
    }

    /// How many consumers are subscribed.
    var count: Int { streams.count }

    /// Whether a consumer of this name is subscribed (on any connection).
    func isSubscribed(_ name: String) -> Bool { streams[name] != nil }

    /// Whether `stream` is still its name's registration (false once a subscribe elsewhere replaced it).
    func isCurrent(_ stream: ConsumerStream) -> Bool {
        if stream.ephemeral { return stream.connection.map { ephemeral[ObjectIdentifier($0)] === stream } ?? false }
        return streams[stream.name] === stream
    }

    /// `stream` now carries its name. A stream of that name on another connection is cut off (it
    /// streams nothing more, whatever callback of it is still armed) and its connection returned,
    /// to be told why and closed.
    mutating func subscribed(_ stream: ConsumerStream) -> ClientConnection? {
        var displaced: ClientConnection?
        if let old = streams[stream.name], let c = old.connection, c !== stream.connection {
            old.connection = nil
            displaced = c
        }
        streams[stream.name] = stream
        return displaced
    }

    /// The connection is closing: the streams on it end.
    mutating func connectionClosing(_ connection: ClientConnection) {
        for (name, s) in streams where s.connection === connection { streams[name] = nil }
        ephemeral[ObjectIdentifier(connection)] = nil
    }

    /// The stream's connection is gone: its registration ends — only its own (a stream replaced by
    /// a subscribe elsewhere may still be woken, by a catch-up read completing, and must not
    /// unregister its successor).
    mutating func streamEnded(_ stream: ConsumerStream) {
        if stream.ephemeral {
            ephemeral = ephemeral.filter { $0.value !== stream }
        } else if isCurrent(stream) {
            streams[stream.name] = nil
        }
    }

    /// The most output bytes queued in the server for one consumer (`stats`).
    var maxQueuedBytes: Int { allStreams.map { $0.connection?.outputBytes ?? 0 }.max() ?? 0 }
}
