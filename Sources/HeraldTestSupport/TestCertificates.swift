// Throwaway certificates for TLS tests, made with the `openssl` command at test time (no key is committed).
import Foundation

/// A private CA, a server certificate for 127.0.0.1 and client certificates, in a temporary
/// folder removed when this object goes away. Needs the `openssl` program (`scripts/bootstrap`
/// installs it).
public final class TestCertificates: Sendable {
    public let directory: String
    public var caFile: String { directory + "/ca.pem" }
    public var serverCertificate: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server.key" }

    public enum Failure: Error, CustomStringConvertible {
        case openssl(String)
        public var description: String {
            switch self { case .openssl(let m): return m }
        }
    }

    /// The `openssl` program, if installed.
    public static var opensslPath: String? {
        ["/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    public init() throws {
        directory = FileManager.default.temporaryDirectory.path + "/herald-tls-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", directory + "/ca.key", "-out", caFile, "-days", "2", "-subj", "/CN=Herald Test CA"])
        try issue(name: "server", subject: "/CN=127.0.0.1", extensions: "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// A client certificate signed by the CA: subject CN `commonName`, plus optional DNS SANs.
    public func client(_ commonName: String, dnsNames: [String] = []) throws -> (certificate: String, key: String) {
        let file = "client-" + commonName.map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
        var ext = "extendedKeyUsage=clientAuth\n"
        if !dnsNames.isEmpty { ext += "subjectAltName=" + dnsNames.map { "DNS:" + $0 }.joined(separator: ",") + "\n" }
        try issue(name: file, subject: "/CN=" + commonName, extensions: ext)
        return (directory + "/\(file).pem", directory + "/\(file).key")
    }

    /// Marks a certificate the CA issued as revoked (in the CA's database; `revocationList()`
    /// then lists it).
    public func revoke(_ certificateFile: String) throws {
        try writeCAConfiguration()
        try run(["ca", "-config", directory + "/ca.cnf", "-revoke", certificateFile])
    }

    /// The CA's certificate revocation list (PEM) with every certificate revoked so far, valid
    /// for two days; written to a new file each time, whose path is returned.
    public func revocationList() throws -> String {
        try writeCAConfiguration()
        let path = directory + "/crl-\(UInt32.random(in: 0...UInt32.max)).pem"
        try run(["ca", "-config", directory + "/ca.cnf", "-gencrl", "-out", path])
        return path
    }

    /// The least `openssl ca` needs to revoke and to sign CRLs: its database and the CA's files.
    private func writeCAConfiguration() throws {
        let index = directory + "/index.txt"
        if !FileManager.default.fileExists(atPath: index) { _ = FileManager.default.createFile(atPath: index, contents: nil) }
        try ["[ca]", "default_ca = test", "[test]", "database = \(index)", "default_md = sha256", "default_crl_days = 2",
             "certificate = \(caFile)", "private_key = \(directory)/ca.key", ""]
            .joined(separator: "\n").write(toFile: directory + "/ca.cnf", atomically: true, encoding: .utf8)
    }

    /// A client certificate from a different, untrusted CA (self-signed).
    public func untrustedClient(_ commonName: String) throws -> (certificate: String, key: String) {
        let base = directory + "/untrusted-\(commonName)"
        try run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", base + ".key", "-out", base + ".pem", "-days", "2", "-subj", "/CN=" + commonName])
        return (base + ".pem", base + ".key")
    }

    private func issue(name: String, subject: String, extensions: String) throws {
        let base = directory + "/" + name
        try extensions.write(toFile: base + ".ext", atomically: true, encoding: .utf8)
        try run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", base + ".key", "-out", base + ".csr", "-subj", subject])
        try run(["x509", "-req", "-in", base + ".csr", "-CA", caFile, "-CAkey", directory + "/ca.key",
                 "-set_serial", String(UInt32.random(in: 1...UInt32.max)), "-days", "2",
                 "-extfile", base + ".ext", "-out", base + ".pem"])
    }

    private func run(_ arguments: [String]) throws {
        guard let openssl = Self.opensslPath else {
            throw Failure.openssl("The openssl program is not installed; TLS tests make their certificates with it. Run scripts/bootstrap (apt-get install openssl).")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = arguments
        let output = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure.openssl("openssl \(arguments.joined(separator: " ")) failed with status \(process.terminationStatus)")
        }
    }
}
