@testable import HuddleNode
import Testing

/// Issue 33, item 4: stall detection on what is read. A link's outbox counts a take as progress
/// only when it leaves less than `progressBelow` queued, so a peer that reads a little now and
/// then while a backlog stays is still seen as stalled (1 MiB read every 59 s used to keep a link
/// open for ever under a 60 s stall limit).
@Test func aSmallTakeThatLeavesABacklogIsNoProgress() async {
    let outbox = Outbox<Int>(batchBytes: 100, progressBelow: 1_000)
    for i in 0..<50 { outbox.push(i, bytes: 100, wake: false) }
    guard let first = outbox.waitingSince else { Issue.record("5,000 bytes queued but not waiting"); return }
    // One take of 100 bytes leaves 4,900: still the backlog it was.
    #expect(await outbox.takeAll()?.count == 1)
    #expect(outbox.waitingSince == first, "a take that leaves the backlog above progressBelow is no progress")
    // Takes down to under 1,000 bytes are progress.
    try? await Task.sleep(for: .milliseconds(2))
    for _ in 0..<41 { _ = await outbox.takeAll() }
    #expect(outbox.queuedBytes == 800)
    #expect(outbox.waitingSince.map { $0 > first } ?? false, "a take that brings it under progressBelow is progress")
    for _ in 0..<8 { _ = await outbox.takeAll() }
    #expect(outbox.waitingSince == nil, "empty")
}

/// Without `progressBelow` (control connections, datagrams) every take is progress, as before.
@Test func byDefaultEveryTakeIsProgress() async {
    let outbox = Outbox<Int>(batchBytes: 100)
    for i in 0..<50 { outbox.push(i, bytes: 100, wake: false) }
    guard let first = outbox.waitingSince else { Issue.record("not waiting"); return }
    try? await Task.sleep(for: .milliseconds(2))
    _ = await outbox.takeAll()
    #expect(outbox.waitingSince.map { $0 > first } ?? false)
}
