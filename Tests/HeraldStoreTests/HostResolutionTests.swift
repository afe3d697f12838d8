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

    @Test func aNameIsResolvedToAddressesAndAnUnknownOneExplainsItself() throws {
        let local = try HostResolution.resolve(["localhost"]).get()
        #expect(local["localhost"]?.contains { $0 == "127.0.0.1" || $0 == "::1" } == true)
        guard case .failure(let error) = HostResolution.resolve(["no-such-host.invalid"]) else {
            Issue.record("resolved a name under .invalid"); return
        }
        #expect("\(error)".contains("could not resolve the database host “no-such-host.invalid”"))
    }
}
