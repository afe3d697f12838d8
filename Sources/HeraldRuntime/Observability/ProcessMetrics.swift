// The process's CPU, memory, file descriptors and start time, read from /proc when scraped (Prometheus' process_* names).
import Glibc

enum ProcessMetrics {
    static func publish(into p: MetricsPublisher, startedAt: Double) {
        var usage = rusage()
        if getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 {
            let ms = Int64(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000 + Int64(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
            p.countSeconds("process_cpu_seconds_total", "User and system CPU time of the process.", milliseconds: ms)
        }
        if let rss = residentBytes() {
            p.gauge("process_resident_memory_bytes", "Resident memory of the process.", [], Double(rss))
        }
        p.gauge("process_open_fds", "Open file descriptors of the process.", [], Double(openDescriptors()))
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            p.gauge("process_max_fds", "The open-file limit (soft) of the process.", [], Double(limit.rlim_cur))
        }
        p.gauge("process_start_time_seconds", "When the process started its HTTP side (seconds since 1970).", [], startedAt)
    }

    /// VmRSS of /proc/self/status, in bytes.
    static func residentBytes() -> Int? {
        guard let f = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            if text.hasPrefix("VmRSS:") {
                let digits = text.dropFirst(6).filter(\.isNumber)
                return Int(digits).map { $0 * 1024 }
            }
        }
        return nil
    }

    /// Entries of /proc/self/fd (less the directory's own descriptor).
    static func openDescriptors() -> Int {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(dir) }
        var n = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { n += 1 }
        }
        return max(0, n - 1)
    }
}
