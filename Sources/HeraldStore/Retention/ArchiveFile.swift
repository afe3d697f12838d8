// An archive segment file written and read in chunks, with its SHA-256 computed as it goes.
import CCrypto
import Foundation
import Glibc

/// Incremental SHA-256 (libcrypto's EVP), for files too large to hold in memory at once.
final class StreamingSHA256 {
    private let context = EVP_MD_CTX_new()

    init() { EVP_DigestInit_ex(context, EVP_sha256(), nil) }
    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > 0 { EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) }
    }

    /// The digest as 64 lowercase hex digits (once).
    func finish() -> String {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        return out.map { String(format: "%02x", $0) }.joined()
    }
}

/// Writes lines to `<file>.partial` through a 1 MiB buffer, then syncs and renames it into place.
struct ArchiveFileWriter {
    let file: URL
    private let fd: Int32
    private var buffer: [UInt8] = []
    private let digest = StreamingSHA256()
    private(set) var lines = 0

    init(_ file: URL) throws {
        self.file = file
        fd = open(file.path + ".partial", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw RetentionJob.Failure.archive("cannot create \(file.path).partial: \(String(cString: strerror(errno)))") }
        buffer.reserveCapacity(1 << 20)
    }

    mutating func append(_ line: String) throws {
        buffer.append(contentsOf: line.utf8)
        buffer.append(0x0A)
        lines += 1
        if buffer.count >= 1 << 20 { try flush() }
    }

    private mutating func flush() throws {
        try buffer.withUnsafeBytes { bytes in
            digest.update(bytes)
            var written = 0
            while written < bytes.count {
                let n = write(fd, bytes.baseAddress! + written, bytes.count - written)
                guard n > 0 else { throw RetentionJob.Failure.archive("cannot write \(file.path).partial: \(String(cString: strerror(errno)))") }
                written += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, syncs, closes and renames the file into place; returns its SHA-256.
    mutating func finish() throws -> String {
        try flush()
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw RetentionJob.Failure.archive("cannot sync \(file.path).partial") }
        guard rename(file.path + ".partial", file.path) == 0 else { throw RetentionJob.Failure.archive("cannot rename \(file.path).partial") }
        let dir = open(file.deletingLastPathComponent().path, O_RDONLY)
        if dir >= 0 { _ = fsync(dir); close(dir) }
        return digest.finish()
    }
}

enum ArchiveFileReader {
    /// Reads `file` in 1 MiB chunks: its lines (newlines) and SHA-256; with `splitting`, `line` gets each line.
    static func read(_ file: URL, splitting: Bool = false, line: (String) throws -> Void = { _ in }) throws -> (rows: Int, sha256: String) {
        let fd = open(file.path, O_RDONLY)
        guard fd >= 0 else { throw RetentionJob.Failure.archive("\(file.path) cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let digest = StreamingSHA256()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var pending: [UInt8] = []
        var rows = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            guard n >= 0 else { throw RetentionJob.Failure.archive("\(file.path) cannot be read: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            try chunk.withUnsafeBytes { b in
                let bytes = UnsafeRawBufferPointer(rebasing: b[0..<n])
                digest.update(bytes)
                var start = 0
                for i in 0..<n where bytes[i] == 0x0A {
                    rows += 1
                    if splitting {
                        pending.append(contentsOf: bytes[start..<i])
                        try line(String(decoding: pending, as: UTF8.self))
                        pending.removeAll(keepingCapacity: true)
                    }
                    start = i + 1
                }
                if splitting { pending.append(contentsOf: bytes[start..<n]) }
            }
        }
        return (rows, digest.finish())
    }
}
