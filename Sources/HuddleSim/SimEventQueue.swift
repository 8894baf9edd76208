/// A min-heap of timed events for the simulator's virtual clock.
///
/// Guarantees: events come out in time order; events at the same time come out in the order they
/// were scheduled, so a run is a pure function of its inputs.
struct SimEventQueue<Event>: Sendable where Event: Sendable {
    /// The heap holds only times and slots: sifting moves 24 bytes, not an event (the session
    /// simulator's events are large enough that copying them in the heap was 5 % of its time).
    private struct Item: Sendable {
        var time: Double
        var order: UInt64
        var slot: Int
        func before(_ other: Item) -> Bool { time < other.time || (time == other.time && order < other.order) }
    }

    private var heap: [Item] = []
    /// Scheduled events by slot; a popped event's slot is reused (`free`).
    private var events: [Event?] = []
    private var free: [Int] = []
    private var counter: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    var nextTime: Double? { heap.first?.time }

    mutating func schedule(_ event: Event, at time: Double) {
        counter += 1
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            events[slot] = event
        } else {
            slot = events.count
            events.append(event)
        }
        heap.append(Item(time: time, order: counter, slot: slot))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].before(heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (time: Double, event: Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let item = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < heap.count, heap[l].before(heap[smallest]) { smallest = l }
            if r < heap.count, heap[r].before(heap[smallest]) { smallest = r }
            if smallest == i { break }
            heap.swapAt(i, smallest)
            i = smallest
        }
        // Every slot in the heap holds its event until it is popped here.
        guard let event = events[item.slot].take() else { preconditionFailure("event slot \(item.slot) in the heap was empty") }
        free.append(item.slot)
        return (item.time, event)
    }
}
