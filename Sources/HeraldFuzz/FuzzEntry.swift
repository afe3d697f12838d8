// Entry points: libFuzzer's, and without the fuzzer a runner that replays inputs from files.
import Foundation

/// Called by libFuzzer for each input (build with scripts/fuzz: --sanitize=fuzzer links its main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzHarness.run(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

#if !HERALD_FUZZ
/// The regular build has no libFuzzer: `HeraldFuzz FILE…` runs each file through the harness
/// once (to replay a crash or the corpus without sanitizers). scripts/fuzz builds with
/// `-DHERALD_FUZZ`, which drops this main so that libFuzzer's is used.
@main
enum FuzzReplay {
    static func main() throws {
        let files = CommandLine.arguments.dropFirst()
        var paths: [String] = []
        for path in files {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                paths += try FileManager.default.contentsOfDirectory(atPath: path).sorted().map { path + "/" + $0 }
            } else {
                paths.append(path)
            }
        }
        var total = FuzzHarness.Reach()
        for path in paths {
            let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            let reach = data.withUnsafeBytes { FuzzHarness.run($0) }
            total.lines += reach.lines; total.accepted += reach.accepted; total.deliveries += reach.deliveries
        }
        print("HeraldFuzz: \(paths.count) inputs ran without a crash: \(total.lines) lines, \(total.accepted) requests admitted, \(total.deliveries) deliveries decided")
    }
}
#endif
