// The subscribed consumers: one stream per durable name, each on one connection.

/// The streams by consumer name. A name streams on one connection at a time: a subscribe on
/// another connection takes it over, and the one it displaced streams nothing more.
struct ConsumerRegistry {
    private(set) var streams: [String: ConsumerStream] = [:]

    /// How many consumers are subscribed.
    var count: Int { streams.count }

    /// Whether a consumer of this name is subscribed (on any connection).
    func isSubscribed(_ name: String) -> Bool { streams[name] != nil }

    /// Whether `stream` is still its name's registration (false once a subscribe elsewhere replaced it).
    func isCurrent(_ stream: ConsumerStream) -> Bool { streams[stream.name] === stream }

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
    }

    /// The stream's connection is gone: its registration ends — only its own (a stream replaced by
    /// a subscribe elsewhere may still be woken, by a catch-up read completing, and must not
    /// unregister its successor).
    mutating func streamEnded(_ stream: ConsumerStream) {
        if isCurrent(stream) { streams[stream.name] = nil }
    }

    /// The most output bytes queued in the server for one consumer (`stats`).
    var maxQueuedBytes: Int { streams.values.map { $0.connection?.outputBytes ?? 0 }.max() ?? 0 }
}
