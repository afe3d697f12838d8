// Which database host names the loop's connector looks up itself, and what libpq is then given.
import HeraldStore
import Testing

@Suite struct HostResolutionTests {
    @Test func onlyHostNamesAreLookedUpNotAddressesSocketsOrAGivenHostaddr() {
        #expect(HostResolution.namesToResolve("host=127.0.0.1 port=5432 dbname=herald").isEmpty)
        #expect(HostResolution.namesToResolve("host=::1 dbname=herald").isEmpty)
        #expect(HostResolution.namesToResolve("host=/var/run/postgresql dbname=herald").isEmpty)
        #expect(HostResolution.namesToResolve("dbname=herald").isEmpty, "no host: libpq's default socket")
        #expect(HostResolution.namesToResolve("host=db.internal hostaddr=10.0.0.5 dbname=herald").isEmpty)
        #expect(HostResolution.namesToResolve("host=localhost dbname=herald") == ["localhost"])
        #expect(HostResolution.namesToResolve("postgres://herald@db.internal:5433/herald?sslmode=require") == ["db.internal"])
        #expect(HostResolution.namesToResolve("host=db1,10.0.0.2,db2,db1") == ["db1", "db2"])
        #expect(HostResolution.namesToResolve("host='unbalanced").isEmpty, "unparsable: libpq reports it")
    }

    /// Every address of a name becomes one (host, hostaddr) pair, ports follow their host, and a
    /// host that needed no look-up keeps an empty hostaddr; the other settings are kept.
    @Test func resolvedNamesBecomeHostaddrPairsThatLibpqAccepts() {
        let conninfo = HostResolution.conninfo("host=db1,10.0.0.2 port=5432,5433 dbname=herald user=o'brien sslmode=require",
                                               resolved: ["db1": ["10.0.0.7", "fd00::7"]])
        #expect(conninfo.contains("host='db1,db1,10.0.0.2'"))
        #expect(conninfo.contains("hostaddr='10.0.0.7,fd00::7,'"))
        #expect(conninfo.contains("port='5432,5432,5433'"))
        #expect(conninfo.contains("user='o\\'brien'") && conninfo.contains("sslmode='require'") && conninfo.contains("dbname='herald'"))
        #expect(HostResolution.namesToResolve(conninfo).isEmpty, "libpq will not look anything up")

        let url = HostResolution.conninfo("postgres://herald@db.internal:5433/events", resolved: ["db.internal": ["10.1.2.3"]])
        #expect(url.contains("host='db.internal'") && url.contains("hostaddr='10.1.2.3'") && url.contains("port='5433'")
                && url.contains("dbname='events'") && url.contains("user='herald'"))
    }

    /// libpq takes a host left out of the string from PGHOST (PGHOSTADDR, PGPORT alike): so does the
    /// look-up, or libpq would resolve that name on the loop. Not with a service file, which may name
    /// its own host.
    @Test func hostsFromPGHOSTAreLookedUpTooAndTheStringWins() {
        let env: [String: String] = ["PGHOST": "db.from-env", "PGPORT": "6432"]
        let environment: HostResolution.Environment = { env[$0] }
        #expect(HostResolution.namesToResolve("dbname=herald", environment: environment) == ["db.from-env"])
        #expect(HostResolution.namesToResolve("host='' dbname=herald", environment: environment) == ["db.from-env"])
        #expect(HostResolution.namesToResolve("host=db.in-url dbname=herald", environment: environment) == ["db.in-url"])
        #expect(HostResolution.namesToResolve("postgres:///herald", environment: environment) == ["db.from-env"])
        #expect(HostResolution.namesToResolve("dbname=herald", environment: { ["PGHOST": "db", "PGHOSTADDR": "10.0.0.9"][$0] }).isEmpty)
        #expect(HostResolution.namesToResolve("service=prod", environment: environment).isEmpty)
        #expect(HostResolution.namesToResolve("dbname=herald", environment: { ["PGHOST": "db", "PGSERVICE": "prod"][$0] }).isEmpty)
        #expect(HostResolution.namesToResolve("dbname=herald", environment: { _ in nil }).isEmpty)

        let conninfo = HostResolution.conninfo("dbname=herald", resolved: ["db.from-env": ["10.0.0.8"]], environment: environment)
        #expect(conninfo.contains("host='db.from-env'") && conninfo.contains("hostaddr='10.0.0.8'") && conninfo.contains("port='6432'"))
        #expect(HostResolution.namesToResolve(conninfo, environment: environment).isEmpty)
    }

    @Test func aNameIsResolvedToAddressesAndAnUnknownOneExplainsItself() throws {
        let local = try HostResolution.resolve(["localhost"]).get()
        #expect(local["localhost"]?.contains { $0 == "127.0.0.1" || $0 == "::1" } == true)
        guard case .failure(let error) = HostResolution.resolve(["no-such-host.invalid"]) else {
            Issue.record("resolved a name under .invalid"); return
        }
        #expect("\(error)".contains("could not resolve the database host “no-such-host.invalid”"))
    }
}
