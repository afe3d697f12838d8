// One user's apps: their settings and badge, and the notifications each recently delivered.

/// The apps a user has: for each, its `AppState` and its recently delivered list, side by side.
///
/// A user has a handful of apps, so the entries are a small array kept sorted by name and found
/// by a linear scan comparing names (one pointer compare for an interned id), not a dictionary:
/// hashing the app id costs far more than the scan, and a decision would look it up three or
/// four times. A decision finds its app once and passes the index on.
/// Sorted, so two tables with the same apps are equal and iterate in the same order.
struct AppTable: Hashable, Sendable {
    struct Entry: Hashable, Sendable {
        let name: String
        var state: AppState
        /// The most recently delivered notifications (oldest first); see `remember`.
        var recent: [DeliveredRecord]

        /// Appends to the recently delivered list. Trimming is amortized: when the list reaches
        /// twice `Engine.recentLimit` the oldest are dropped down to the limit, so between 64 and
        /// 128 are remembered and an append is O(1) on average.
        mutating func remember(_ r: DeliveredRecord) {
            recent.append(r)
            if recent.count >= 2 * Engine.recentLimit { recent.removeFirst(recent.count - Engine.recentLimit) }
        }

        /// Counts a notification that reached the user toward this app's badge: drops the delivered
        /// one it `replaces` (collapse, lowering the badge if that one counted), then counts the new
        /// one unless badges are off or it is not `badged` (provisional; a snoozed one keeps its `carriedCount`).
        /// Returns whether it counts, and the badge to present (nil with badges off).
        mutating func count(replacing replaces: DeliveredRecord?, carriedCount: Bool?, badged: Bool) -> (counted: Bool, badge: Int?) {
            if let old = replaces, let i = recent.firstIndex(where: { $0.seq == old.seq }) {
                if recent.remove(at: i).counted { state.badge -= 1 }
            }
            let badgeOn = state.flags.contains(.badge) && badged
            var counted = false
            if let carried = carriedCount {
                counted = carried
            } else if badgeOn {
                state.badge += 1
                counted = true
            }
            return (counted, badgeOn ? Int(state.badge) : nil)
        }
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }

    /// The index of `app`'s entry, nil if the user has none.
    @inline(__always)
    func index(of app: String) -> Int? {
        entries.withUnsafeBufferPointer { b in
            for i in b.indices where b[i].name == app { return i }
            return nil
        }
    }

    /// The index of `app`'s entry, created with every default if there was none. Indexes of other
    /// entries may move: take them again after this.
    mutating func slot(_ app: String) -> Int {
        if let i = index(of: app) { return i }
        let i = entries.firstIndex { $0.name > app } ?? entries.count
        entries.insert(Entry(name: app, state: AppState(), recent: []), at: i)
        return i
    }

    /// `app`'s settings and badge, nil if the user has none.
    subscript(app: String) -> AppState? {
        index(of: app).map { entries[$0].state }
    }

    /// The entry at `i`, in place.
    subscript(at i: Int) -> Entry {
        get { entries[i] }
        _modify { yield &entries[i] }
    }

    /// Restores an entry read from a snapshot (any order).
    mutating func set(_ app: String, state: AppState) { entries[slot(app)].state = state }
    mutating func set(_ app: String, recent: [DeliveredRecord]) { entries[slot(app)].recent = recent }
}
