// Content an event's fold needs that the user's state no longer holds, read back from `events`.
import HeraldCore

/// The blocking read for folds that run off the service loop — start-up's fold, replay and the
/// point-in-time tools; the serving loop reads the same content without blocking
/// (HeraldService+Content). A `snooze` of a notification older than the last deliveries whose
/// content a user's state keeps (`UserState.contentNeeded(toApply:)`) needs its submit's body:
/// each fold reads it, so each decides the snooze alike.
public enum EventContent {
    /// Reads and supplies to `state` what folding `event` needs (nothing for most events, without
    /// touching the database). `connection` is asked for only when a read is needed.
    /// With `keys`, a sealed body is opened (its erased form when the key is gone).
    public static func supply(toApply event: StoredEvent, to state: inout UserState, keys: KeyRing? = nil,
                              connection: () throws(StoreError) -> PGConnection) throws(StoreError) {
        guard event.kind == .snooze, let seq = state.contentNeeded(toApply: event) else { return }
        try SnapshotStore.readBodies(try connection(), seqs: [seq], keys: keys) { s, body in
            state.supplyContent(SubmittedNotification(canonicalBody: body), seq: s)
        }
    }
}
