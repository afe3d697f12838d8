// Build-tool plugin: embeds the numbered SQL migrations of schema/ into HeraldStore,
// so the `herald` binary carries its schema and needs no files beside it.
import Foundation
import PackagePlugin

@main
struct EmbedSchema: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let schemaDirectory = context.package.directoryURL.appending(path: "schema")
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedSchema.swift")
        return [
            .buildCommand(
                displayName: "Embedding schema migrations",
                executable: try context.tool(named: "SchemaEmbedder").url,
                arguments: [output.path, schemaDirectory.path],
                // The folder, not the files: SwiftPM caches this plan, so a file listed here and later
                // removed would break the build, and a file added later would be missed. The folder's
                // mtime changes when a migration is added or removed; the embedder lists it when it
                // runs. Editing a file in place does not change the folder: `touch schema` after that.
                inputFiles: [schemaDirectory],
                outputFiles: [output]
            )
        ]
    }
}
