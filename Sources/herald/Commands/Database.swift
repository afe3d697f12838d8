// `herald db url`: the connection URL of the database Herald uses, for psql and other tools.
import ArgumentParser
import HeraldCommandLine
import HeraldStore

struct Database: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db", abstract: "The database Herald uses.", subcommands: [ConnectionURL.self])

    struct ConnectionURL: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "url",
            abstract: "Print the database's connection URL: `psql \"$(herald db url)\"`.",
            discussion: """
                Without a database URL: the private cluster's, as its superuser postgres (started if it is not \
                running, and left running for the tool the URL is for; the last Herald process to exit stops it). \
                With --database-url or $HERALD_DATABASE_URL: that one, as given.
                """)

        @OptionGroup var database: DatabaseOptions

        func run() throws {
            try reportingErrors {
                // Not closed: stopping the private cluster here would leave the URL pointing at nothing.
                let location = try database.resolve()
                print(location.cluster.map { $0.url(database: database.privateDatabase) } ?? location.url)
            }
        }
    }
}
