// Start-up: glibc's per-thread cache of freed chunks sized for the loop's batch allocation pattern.
import Glibc

/// The service loop allocates a transaction's worth of small objects per batch (hundreds of
/// requests, each its rows, drafts, strings and closures) and frees them together when the batch
/// commits. glibc's per-thread cache keeps only 7 freed chunks per size by default; the rest go
/// back through the allocator's bins, so most of a batch's `malloc`/`free` calls took the slow
/// path (`_int_malloc`/`_int_free`: ~14% of the loop's CPU under load). A larger cache
/// (`glibc.malloc.tcache_count`) cut the loop's CPU per submit by ~20% (docs/service-profile.md,
/// session 13). glibc reads its tunables only when a process starts, so `herald` sets the tunable
/// and executes itself again, once, before doing anything else.
///
/// Left alone when `GLIBC_TUNABLES` already names `tcache_count`, when `HERALD_MALLOC_TUNING=off`,
/// and under valgrind (which replaces malloc, and would not follow the re-execution).
/// After the re-execution the environment is put back as it was, so the processes Herald starts
/// (PostgreSQL of the private cluster, a bench's peer, a `herald serve` child, which tunes itself)
/// inherit the caller's allocator settings, not Herald's. If the re-execution fails, Herald runs
/// on with glibc's defaults.
enum MallocTuning {
    /// Freed chunks kept per size class and thread (glibc's default: 7). Memory held this way is
    /// memory the process had allocated and freed; at most ~4 MB per size class per thread.
    static let tcacheCount = 4096

    static func reexecIfNeeded() {
        if let before = value("HERALD_MALLOC_TUNED") {
            // The re-executed process: glibc has read the tunables; give children the caller's.
            restore(before)
            return
        }
        guard value("HERALD_MALLOC_TUNING") != "off" else { return }
        // Under valgrind glibc's malloc is replaced, and the re-executed process would run untraced.
        guard !(value("LD_PRELOAD") ?? "").contains("vgpreload") else { return }
        let tunables = value("GLIBC_TUNABLES")
        guard !(tunables ?? "").contains("tcache_count") else { return }
        let setting = "glibc.malloc.tcache_count=\(tcacheCount)"
        setenv("GLIBC_TUNABLES", tunables.map { $0.isEmpty ? setting : $0 + ":" + setting } ?? setting, 1)
        // What to put back: "-" for unset, else "=" and the old value.
        setenv("HERALD_MALLOC_TUNED", tunables.map { "=" + $0 } ?? "-", 1)
        var argv: [UnsafeMutablePointer<CChar>?] = CommandLine.arguments.map { strdup($0) }
        argv.append(nil)
        // The executable's real path, not /proc/self/exe: the kernel names the process after the
        // file executed, and `ps`/`top` should keep showing "herald".
        execv(executablePath() ?? "/proc/self/exe", argv)
        // Only reached when exec failed: run on with glibc's defaults.
        restore(value("HERALD_MALLOC_TUNED") ?? "-")
    }

    private static func restore(_ before: String) {
        if before.hasPrefix("=") { setenv("GLIBC_TUNABLES", String(before.dropFirst()), 1) } else { unsetenv("GLIBC_TUNABLES") }
        unsetenv("HERALD_MALLOC_TUNED")
    }

    private static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
