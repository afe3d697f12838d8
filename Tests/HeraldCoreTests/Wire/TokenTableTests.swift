// The tokens file: hashed entries, plain ones (accepted, flagged), client-certificate names, and reload.
import HeraldCore
import Testing

@Suite struct TokenTableTests {
    static let mailToken = "mail-producer-secret"
    static var mailHash: String { SHA256.hex(mailToken.utf8) }

    static func table(_ json: String) throws -> TokenTable { try TokenTable.parse(JSONValue.parse(json)) }

    func sent(_ actions: [ClientSession.Action]) -> [JSONValue] {
        actions.flatMap { action -> [JSONValue] in
            let line: [UInt8]
            switch action {
            case .send(let bytes): line = bytes
            case .closeAfterReplies(let final?, _): line = final  // the last word, after the replies owed
            default: return []
            }
            return line.split(separator: 0x0A).compactMap { try? JSONValue.parse(Array($0)) }
        }
    }

    @Test func aHashedEntryGrantsItsTokenAndNothingElse() throws {
        let t = try Self.table(#"{"tokens":[{"name":"mail","sha256":"\#(Self.mailHash.uppercased())","roles":["producer"],"apps":["com.example.mail"]}]}"#)
        #expect(t.grant(for: Self.mailToken)?.name == "mail")
        #expect(t.grant(for: "mail-producer-secreT") == nil)
        #expect(t.grant(for: Self.mailHash) == nil, "the digest itself is not a token")
        #expect(t.plainTokenEntries.isEmpty)
    }

    @Test func aPlainTokenEntryIsAcceptedAndListedForTheStartUpWarning() throws {
        let t = try Self.table(#"{"tokens":[{"name":"old","token":"12345678","roles":["admin"]},{"name":"new","sha256":"\#(Self.mailHash)","roles":["admin"]}]}"#)
        #expect(t.grant(for: "12345678")?.name == "old")
        #expect(t.plainTokenEntries == ["old"])
    }

    /// Consumer entries without a `consumers` list may use any name, another's included: two or
    /// more of them are listed for a start-up warning (one could ack another's cursor with its own
    /// token); one alone, or entries that list their names, are not.
    @Test func consumerEntriesWithoutNamesAreListedForTheStartUpWarning() throws {
        let t = try Self.table(#"{"tokens":[{"name":"push","token":"pppppppp","roles":["consumer"]},{"name":"audit","token":"aaaaaaaa","roles":["consumer","admin"]},{"name":"mail","token":"mmmmmmmm","roles":["consumer"],"consumers":["mail"]},{"name":"ops","token":"oooooooo","roles":["admin"]}]}"#)
        #expect(t.consumerEntriesWithoutNames == ["audit", "push"])
        let one = try Self.table(#"{"tokens":[{"name":"push","token":"pppppppp","roles":["consumer"]},{"name":"mail","token":"mmmmmmmm","roles":["consumer"],"consumers":["mail"]}]}"#)
        #expect(one.consumerEntriesWithoutNames == ["push"])
    }

    @Test func invalidFilesAreRefusedWithAReason() {
        for bad in [
            #"{"tokens":[]}"#,
            #"{"tokens":[{"name":"x","sha256":"abc","roles":["admin"]}]}"#,
            #"{"tokens":[{"name":"x","token":"12345678","sha256":"\#(Self.mailHash)","roles":["admin"]}]}"#,
            #"{"tokens":[{"name":"x","roles":["admin"]}]}"#,
            #"{"tokens":[{"name":"x","certificate":"","roles":["admin"]}]}"#,
            #"{"tokens":[{"sha256":"\#(Self.mailHash)","roles":["admin"]},{"token":"\#(Self.mailToken)","roles":["admin"]}]}"#,
            #"{"tokens":[{"certificate":"a","roles":["admin"]},{"certificate":"a","roles":["consumer"]}]}"#,
        ] {
            #expect(throws: RequestError.self, "\(bad)") { try Self.table(bad) }
        }
    }

    /// A misspelt key ("consumer" for "consumers") would load the entry without its binding, free
    /// to take over another consumer's stream. Every key must be one the loader reads.
    @Test func unknownKeysInTheFileOrAnEntryAreRefused() throws {
        #expect {
            try Self.table(#"{"tokens":[{"name":"audit","token":"aaaaaaaa","roles":["consumer"],"consumer":["audit"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.hasPrefix("Entry 0 (audit) has the unknown key “consumer”") == true }
        #expect {
            try Self.table(#"{"tokens":[{"name":"ops","token":"oooooooo","roles":["admin"]}],"token":[]}"#)
        } throws: { ($0 as? RequestError)?.detail.hasPrefix("It has the unknown key “token”") == true }
        let commented = try Self.table(#"{"comment":"rotated 2026-11","tokens":[{"name":"ops","token":"oooooooo","roles":["admin"],"comment":"the on-call"}]}"#)
        #expect(commented.count == 1)
    }

    /// `apps` scopes only the producer role (SPEC §5): on a settings token it would be shown at
    /// hello and never enforced, so it is refused; and `*` is no wildcard.
    @Test func appsWithoutTheProducerRoleOrAStarAppAreRefused() throws {
        #expect {
            try Self.table(#"{"tokens":[{"name":"s","token":"ssssssss","roles":["settings"],"apps":["com.example.mail"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.contains("lists \"apps\" without the producer role") == true }
        #expect {
            try Self.table(#"{"tokens":[{"name":"p","token":"pppppppp","roles":["producer"],"apps":["*"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.contains("there is no wildcard app") == true }
        let both = try Self.table(#"{"tokens":[{"name":"m","token":"mmmmmmmm","roles":["producer","settings"],"apps":["com.example.mail"]}]}"#)
        #expect(both.grant(for: "mmmmmmmm")?.apps == ["com.example.mail"])
    }

    /// The log names entries by name: two with one name and other rights could not be told apart.
    /// One name over two tokens with the same rights (a token being rotated) is fine.
    @Test func entriesSharingANameMustHaveTheSameRights() throws {
        #expect {
            try Self.table(#"{"tokens":[{"name":"a","token":"aaaaaaaa","roles":["producer"],"apps":["m"]},{"name":"a","token":"bbbbbbbb","roles":["admin"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.hasPrefix("Entries 0 and 1 are both named “a” with other rights") == true }
        let rotating = try Self.table(#"{"tokens":[{"name":"a","token":"aaaaaaaa","roles":["admin"]},{"name":"a","token":"bbbbbbbb","roles":["admin"]}]}"#)
        #expect(rotating.grant(for: "aaaaaaaa") == rotating.grant(for: "bbbbbbbb"))
    }

    /// A consumer entry without a `consumers` list cannot take over a name another entry lists:
    /// the names some entries list are theirs alone; others stay open to it.
    @Test func aConsumerNameAnEntryListsIsReservedFromEntriesWithoutAList() throws {
        let t = try Self.table(#"{"tokens":[{"name":"push","token":"pppppppp","roles":["consumer"],"consumers":["push"]},{"name":"audit","token":"aaaaaaaa","roles":["consumer"]}]}"#)
        let audit = try #require(t.grant(for: "aaaaaaaa")), push = try #require(t.grant(for: "pppppppp"))
        #expect(!audit.mayConsumeAs("push") && audit.mayConsumeAs("audit") && audit.mayConsumeAs("anything-else"))
        #expect(push.mayConsumeAs("push") && !push.mayConsumeAs("audit"))
        #expect(Grant.everything.mayConsumeAs("push"), "dev mode: any name")
    }

    /// Requests must name apps and consumers in NFC: a file that lists them otherwise is refused,
    /// not loaded to hand out names every request would then be refused for.
    @Test func appsAndConsumersNotInNFCAreRefused() throws {
        let nfd = "caf\u{65}\u{301}"
        #expect {
            try Self.table(#"{"tokens":[{"name":"m","sha256":"\#(Self.mailHash)","roles":["producer"],"apps":["com.example.\#(nfd)"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.contains("Entry 0 (m) lists the app “com.example.\(nfd)” not in Unicode Normalization Form C") == true }
        #expect {
            try Self.table(#"{"tokens":[{"name":"c","sha256":"\#(Self.mailHash)","roles":["consumer"],"consumers":["push","\#(nfd)"]}]}"#)
        } throws: { ($0 as? RequestError)?.detail.contains("lists the consumer") == true }
        let nfc = try Self.table(#"{"tokens":[{"name":"m","sha256":"\#(Self.mailHash)","roles":["producer"],"apps":["com.example.caf\#u{E9}"]}]}"#)
        #expect(nfc.count == 1)
    }

    @Test func aClientCertificateNameMapsToOneGrantAndAmbiguityGrantsNothing() throws {
        let t = try Self.table(#"{"tokens":[{"name":"mail","certificate":"mail.producers","roles":["producer"],"apps":["com.example.mail"]},{"name":"bank","certificate":"bank.producers","roles":["producer"],"apps":["com.example.bank"]}]}"#)
        #expect(t.grant(forCertificateNames: ["Some CN", "mail.producers"])?.name == "mail")
        #expect(t.grant(forCertificateNames: ["mail.producers", "bank.producers"]) == nil)
        #expect(t.grant(forCertificateNames: ["unknown"]) == nil)
    }

    @Test func aMappedCertificateDecidesTheHelloWhateverTheToken() throws {
        let t = try Self.table(#"{"tokens":[{"name":"mail","certificate":"mail.producers","roles":["producer"],"apps":["com.example.mail"]},{"name":"ops","token":"ops-secret","roles":["admin"]}]}"#)
        var s = ClientSession(tokens: t, serverName: "h")
        s.peerCertificateVerified(names: ["mail.producers"])
        let hello = sent(s.lineReceived(Array(#"{"op":"hello","token":"ops-secret"}"#.utf8)))[0]
        #expect(hello["roles"] == ["producer"] && hello["apps"] == ["com.example.mail"])
        // An unmapped certificate falls back to the token.
        var u = ClientSession(tokens: t, serverName: "h")
        u.peerCertificateVerified(names: ["stranger"])
        #expect(sent(u.lineReceived(Array(#"{"op":"hello"}"#.utf8)))[0]["error"]?["code"] == "invalid_token")
        #expect(sent(u.lineReceived(Array(#"{"op":"hello","token":"ops-secret"}"#.utf8)))[0]["roles"] == ["admin"])
    }

    @Test func reloadKeepsAnUnchangedGrantAndClosesAChangedOne() throws {
        let before = try Self.table(#"{"tokens":[{"name":"mail","sha256":"\#(Self.mailHash)","roles":["producer"],"apps":["com.example.mail"]},{"name":"ops","token":"ops-secret","roles":["admin"]}]}"#)
        var mail = ClientSession(tokens: before, serverName: "h")
        var ops = ClientSession(tokens: before, serverName: "h")
        var waiting = ClientSession(tokens: before, serverName: "h")
        _ = mail.lineReceived(Array(#"{"op":"hello","token":"\#(Self.mailToken)"}"#.utf8))
        _ = ops.lineReceived(Array(#"{"op":"hello","token":"ops-secret"}"#.utf8))
        // ops loses admin; a new token appears.
        let after = try Self.table(#"{"tokens":[{"name":"mail","sha256":"\#(Self.mailHash)","roles":["producer"],"apps":["com.example.mail"]},{"name":"ops","token":"ops-secret","roles":["consumer"]},{"name":"new","token":"new-secret","roles":["admin"]}]}"#)
        #expect(mail.tokensReloaded(after).isEmpty && mail.grant?.name == "mail")
        let actions = ops.tokensReloaded(after)
        #expect(sent(actions).first?["error"]?["code"] == "grant_revoked")
        #expect(actions.contains { if case .closeAfterReplies = $0 { return true } else { return false } })
        #expect(ops.grant == nil)
        #expect(waiting.tokensReloaded(after).isEmpty)
        #expect(sent(waiting.lineReceived(Array(#"{"op":"hello","token":"new-secret"}"#.utf8)))[0]["roles"] == ["admin"],
                "a connection that has not said hello uses the new table")
    }

    @Test func reloadOutOfDevModeClosesDevGrants() throws {
        var s = ClientSession(tokens: TokenTable(), serverName: "h")
        _ = s.lineReceived(Array(#"{"op":"hello"}"#.utf8))
        #expect(s.grant == .everything)
        let actions = s.tokensReloaded(try Self.table(#"{"tokens":[{"token":"ops-secret","roles":["admin"]}]}"#))
        #expect(sent(actions).first?["error"]?["code"] == "grant_revoked" && s.grant == nil)
    }
}
