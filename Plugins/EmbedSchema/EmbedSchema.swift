// Build-tool plugin: embeds the numbered SQL migrations of schema/ into HeraldStore,
// so the `herald` binary carries its schema and needs no files beside it.
import Foundation
import PackagePlugin

@main
struct EmbedSchema: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let schemaDirectory = context.package.directoryURL.appending(path: "schema")
        let sqlFiles = try FileManager.default
            .contentsOfDirectory(at: schemaDirectory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "sql" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedSchema.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(sqlFiles.count) schema migrations",
                executable: try context.tool(named: "SchemaEmbedder").url,
                arguments: [output.path] + sqlFiles.map(\.path),
                inputFiles: sqlFiles,
                outputFiles: [output]
            )
        ]
    }
}
