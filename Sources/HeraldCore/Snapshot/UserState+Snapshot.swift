// A user's state as snapshot bytes and back: every field the fold keeps, content by reference (seq).

/// Version of the user-state encoding; a snapshot of another version is ignored (restore folds the log).
public enum SnapshotFormat {
    public static let version: UInt8 = 1
}

/// A snapshot's header: format, engine time at capture, the app registry at `through_seq`.
public struct SnapshotHeader: Sendable {
    public var capturedAt: Instant
    public var apps: AppRegistry

    public init(capturedAt: Instant, apps: AppRegistry) { self.capturedAt = capturedAt; self.apps = apps }

    public init(reading r: inout SnapshotReader) throws(SnapshotFormatError) {
        guard try r.u8() == SnapshotFormat.version else { throw SnapshotFormatError("snapshot format is not \(SnapshotFormat.version)") }
        capturedAt = try r.instant()
        apps = try AppRegistry(snapshot: &r)
    }

    public func encode(to w: inout SnapshotWriter) {
        w.u8(SnapshotFormat.version)
        w.instant(capturedAt)
        apps.encodeSnapshot(to: &w)
    }
}

extension UserState {
    /// One user as a snapshot part holds it: the record's byte length, the runtime's delivery
    /// ordinal for the user, then `encodeSnapshot`.
    public func encodeSnapshotRecord(deliveryCount: Int64, to w: inout SnapshotWriter) {
        var scratch = SnapshotWriter(capacity: 256)
        withUnsafePointer(to: self) { Self.encodeSnapshotRecord(at: $0, deliveryCount: deliveryCount, to: &w, scratch: &scratch) }
    }

    /// `encodeSnapshotRecord(deliveryCount:to:)` of the state at `s`, read where it lies, through
    /// `scratch` (cleared first; its capacity kept from one user to the next), so a capture of a
    /// million users does not allocate, copy and free a writer per user.
    public static func encodeSnapshotRecord(at s: UnsafePointer<UserState>, deliveryCount: Int64,
                                            to w: inout SnapshotWriter, scratch: inout SnapshotWriter) {
        scratch.removeAll(keepingCapacity: true)
        scratch.int(deliveryCount)
        encodeSnapshot(at: s, to: &scratch)
        w.block(scratch.bytes)
    }

    /// Encodes every field of the state (docs/restart.md lists them). Notification content is
    /// not copied: pending, snoozable and snooze records carry the seq of their submit, and a
    /// restore reads the content back from `events` (queued, held and snooze records at once,
    /// deferred ones when due). Deterministic: dictionaries in key order.
    public func encodeSnapshot(to w: inout SnapshotWriter) {
        withUnsafePointer(to: self) { Self.encodeSnapshot(at: $0, to: &w) }
    }

    /// `encodeSnapshot(to:)` of the state at `s`, every field read where it lies and every list
    /// walked through its buffer: a method called on the state, `for x in list` or
    /// `entries.filter`, would copy the state or each element (every string and array in it
    /// retained and released), and the rare fields' getters build a default `FocusState`
    /// (dictionaries included) for each user without them — together most of a million-user
    /// capture's time.
    static func encodeSnapshot(at s: UnsafePointer<UserState>, to w: inout SnapshotWriter) {
        w.string(s.pointee.user)
        w.int(s.pointee.lastSeq)
        w.bool(s.pointee.global.allowNotifications)
        w.u8(previewsCode(s.pointee.global.showPreviews))
        if let b = s.pointee.global.attentionBudget { w.u8(1); w.int(Int64(b)) } else { w.u8(0) }

        // Every app, then the apps with a recent list: the format of two `[String: …]`
        // dictionaries in key order, which one sorted `AppTable` writes as they would.
        s.pointee.apps.entries.withUnsafeBufferPointer { entries in
            w.count(entries.count)
            var withRecent = 0
            for i in entries.indices {
                w.string(entries[i].name)
                w.u8(statusCode(entries[i].state.status))
                w.u8(entries[i].state.options.rawValue)
                w.varint(UInt64(entries[i].state.flags.rawValue))
                w.u8(entries[i].state.provisionalChoice.rawValue)
                w.int(Int64(entries[i].state.badge))
                w.optInstant(entries[i].state.mutedUntil)
                if !entries[i].recent.isEmpty { withRecent += 1 }
            }
            w.count(withRecent)
            for i in entries.indices where !entries[i].recent.isEmpty {
                w.string(entries[i].name)
                entries[i].recent.withUnsafeBufferPointer { list in
                    w.count(list.count)
                    for k in list.indices {
                        w.string(list[k].id); w.int(list[k].seq); w.optString(list[k].collapseId); w.bool(list[k].counted)
                    }
                }
            }
        }

        // The rare fields from their box, or — without one — what their defaults encode to.
        let rare = s.pointee.rareBox
        if let schedule = rare?.values.summarySchedule {
            w.u8(1)
            w.count(schedule.times.count)
            for t in schedule.times { w.u8(UInt8(t.hour)); w.u8(UInt8(t.minute)) }
            w.string(schedule.timeZone)
        } else {
            w.u8(0)
        }
        if let rare {
            encodeFocus(rare.values.focus, to: &w)
        } else {
            w.count(0); w.u8(0); w.u8(0); w.count(0)   // no definitions, manual, manualUntil, offUntil
        }

        s.pointee.pending.withUnsafeBufferPointer { pending in
            w.count(pending.count)
            for i in pending.indices {
                w.int(pending[i].seq)
                w.u8(pending[i].stage.rawValue)
                w.bool(pending[i].counted)
                w.string(pending[i].app)
                w.string(pending[i].id)
                w.optString(pending[i].collapseId)
                w.optInstant(pending[i].deadline)
                w.optInstant(pending[i].expiresAt)
            }
        }

        s.pointee.snoozable.withUnsafeBufferPointer { snoozable in
            w.count(snoozable.count)
            for i in snoozable.indices { w.int(snoozable[i].seq) }
        }
        w.optInstant(s.pointee.summaryDue)
        guard let rare else {
            w.u8(0); w.u8(0)                    // heldFocus, focusCheckAt
            w.count(0); w.count(0); w.count(0)  // snoozes, bannerTimes, tombstones
            return
        }
        w.optString(rare.values.heldFocus)
        w.optInstant(rare.values.focusCheckAt)
        rare.values.snoozes.withUnsafeBufferPointer { snoozes in
            w.count(snoozes.count)
            for i in snoozes.indices { w.int(snoozes[i].seq); w.instant(snoozes[i].until); w.int(snoozes[i].causeSeq) }
        }
        w.count(rare.values.bannerTimes.count)
        for t in rare.values.bannerTimes { w.instant(t) }
        rare.values.tombstones.withUnsafeBufferPointer { tombstones in
            w.count(tombstones.count)
            for i in tombstones.indices { w.string(tombstones[i].app); w.string(tombstones[i].id) }
        }
    }

    /// The Focus part of the encoding (definitions, the manual Focus, the Focuses turned off).
    private static func encodeFocus(_ focus: borrowing FocusState, to w: inout SnapshotWriter) {
        w.count(focus.definitions.count)
        for d in focus.definitions {
            w.string(d.name)
            w.count(d.allowedPeople.count); for p in d.allowedPeople { w.string(p) }
            w.count(d.allowedApps.count); for a in d.allowedApps { w.string(a) }
            w.bool(d.allowTimeSensitive)
            if let c = d.calendar {
                w.u8(1)
                w.count(c.windows.count)
                for win in c.windows {
                    w.count(win.days.count); for day in win.days { w.int(Int64(day)) }
                    w.u8(UInt8(win.start.hour)); w.u8(UInt8(win.start.minute))
                    w.u8(UInt8(win.end.hour)); w.u8(UInt8(win.end.minute))
                }
                w.string(c.timeZone)
            } else {
                w.u8(0)
            }
        }
        w.optString(focus.manual)
        w.optInstant(focus.manualUntil)
        let offNames = focus.offUntil.keys.sorted()
        w.count(offNames.count)
        for n in offNames { w.string(n); w.instant(focus.offUntil[n]!) }
    }

    /// Decodes what `encodeSnapshot` wrote. Records that carry content (queued and held
    /// items, snoozable records, snoozes) come back without it and are listed by
    /// `contentMissing`; the caller supplies it with `supplySnapshotContent` (the stored submit
    /// at each seq, decoded as the fold decodes it). Deferred items stay lean.
    public init(snapshot r: inout SnapshotReader) throws(SnapshotFormatError) {
        self.init(user: try r.string())
        lastSeq = try r.int()
        global.allowNotifications = try r.bool()
        global.showPreviews = try Self.previews(try r.u8())
        if try r.u8() == 1 { global.attentionBudget = Int32(clamping: try r.int()) }

        let appCount = try r.count()
        for _ in 0..<appCount {
            let name = try r.sharedString()
            var a = AppState()
            a.status = try Self.status(try r.u8())
            a.options = AuthorizationOptions(rawValue: try r.u8())
            a.flags = AppFlags(rawValue: UInt16(truncatingIfNeeded: try r.varint()))
            guard let choice = ProvisionalChoice(rawValue: try r.u8()) else { throw SnapshotFormatError("bad provisional choice") }
            a.provisionalChoice = choice
            a.badge = Int32(clamping: try r.int())
            a.mutedUntil = try r.optInstant()
            apps.set(name, state: a)
        }

        let recentCount = try r.count()
        for _ in 0..<recentCount {
            let app = try r.sharedString()
            let n = try r.count()
            var list: [DeliveredRecord] = []
            list.reserveCapacity(n)
            for _ in 0..<n {
                let id = try r.string(), seq = try r.int(), cid = try r.optString(), counted = try r.bool()
                list.append(DeliveredRecord(id: id, seq: seq, collapseId: cid, counted: counted))
            }
            apps.set(app, recent: list)
        }

        if try r.u8() == 1 {
            let n = try r.count(limit: 64)
            var times: [LocalTime] = []
            for _ in 0..<n {
                guard let t = LocalTime(hour: Int(try r.u8()), minute: Int(try r.u8())) else { throw SnapshotFormatError("bad summary time") }
                times.append(t)
            }
            let zone = try r.sharedString()
            guard let cal = try? SummaryCalendar(times: times, timeZone: zone) else { throw SnapshotFormatError("bad summary schedule") }
            summarySchedule = cal
        }

        let focusCount = try r.count()
        for _ in 0..<focusCount {
            let name = try r.sharedString()
            var people: [String] = []
            for _ in try 0..<r.count() { people.append(try r.string()) }
            var allowed: [String] = []
            for _ in try 0..<r.count() { allowed.append(try r.sharedString()) }
            let allowTS = try r.bool()
            var calendar: FocusCalendar?
            if try r.u8() == 1 {
                var windows: [FocusWindow] = []
                for _ in try 0..<r.count(limit: 1024) {
                    var days: [Int] = []
                    for _ in try 0..<r.count(limit: 64) { days.append(Int(try r.int())) }
                    guard let s = LocalTime(hour: Int(try r.u8()), minute: Int(try r.u8())),
                          let e = LocalTime(hour: Int(try r.u8()), minute: Int(try r.u8())) else { throw SnapshotFormatError("bad Focus window") }
                    windows.append(FocusWindow(days: days, start: s, end: e))
                }
                let zone = try r.sharedString()
                guard let c = try? FocusCalendar(windows: windows, timeZone: zone) else { throw SnapshotFormatError("bad Focus schedule") }
                calendar = c
            }
            focus.definitions.append(FocusDefinition(name: name, allowedPeople: people, allowedApps: allowed,
                                                     allowTimeSensitive: allowTS, calendar: calendar))
        }
        if let m = try r.optString() { focus.manual = m }  // only when set: defaults leave the box unallocated
        if let u = try r.optInstant() { focus.manualUntil = u }
        for _ in try 0..<r.count() { let n = try r.string(); focus.offUntil[n] = try r.instant() }

        let pendingCount = try r.count()
        if pendingCount > 0 { reservePending(pendingCount) }
        for _ in 0..<pendingCount {
            let seq = try r.int()
            guard let stage = PendingStage(rawValue: try r.u8()) else { throw SnapshotFormatError("bad pending stage") }
            let counted = try r.bool()
            let app = try r.sharedString()
            let id = try r.string()
            let cid = try r.optString()
            let deadline = try r.optInstant()
            let expires = try r.optInstant()
            var item = PendingItem(leanDeferred: seq, app: app, id: id, collapseId: cid, deliverAt: deadline ?? .epoch,
                                   expiresAt: expires, counted: counted)
            item.stage = stage
            item.deadline = deadline
            insertPending(item)
        }

        for _ in try 0..<r.count() {
            snoozable.append(SnoozableRecord(notification: Self.placeholder, seq: try r.int()))
        }
        summaryDue = try r.optInstant()
        heldFocus = try r.optString()
        focusCheckAt = try r.optInstant()
        for _ in try 0..<r.count() {
            let seq = try r.int(), until = try r.instant(), cause = try r.int()
            snoozes.append(Snooze(app: Self.placeholder.app, id: Self.placeholder.id, notification: Self.placeholder,
                                  seq: seq, until: until, causeSeq: cause))
        }
        for _ in try 0..<r.count() { bannerTimes.append(try r.instant()) }
        for _ in try 0..<r.count() { tombstones.append(NotificationKey(app: try r.string(), id: try r.string())) }
    }

    /// Seqs whose content a decoded snapshot state still needs before it is used: queued and
    /// held items, snoozable records and snoozes (deferred items may stay lean).
    public var snapshotContentNeeded: [Int64] {
        var seqs: [Int64] = []
        for p in pending where p.content == nil && p.stage != .deferred { seqs.append(p.seq) }
        for s in snoozable where s.notification.isSnapshotPlaceholder { seqs.append(s.seq) }
        for s in snoozes where s.notification.isSnapshotPlaceholder { seqs.append(s.seq) }
        return seqs
    }

    /// Calls `body` with every seq `snapshotContentNeeded` lists plus the lean deferred items due
    /// by `keepUntil`, in one pass and without allocating (a million users are decoded at start-up).
    public func forEachContentNeededAfterSnapshot(keepUntil: Instant, _ body: (Int64) -> Void) {
        for p in pending where p.content == nil && (p.stage != .deferred || p.deadline! <= keepUntil) { body(p.seq) }
        for s in snoozable where s.notification.isSnapshotPlaceholder { body(s.seq) }
        if rare.isAllocated {
            for s in snoozes where s.notification.isSnapshotPlaceholder { body(s.seq) }
        }
    }

    /// Every seq whose submit's body this state may read back by seq: what a loaded snapshot refers
    /// to (`forEachContentNeededAfterSnapshot`, at any deadline) and the recently delivered
    /// notifications a snooze may name (`contentNeeded(toApply:)`). Retention keeps these bodies
    /// when their events are dropped.
    public func forEachContentReferenced(_ body: (Int64) -> Void) {
        forEachContentNeededAfterSnapshot(keepUntil: .latestRepresentable, body)
        for i in 0..<apps.count {
            for r in apps[at: i].recent { body(r.seq) }
        }
    }

    /// Supplies content to every record that references `seq` (pending, snoozable, snooze).
    public mutating func supplySnapshotContent(_ n: SubmittedNotification, seq: Int64) {
        _ = supplyPendingContent(n, seq: seq)
        for i in snoozable.indices where snoozable[i].seq == seq { snoozable[i].notification = n }
        for i in snoozes.indices where snoozes[i].seq == seq { snoozes[i].supply(n) }
    }

    /// Stands for content not loaded yet (never compared equal to a real notification).
    static let placeholder = SubmittedNotification(id: "\u{0}snapshot", app: "\u{0}snapshot")

    static func previewsCode(_ p: ShowPreviews) -> UInt8 {
        switch p { case .always: 0; case .whenUnlocked: 1; case .never: 2 }
    }

    static func previews(_ c: UInt8) throws(SnapshotFormatError) -> ShowPreviews {
        switch c {
        case 0: return .always
        case 1: return .whenUnlocked
        case 2: return .never
        default: throw SnapshotFormatError("bad showPreviews \(c)")
        }
    }

    static func statusCode(_ s: AuthorizationStatus) -> UInt8 {
        switch s { case .notDetermined: 0; case .denied: 1; case .authorized: 2; case .provisional: 3 }
    }

    static func status(_ c: UInt8) throws(SnapshotFormatError) -> AuthorizationStatus {
        switch c {
        case 0: return .notDetermined
        case 1: return .denied
        case 2: return .authorized
        case 3: return .provisional
        default: throw SnapshotFormatError("bad authorization status \(c)")
        }
    }
}

extension SubmittedNotification {
    var isSnapshotPlaceholder: Bool { app == "\u{0}snapshot" }
}

extension AppRegistry {
    /// Encodes every registered app and its entitlements (sorted).
    public func encodeSnapshot(to w: inout SnapshotWriter) {
        let names = apps
        w.count(names.count)
        for n in names { w.string(n); w.u8(entitlements(of: n).rawValue) }
    }

    /// Decodes what `encodeSnapshot` wrote.
    public init(snapshot r: inout SnapshotReader) throws(SnapshotFormatError) {
        self.init()
        for _ in try 0..<r.count() {
            let n = try r.string()
            register(n, entitlements: Entitlements(rawValue: try r.u8()))
        }
    }
}
