// `HOST:PORT` as the commands' address flags take it (`--listen`, `--plain-listen`, `--connect`).

/// The host and port of `text`, or nil unless it is exactly one `HOST:PORT` with a numeric port.
/// Each command says in its own words which flag was wrong.
public func hostAndPort(_ text: String) -> (host: String, port: Int)? {
    let parts = text.split(separator: ":")
    guard parts.count == 2, let port = Int(parts[1]) else { return nil }
    return (String(parts[0]), port)
}
