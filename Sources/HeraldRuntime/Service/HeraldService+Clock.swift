// The admin `clock` op: moves the manual clock and fires every timer due up to the new instant.
import HeraldCore
import HeraldStore

extension HeraldService {
    func clock(_ request: ClientSession.Request, reply: Reply) {
        guard let current = engineClock.manual else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "clock_not_manual", title: "The clock can only be moved in manual-clock mode",
                detail: "This server runs on the system clock. Start it with --clock manual to drive time from tests or demos.")))
            return
        }
        guard let text = request.body["advanceTo"]?.stringValue, let target = Instant(rfc3339: text) else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "invalid_field", title: "“advanceTo” must be an RFC 3339 timestamp",
                detail: "For example {\"op\":\"clock\",\"advanceTo\":\"2026-03-29T08:00:00Z\"}.")))
            return
        }
        guard target >= current else {
            reply(WireReply.error(rid: request.rid, RequestError(code: "clock_backwards", title: "The manual clock cannot go back (now \(current.rfc3339))",
                detail: "Engine time only moves forward, so replay gives the same decisions. Pick an instant at or after now.")))
            return
        }
        guard let writer = writerOrRefuse(rid: request.rid, reply: reply) else { return }
        // Like every accepted request, the clock move is an event: a restart resumes at this instant.
        let row = EventRow(user: nil, type: "clock", body: JSONValue.object(["advanceTo": .string(target.rfc3339)]).canonicalString,
                           engineTime: target)
        // Engine time moves when the op is accepted: a request admitted while the clock event is in
        // flight takes the new time (it is appended after it, and engine time never goes back).
        engineClock.manual = target
        appendsInFlight.sent(at: current)
        let rid = request.rid
        writer.append(events: [row]) { [unretained] result in
            guard let self = unretained.object else { return }
            self.appendsInFlight.answered()
            switch result {
            case .failure(let error):
                // The move is not stored (or not known to be): take it back, so engine time stays what
                // the log says. Appends admitted after it (still in flight) carry the new time: never
                // below theirs. If the connection broke with the event in flight it may have committed:
                // the log is read back before anything else is appended (`reconcileUnknownCommits`),
                // and folding a stored clock event moves the clock forward again (`fold`).
                self.engineClock.manual = max(current, self.appendsInFlight.latestTime ?? current)
                if !self.store.isReady { self.appendsInFlight.outcomeLost(at: current) }
                self.log("clock move to \(target.rfc3339) not stored (\(error)); the manual clock stays at \(self.engineClock.manual!.rfc3339)")
                reply(WireReply.error(rid: rid, self.requestError(error)))
            case .success(let outcomes):
                self.eventsCommitted += 1
                let seq = outcomes.first?.seq ?? 0
                // Every event appended before this one has committed (commits are ordered); once they
                // have all folded (some may wait for lean content), fire what is due.
                self.afterHeldFolds {
                    self.lastFoldedSeq = max(self.lastFoldedSeq, seq)
                    self.fireTimers()
                    self.afterDueTimers {
                        // The success shape of SPEC §5 (seq of the stored move, warnings), plus the
                        // instant reached and how far deliveries went.
                        reply(WireReply.ok(rid: rid, ["partition": .int(Int64(self.partition)), "seq": .int(seq), "warnings": .array([]), "now": .string(target.rfc3339),
                                                      "deliveryHead": .int(self.deliveryHead)]))
                    }
                }
            }
        }
        store.kick()
    }
}
