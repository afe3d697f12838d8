// The database URL reaches libpq with the operator's TLS settings (sslmode, sslrootcert, …) intact.
import CLibPQ
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ConnectionStringTests {
    /// The options libpq itself reads from a connection string (nil where it is not set).
    static func parsed(_ conninfo: String) -> [String: String] {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            return [:]
        }
        defer { PQconninfoFree(options) }
        var out: [String: String] = [:]
        var p = options
        while let keyword = p.pointee.keyword {
            if let value = p.pointee.val { out[String(cString: keyword)] = String(cString: value) }
            p += 1
        }
        return out
    }

    @Test func hardeningKeepsTheSSLParametersOfAKeyValueString() {
        let given = "host=db.internal dbname=herald user=herald sslmode=verify-full sslrootcert=/etc/herald/pg-ca.pem sslcert=/etc/herald/c.pem sslkey=/etc/herald/c.key"
        let o = Self.parsed(ConnectionString.hardened(given))
        #expect(o["sslmode"] == "verify-full" && o["sslrootcert"] == "/etc/herald/pg-ca.pem")
        #expect(o["sslcert"] == "/etc/herald/c.pem" && o["sslkey"] == "/etc/herald/c.key")
        #expect(o["keepalives"] == "1" && o["host"] == "db.internal")
    }

    @Test func hardeningKeepsTheSSLParametersOfAURL() {
        let given = "postgresql://herald@db.internal:5433/herald?sslmode=require&sslrootcert=%2Fetc%2Fca.pem"
        let o = Self.parsed(ConnectionString.hardened(given))
        #expect(o["sslmode"] == "require" && o["sslrootcert"] == "/etc/ca.pem" && o["port"] == "5433")
        #expect(o["connect_timeout"] == "10")
    }

    /// The test cluster has no SSL: sslmode=require must reach libpq and make it refuse.
    @Test func sslmodeReachesLibpq() throws {
        let url = try TestPostgres.freshDatabase(migrated: false)
        let plain = try PGConnection.connect(url + " sslmode=disable")
        plain.close()
        #expect {
            _ = try PGConnection.connect(url + " sslmode=require")
        } throws: { error in
            "\(error)".lowercased().contains("ssl")
        }
    }
}
