import DrawTogetherKit
import Foundation
import Testing

/// Pointers: coalesced to 20 Hz when sent, hidden when stale or departed when shown.
struct CursorTests {
    private let t0 = ContinuousClock.now
    private func at(_ ms: Int) -> ContinuousClock.Instant { t0 + .milliseconds(ms) }
    private func move(_ x: Double) -> CursorMessage { CursorMessage(point: Point(x: x, y: x)) }

    @Test func movesAreCoalescedToOneMessagePer50msCarryingTheLatestPosition() {
        var throttle = CursorThrottle()
        // The first move goes at once.
        #expect(throttle.moved(move(1), now: at(0)) == at(0))
        #expect(throttle.take(now: at(0)) == move(1))
        // Ten moves within the next 50 ms: one send, due 50 ms after the last, with the tenth position.
        var due: [ContinuousClock.Instant] = []
        for i in 0..<10 { if let d = throttle.moved(move(Double(10 + i)), now: at(1 + 4 * i)) { due.append(d) } }
        #expect(due == [at(50)])
        #expect(throttle.take(now: at(50)) == move(19))
        #expect(throttle.take(now: at(51)) == nil)
        // Over a second of moves every 5 ms, at most 20 messages go (plus the first).
        var sent = 0, next: ContinuousClock.Instant?
        for ms in stride(from: 100, to: 1100, by: 5) {
            if let d = throttle.moved(move(Double(ms)), now: at(ms)) { next = d }
            if let n = next, n <= at(ms), throttle.take(now: at(ms)) != nil { sent += 1; next = nil }
        }
        #expect(sent <= 21 && sent >= 15, "\(sent) messages in a second")
    }

    @Test func aStillPointerIsSentAgainEverySecondAndAHiddenOneIsNot() {
        var throttle = CursorThrottle()
        _ = throttle.moved(move(1), now: at(0))
        _ = throttle.take(now: at(0))
        #expect(!throttle.needsRefresh(now: at(999)))
        #expect(throttle.needsRefresh(now: at(1000)))
        _ = throttle.moved(CursorMessage(point: nil), now: at(1000))
        _ = throttle.take(now: at(1000))
        #expect(!throttle.needsRefresh(now: at(5000)))
    }

    @Test func aPointerIsShownWhileItsParticipantIsPresentAndItIsFresh() {
        var table = CursorTable()
        table.heard("ann", at: Point(x: 10, y: 20), now: at(0))
        table.heard("ben", at: Point(x: 30, y: 40), now: at(0))
        #expect(table.visible(present: ["ann", "ben"], now: at(100)) == ["ann": Point(x: 10, y: 20), "ben": Point(x: 30, y: 40)])
        // ben departed: his pointer goes at once, whatever its age.
        #expect(table.visible(present: ["ann"], now: at(100)) == ["ann": Point(x: 10, y: 20)])
        // ann's pointer is refreshed; one not heard of for 3 s is stale.
        table.heard("ann", at: Point(x: 11, y: 21), now: at(2000))
        #expect(table.visible(present: ["ann", "ben"], now: at(3000)) == ["ann": Point(x: 11, y: 21)])
        let pruned = table.prune(present: ["ann", "ben"], now: at(3000))
        let again = table.prune(present: ["ann", "ben"], now: at(3001))
        #expect(pruned && !again, "ben's stale pointer is forgotten once")
        // A pointer that left the canvas is gone.
        table.heard("ann", at: nil, now: at(3100))
        #expect(table.isEmpty)
    }
}
