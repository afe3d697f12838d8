// The test client owns its socket: a failed connect closes it exactly once.
import Foundation
import Glibc
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct WireClientTests {
    /// A refused connect closes its socket once. Were it closed in `init` and again in `deinit`
    /// (the object is fully initialized when `init` throws), another thread could open a
    /// descriptor with the same number between the two closes — a libpq connection, in the suite —
    /// and lose it ("could not get socket error status: Bad file descriptor"). Here another
    /// thread keeps opening pipes (they get the lowest free numbers, the one just closed among
    /// them) and checks each still works before closing it.
    @Test func aRefusedConnectClosesItsSocketOnce() {
        let port = LocalClusterPort.free()
        let stop = Atomic<Bool>(false)
        let lost = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            // No reads or writes: a pipe end closed under this thread may already be someone
            // else's socket (a read would block). Each end must stay the same pipe until closed.
            func inode(_ fd: Int32) -> UInt? {
                var st = stat()
                guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFIFO else { return nil }
                return UInt(st.st_ino)
            }
            while !stop.load(ordering: .relaxed) {
                var fds: [Int32] = [0, 0]
                guard pipe(&fds) == 0, let ino = inode(fds[0]) else { continue }
                for _ in 0..<50 where inode(fds[0]) != ino || inode(fds[1]) != ino {
                    lost.add(1, ordering: .relaxed)
                }
                close(fds[0])
                close(fds[1])
            }
            done.signal()
        }.start()
        var refused = 0
        for _ in 0..<5_000 {
            do { _ = try WireClient(port: port) } catch { refused += 1 }
        }
        stop.store(true, ordering: .relaxed)
        done.wait()
        #expect(refused == 5_000)
        #expect(lost.load(ordering: .relaxed) == 0, "a descriptor another thread opened was closed under it")
    }
}
