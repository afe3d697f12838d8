// The credentials in force: a reload replaces the tokens and counts, a failed one keeps them and counts apart.
import HeraldCore
@testable import HeraldRuntime
import Testing

@Suite struct CredentialsTests {
    static let table = TokenTable(["secret-1": Grant(name: "mail", roles: [.producer], apps: ["com.example.mail"])])

    @Test func startUpLoadsWithoutCountingAReload() {
        var c = Credentials(tokens: TokenTable())
        #expect(c.tokens.isDevMode && c.tls == nil)
        c.tokensLoaded(Self.table)
        #expect(!c.tokens.isDevMode && c.tokens.count == 1 && c.tokenReloads == 0)
    }

    @Test func aReloadReplacesTheTokensAndAFailedOneKeepsThem() {
        var c = Credentials(tokens: Self.table)
        c.tokenReloadFailed()
        #expect(c.tokens.grant(for: "secret-1")?.name == "mail" && c.tokenReloadFailures == 1 && c.tokenReloads == 0)
        c.tokensReloaded(TokenTable(["secret-2": Grant(name: "push", roles: [.consumer], apps: nil)]))
        #expect(c.tokens.grant(for: "secret-1") == nil && c.tokens.grant(for: "secret-2")?.name == "push")
        #expect(c.tokenReloads == 1 && c.tokenReloadFailures == 1)
        c.certificateReloadFailed()
        #expect(c.certificateReloadFailures == 1 && c.certificateReloads == 0 && c.tls == nil)
    }
}
