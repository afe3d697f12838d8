// The loop's own counters in `stats` (CPU time, page faults) count the calling thread only: the
// benches divide them by the events the loop handled.
@testable import HeraldRuntime
import Foundation
import Glibc
import Testing

@Suite struct LoopCountersTests {
    /// Touching fresh pages counts one fault each on this thread; the same done by another
    /// thread meanwhile does not.
    @Test func minorFaultsAreTheCallingThreadsOwn() throws {
        let pages = 256, pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        @Sendable func touchFreshPages() {
            let p = mmap(nil, pages * pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            for i in 0..<pages { p.storeBytes(of: 1, toByteOffset: i * pageSize, as: UInt8.self) }
            munmap(p, pages * pageSize)
        }
        let before = HeraldService.threadMinorFaults()
        touchFreshPages()
        let mine = HeraldService.threadMinorFaults() - before
        #expect(mine >= Int64(pages), "\(mine) faults for \(pages) fresh pages")

        let quiet = HeraldService.threadMinorFaults()
        let done = DispatchSemaphore(value: 0)
        Thread { touchFreshPages(); done.signal() }.start()
        done.wait()
        #expect(HeraldService.threadMinorFaults() - quiet < Int64(pages), "another thread's faults are not this one's")
    }
}
