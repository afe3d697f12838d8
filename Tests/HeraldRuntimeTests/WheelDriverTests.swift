// The timing wheel on a real libevent loop under the system clock: asleep when nothing is due, never early.
import HeraldCore
import HeraldRuntime
import Testing

@Suite struct WheelDriverTests {
    @Test func loopSleepsWhileTheNearestTimerIsAnHourAway() {
        let loop = EventLoop()
        let driver = WheelDriver(loop: loop, start: WheelDriver.systemNow(), systemClock: true) { WheelDriver.systemNow() }
        driver.wheel.schedule(at: WheelDriver.systemNow().adding(.hours(1)), payload: 1)
        driver.rearm()
        let stop = loop.timer { loop.stop() }
        stop.arm(afterMilliseconds: 300)
        loop.run()
        #expect(driver.wakeups == 0, "no wake-up for empty ticks while the only timer is an hour away")
        #expect(driver.wheel.count == 1)
    }

    @Test func timerFiresOnceAndNeverEarly() {
        let loop = EventLoop()
        let driver = WheelDriver(loop: loop, start: WheelDriver.systemNow(), systemClock: true) { WheelDriver.systemNow() }
        let deadline = WheelDriver.systemNow().adding(.milliseconds(40))
        driver.wheel.schedule(at: deadline, payload: 7)
        driver.wheel.schedule(at: deadline.adding(.hours(2)), payload: 8)
        var fired: [(deadline: Instant, payload: UInt64, at: Instant)] = []
        driver.onTimer = {
            let now = WheelDriver.systemNow()
            driver.advance(to: now) { d, p in fired.append((d, p, now)) }
            if !fired.isEmpty { loop.stop() }
        }
        driver.rearm()
        let safety = loop.timer { loop.stop() }
        safety.arm(afterMilliseconds: 5_000)
        loop.run()
        #expect(fired.map(\.payload) == [7], "exactly the due timer fired, once")
        if let f = fired.first {
            #expect(f.at >= f.deadline, "never early")
            print("wheel timer lateness under the system clock: \(f.at.since(f.deadline).milliseconds) ms (wake-ups: \(driver.wakeups))")
        }
        #expect(driver.wheel.count == 1)
    }
}
