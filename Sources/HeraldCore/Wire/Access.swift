// Who may do what: tokens, roles and grants (the role each op needs is in `Op`).

/// The four kinds of clients (SPEC §1) plus operators.
public enum Role: String, Hashable, Sendable, CaseIterable {
    case producer, settings, consumer, admin
}

/// What a valid hello grants a connection.
public struct Grant: Hashable, Sendable {
    public var name: String
    public var roles: Set<Role>
    /// Apps a producer may act for; nil means any app.
    public var apps: Set<String>?
    /// Durable consumer names a consumer may subscribe and ack as; nil means any name but the
    /// `reservedConsumers`.
    public var consumers: Set<String>?
    /// Without a `consumers` list: the names other entries of the tokens file list, which only
    /// they may use, so an unbound consumer token cannot take over a bound name's stream and
    /// cursor.
    public var reservedConsumers: Set<String> = []

    public init(name: String, roles: Set<Role>, apps: Set<String>?, consumers: Set<String>? = nil) {
        self.name = name; self.roles = roles; self.apps = apps; self.consumers = consumers
    }

    /// Dev mode: everything, for every app.
    public static let everything = Grant(name: "dev", roles: Set(Role.allCases), apps: nil)

    public func mayActFor(app: String) -> Bool { apps.map { $0.contains(app) } ?? true }

    /// Whether this grant may subscribe or ack as the durable consumer `name`.
    public func mayConsumeAs(_ name: String) -> Bool { consumers.map { $0.contains(name) } ?? !reservedConsumers.contains(name) }
}

/// The SHA-256 of a token: the key under which the tokens table keeps a grant. The table never
/// holds a token itself, only its digest (see `docs/security.md`).
public struct TokenDigest: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// The digest of a presented token.
    public init(token: String) { bytes = SHA256.digest(token.utf8) }

    /// A digest written as 64 hex digits (either case), as `herald token hash` prints it.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let high = Self.nibble(digits[i]), let low = Self.nibble(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        bytes = out
    }

    /// 64 lowercase hex digits.
    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// The configured credentials and their grants. Empty means dev mode: every hello is granted
/// every role.
///
/// Tokens are kept only as SHA-256 digests and looked up by the digest of the presented token.
/// Why that does not leak timing usefully: the dictionary compares digests, never the secret,
/// and an attacker cannot choose a token whose digest shares a prefix with a stored one (that
/// would take a preimage), so how long a lookup takes says nothing about any stored token.
/// Swift's per-process random hash seed also decorrelates bucket timing across processes.
public struct TokenTable: Sendable {
    private var grants: [TokenDigest: Grant]
    /// Client-certificate names (subject CN, DNS or URI SAN) → grant.
    private var certificates: [String: Grant]
    /// Names of entries written with a plain `token` rather than its `sha256` (warned about at start-up).
    public private(set) var plainTokenEntries: [String] = []

    /// A table of plain tokens (tests, tools); they are hashed here.
    public init(_ plainTokens: [String: Grant] = [:]) {
        grants = Dictionary(uniqueKeysWithValues: plainTokens.map { (TokenDigest(token: $0.key), $0.value) })
        certificates = [:]
    }

    init(digests: [TokenDigest: Grant], certificates: [String: Grant], plainTokenEntries: [String]) {
        self.grants = digests
        self.certificates = certificates
        self.plainTokenEntries = plainTokenEntries
    }

    public var isDevMode: Bool { grants.isEmpty && certificates.isEmpty }

    /// How many credentials (token digests and certificate names) the table holds.
    public var count: Int { grants.count + certificates.count }

    /// The names of the entries with the consumer role and no `consumers` list, sorted: each may
    /// subscribe and ack as any consumer name no entry lists, another such entry's included (warned about at start-up when
    /// there are two or more).
    public var consumerEntriesWithoutNames: [String] {
        Set((grants.values.map { $0 } + certificates.values.map { $0 })
            .filter { $0.roles.contains(.consumer) && $0.consumers == nil }.map(\.name)).sorted()
    }

    public func grant(for token: String?) -> Grant? {
        if isDevMode { return .everything }
        guard let token else { return nil }
        return grants[TokenDigest(token: token)]
    }

    public func grant(for digest: TokenDigest) -> Grant? {
        if isDevMode { return .everything }
        return grants[digest]
    }

    /// The grant of a verified client certificate with these names (CN, SANs): the one grant
    /// they map to, or nil when none maps or two names map to different grants (ambiguous).
    public func grant(forCertificateNames names: [String]) -> Grant? {
        let found = Set(names.compactMap { certificates[$0] })
        return found.count == 1 ? found.first : nil
    }

    /// Parses a tokens file:
    /// `{"tokens":[{"name":"mail","sha256":"<64 hex>","roles":["producer"],"apps":["com.example.mail"]},
    ///  {"name":"mail-cert","certificate":"mail.producers.example","roles":["producer"],"apps":["com.example.mail"]}]}`.
    /// Each entry names its credential: `sha256` (the token's digest, from `herald token hash`),
    /// `token` (plain; accepted but warned about), and/or `certificate` (a client-certificate name).
    public static func parse(_ json: JSONValue) throws(RequestError) -> TokenTable {
        func bad(_ why: String) -> RequestError {
            RequestError(code: "invalid_tokens_file", title: "The tokens file is not valid", detail: why)
        }
        guard let list = json["tokens"]?.arrayValue else { throw bad("It must be an object with a \"tokens\" array.") }
        // A misspelt key ("consumer" for "consumers") would leave an entry with more rights than
        // meant, without a word: every key must be one the loader reads.
        if let other = json.objectValue?.keys.sorted().first(where: { !Self.fileKeys.contains($0) }) {
            throw bad("It has the unknown key “\(clipped(other))”; the file's keys are \(Self.fileKeys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")).")
        }
        if list.isEmpty {
            throw bad("The \"tokens\" array is empty, which would let no one in. List at least one entry, or run without --tokens for dev mode.")
        }
        var digests: [TokenDigest: Grant] = [:]
        var certificates: [String: Grant] = [:]
        var plain: [String] = []
        var grants: [Grant] = []
        var named: [String: Int] = [:]
        for (i, entry) in list.enumerated() {
            let name = entry["name"]?.stringValue ?? "token-\(i)"
            guard let keys = entry.objectValue?.keys else { throw bad("Entry \(i) is not an object.") }
            if let other = keys.sorted().first(where: { !Self.entryKeys.contains($0) }) {
                throw bad("Entry \(i) (\(name)) has the unknown key “\(clipped(other))”; an entry's keys are \(Self.entryKeys.sorted().map { "\"\($0)\"" }.joined(separator: ", ")). A misspelt key would leave the entry with other rights than meant.")
            }
            var digest: TokenDigest?
            if let hex = entry["sha256"] {
                guard let text = hex.stringValue, let d = TokenDigest(hex: text) else {
                    throw bad("Entry \(i) (\(name)) has a \"sha256\" that is not 64 hex digits; print it with: herald token hash < token-file")
                }
                digest = d
            }
            if let token = entry["token"] {
                guard digest == nil else { throw bad("Entry \(i) (\(name)) has both \"token\" and \"sha256\"; keep only \"sha256\".") }
                guard let text = token.stringValue, text.utf8.count >= 8 else {
                    throw bad("Entry \(i) (\(name)) needs a \"token\" string of at least 8 characters.")
                }
                digest = TokenDigest(token: text)
                plain.append(name)
            }
            var certificate: String?
            if let c = entry["certificate"] {
                guard let text = c.stringValue, !text.isEmpty else {
                    throw bad("Entry \(i) (\(name)) has a \"certificate\" that is not a non-empty string (a client certificate's CN or SAN).")
                }
                certificate = text
            }
            guard digest != nil || certificate != nil else {
                throw bad("Entry \(i) (\(name)) has no credential: give \"sha256\" (from herald token hash), \"token\" or \"certificate\".")
            }
            var roles = Set<Role>()
            for r in entry["roles"]?.arrayValue ?? [] {
                guard let roleName = r.stringValue, let role = Role(rawValue: roleName) else {
                    throw bad("Entry \(i) has an unknown role \(r.canonicalString); roles are producer, settings, consumer, admin.")
                }
                roles.insert(role)
            }
            if roles.isEmpty { throw bad("Entry \(i) grants no roles.") }
            let apps = entry["apps"]?.arrayValue.map { Set($0.compactMap(\.stringValue)) }
            if roles.contains(.producer) && apps == nil {
                throw bad("Entry \(i) is a producer without an \"apps\" list; list the apps it may submit for.")
            }
            if apps != nil && !roles.contains(.producer) {
                throw bad("Entry \(i) (\(name)) lists \"apps\" without the producer role: apps scope only what a producer may submit and withdraw (settings, consumer and admin rights cover every app, SPEC §5). Remove \"apps\", or add the producer role.")
            }
            if apps?.contains("*") == true {
                throw bad("Entry \(i) (\(name)) lists the app “*”: there is no wildcard app; list each app the producer may submit for.")
            }
            var consumers: Set<String>?
            if let list = entry["consumers"] {
                guard let names = list.arrayValue?.compactMap(\.stringValue), names.count == list.arrayValue?.count, !names.isEmpty else {
                    throw bad("Entry \(i) (\(name)) has a \"consumers\" that is not a non-empty list of names (the durable consumer names it may subscribe and ack as).")
                }
                consumers = Set(names)
            }
            // Requests must name apps and consumers in NFC (`identifier_not_nfc`): a name spelled
            // otherwise here would be listed at hello and then refused in every request.
            for (list, what) in [(apps, "app"), (consumers, "consumer")] {
                if let other = list?.sorted().first(where: { !$0.isNFC }) {
                    throw bad("Entry \(i) (\(name)) lists the \(what) “\(clipped(other))” not in Unicode Normalization Form C; requests "
                        + "must name it in NFC, so write it in NFC here too (e.g. Python unicodedata.normalize(\"NFC\", s)).")
                }
            }
            let grant = Grant(name: name, roles: roles, apps: apps, consumers: consumers)
            // Names identify entries in the log; one name may hold several credentials (a token
            // being rotated) only with the same rights.
            if let j = named[name], grants[j] != grant {
                throw bad("Entries \(j) and \(i) are both named “\(clipped(name))” with other rights; the log names entries by name, so give each its own.")
            }
            named[name] = named[name] ?? i
            grants.append(grant)
            if let digest {
                if digests[digest] != nil { throw bad("Entry \(i) (\(name)) repeats a token.") }
                digests[digest] = grant
            }
            if let certificate {
                if certificates[certificate] != nil { throw bad("Entry \(i) (\(name)) repeats the certificate name \"\(certificate)\".") }
                certificates[certificate] = grant
            }
        }
        // Names some entries list are theirs alone: an entry without a list may use any other.
        let bound = grants.reduce(into: Set<String>()) { $0.formUnion($1.consumers ?? []) }
        func reserving(_ g: Grant) -> Grant {
            guard g.consumers == nil, g.roles.contains(.consumer) else { return g }
            var g = g
            g.reservedConsumers = bound
            return g
        }
        return TokenTable(digests: digests.mapValues(reserving), certificates: certificates.mapValues(reserving), plainTokenEntries: plain)
    }

    /// The keys a tokens file and each of its entries may have ("comment": free text, ignored).
    static let fileKeys: Set<String> = ["tokens", "comment"]
    static let entryKeys: Set<String> = ["name", "sha256", "token", "certificate", "roles", "apps", "consumers", "comment"]
}
