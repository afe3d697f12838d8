// The bridge's window: Herald's cursor moves only over deliveries the broker confirmed, in order, per partition.
@testable import HeraldCore
import Testing

@Suite struct BridgeWindowTests {
    static func at(_ c: Int64, _ p: Int64? = nil) -> DeliveryPosition { DeliveryPosition(partition: p, cursor: c) }

    @Test func aCursorIsAcknowledgeableOnceEveryDeliveryBeforeItIsConfirmed() {
        var w = BridgeWindow(capacity: 8)
        for c in 1...3 { #expect(w.deliveryReceived(Self.at(Int64(c))) == .publish(Self.at(Int64(c)))) }
        w.publishConfirmed(Self.at(2))
        #expect(w.takeAcks() == [], "1 is not confirmed yet")
        w.publishConfirmed(Self.at(1))
        #expect(w.takeAcks() == [Self.at(2)])
        #expect(w.takeAcks() == [], "handed over once")
        w.publishConfirmed(Self.at(3))
        #expect(w.takeAcks() == [Self.at(3)] && w.inFlight == 0)
    }

    @Test func theWindowBoundsThePublishesInFlight() {
        var w = BridgeWindow(capacity: 2)
        _ = w.deliveryReceived(Self.at(1)); _ = w.deliveryReceived(Self.at(2))
        #expect(!w.hasRoom)
        w.publishConfirmed(Self.at(1))
        #expect(w.hasRoom && w.inFlight == 1)
    }

    @Test func whatTheBrokerHoldsAlreadyIsPassedOverAndAcknowledged() {
        var w = BridgeWindow(capacity: 4, storedThrough: [0: 5])
        #expect(w.deliveryReceived(Self.at(4)) == .passOver(Self.at(4)))
        #expect(w.deliveryReceived(Self.at(5)) == .passOver(Self.at(5)))
        #expect(w.deliveryReceived(Self.at(6)) == .publish(Self.at(6)))
        #expect(w.takeAcks() == [Self.at(5)] && w.inFlight == 1)
    }

    @Test func partitionsMoveApartAndKeepTheirPartitionField() {
        var w = BridgeWindow(capacity: 8, storedThrough: [1: 10])
        _ = w.deliveryReceived(Self.at(7, 0))
        #expect(w.deliveryReceived(Self.at(9, 1)) == .passOver(Self.at(9, 1)))
        _ = w.deliveryReceived(Self.at(11, 1))
        w.publishConfirmed(Self.at(11, 1))
        #expect(w.takeAcks() == [Self.at(11, 1)], "partition 0's 7 is not confirmed")
        w.publishConfirmed(Self.at(7, 0))
        #expect(w.takeAcks() == [Self.at(7, 0)])
    }

    @Test func aMessageIDNamesPartitionAndCursor() {
        #expect(Self.at(42).messageID == "0:42" && Self.at(42, 3).messageID == "3:42")
        #expect(DeliveryPosition(messageID: "3:42") == Self.at(42, 3))
        #expect(DeliveryPosition(messageID: "x:1") == nil && DeliveryPosition(messageID: "1") == nil)
    }
}
