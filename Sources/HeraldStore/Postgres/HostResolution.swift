// Database host names resolved apart from libpq, so that a connection started on the service loop never waits for DNS.
import CLibPQ
import Glibc

/// `PQconnectStart` looks a host name up (`getaddrinfo`) before it returns: on the service loop a
/// slow resolver — a failover that changes DNS, a cluster resolver trying search domains — froze
/// every client, timer and consumer for as long as the look-up took. The loop's connector instead
/// resolves the names on another thread (`resolve`) and starts libpq with the addresses as
/// `hostaddr` beside each `host` (`conninfo(_:resolved:)`): libpq then connects without a look-up,
/// and still uses the name for TLS verification and the password file. An address or a socket
/// path needs no look-up; neither does a string that sets `hostaddr` itself.
public enum HostResolution {
    /// The host names `conninfo` (a key=value string or a postgres:// URL) would make libpq look
    /// up, in order, without repeats; empty when it names only addresses and socket paths, sets
    /// `hostaddr`, or does not parse (libpq then reports the error itself).
    public static func namesToResolve(_ conninfo: String, environment: Environment = processEnvironment) -> [String] {
        guard let settings = parsedSettings(conninfo, environment) else { return [] }
        if let hostaddr = value("hostaddr", in: settings), !hostaddr.isEmpty { return [] }
        var names: [String] = []
        for host in hostList(value("host", in: settings)) where needsLookUp(host) && !names.contains(host) {
            names.append(host)
        }
        return names
    }

    /// Looks each name up (blocking: call it off the loop). Every address of a name is kept, in
    /// the resolver's order, so libpq tries them in turn as it would have.
    public static func resolve(_ names: [String]) -> Result<[String: [String]], StoreError> {
        var out: [String: [String]] = [:]
        for name in names {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(name, nil, &hints, &list)
            guard status == 0, let first = list else {
                let reason = status == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(status))
                return .failure(.unavailable("could not resolve the database host “\(name)”: \(reason). "
                    + "Check the host name in the database URL and this machine's DNS; Herald tries again."))
            }
            defer { freeaddrinfo(list) }
            var addresses: [String] = []
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let e = entry {
                var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
                if getnameinfo(e.pointee.ai_addr, e.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                    let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    if !addresses.contains(address) { addresses.append(address) }
                }
                entry = e.pointee.ai_next
            }
            guard !addresses.isEmpty else {
                return .failure(.unavailable("the database host “\(name)” resolved to no address. Check its DNS records; Herald tries again."))
            }
            out[name] = addresses
        }
        return .success(out)
    }

    /// `conninfo` as a key=value string with every resolved host name repeated once per address
    /// and `hostaddr` listing those addresses (empty entries for hosts that needed no look-up,
    /// which libpq then reaches as before); a per-host `port` list is repeated alike.
    public static func conninfo(_ conninfo: String, resolved: [String: [String]],
                                environment: Environment = processEnvironment) -> String {
        guard var settings = parsedSettings(conninfo, environment) else { return conninfo }
        func set(_ keyword: String, _ value: String) {
            if let i = settings.firstIndex(where: { $0.keyword == keyword }) { settings[i].value = value } else { settings.append((keyword, value)) }
        }
        let hosts = hostList(value("host", in: settings))
        let ports = (value("port", in: settings) ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var newHosts: [String] = [], addresses: [String] = [], newPorts: [String] = []
        for (i, host) in hosts.enumerated() {
            let port = ports.count == hosts.count ? ports[i] : nil
            for address in resolved[host] ?? [""] {
                newHosts.append(host)
                addresses.append(address)
                if let port { newPorts.append(port) }
            }
        }
        set("host", newHosts.joined(separator: ","))
        set("hostaddr", addresses.joined(separator: ","))
        if !newPorts.isEmpty { set("port", newPorts.joined(separator: ",")) }
        return ConnectionString.keywordString(settings)
    }

    /// Reads an environment variable (a parameter so tests need not change the process's own).
    public typealias Environment = (String) -> String?

    /// The process's environment, as libpq reads it.
    public static func processEnvironment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

    /// The options `conninfo` sets (libpq's own parser: key=value strings and URLs alike), with
    /// `host`, `hostaddr` and `port` from `PGHOST`, `PGHOSTADDR` and `PGPORT` where the string
    /// leaves them out — libpq would take them from there too. Not when a service file may name
    /// the host (`service=` or `PGSERVICE`): libpq then resolves that host itself, on the loop.
    private static func parsedSettings(_ conninfo: String, _ environment: Environment) -> [(keyword: String, value: String)]? {
        guard let options = PQconninfoParse(conninfo, nil) else { return nil }
        defer { PQconninfoFree(options) }
        var settings = ConnectionString.settings(options)
        let service = value("service", in: settings) ?? environment("PGSERVICE")
        guard service?.isEmpty ?? true else { return settings }
        for (keyword, variable) in [("host", "PGHOST"), ("hostaddr", "PGHOSTADDR"), ("port", "PGPORT")] {
            guard let v = environment(variable), !v.isEmpty else { continue }
            if let i = settings.firstIndex(where: { $0.keyword == keyword }) {
                if settings[i].value.isEmpty { settings[i].value = v }
            } else {
                settings.append((keyword, v))
            }
        }
        return settings
    }

    private static func value(_ keyword: String, in settings: [(keyword: String, value: String)]) -> String? {
        settings.first { $0.keyword == keyword }?.value
    }

    private static func hostList(_ host: String?) -> [String] {
        guard let host, !host.isEmpty else { return [] }
        return host.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    }

    /// Whether libpq would look `host` up: not empty, not a socket directory, not an address.
    private static func needsLookUp(_ host: String) -> Bool {
        guard !host.isEmpty, !host.hasPrefix("/"), !host.hasPrefix("@") else { return false }
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, host, &buffer) != 1 && inet_pton(AF_INET6, host, &buffer) != 1
    }
}
