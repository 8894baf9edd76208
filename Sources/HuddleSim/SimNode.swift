import HuddleCore

/// One simulated node: a real `SWIMInstance` plus what the simulator needs to drive it.
struct SimNode: Sendable {
    enum Status: Sendable, Equatable { case pending, running, paused, crashed, left }

    var instance: SWIMInstance
    var status: Status = .pending
    var joinedAt = Double.infinity
    var crashedAt: Double?
    var leftAt: Double?
    /// Inputs that arrived while paused, handled in order on resume.
    var backlog: [SimEvent] = []
    /// The time of this node's pending tick event (infinity when none).
    var scheduledTick = Double.infinity

    /// Running or paused: alive as far as correctness is concerned.
    var isLive: Bool { status == .running || status == .paused }
}

/// Everything that happens in a simulation, in virtual time.
enum SimEvent: Sendable {
    case start(Int)
    case tick(Int)
    case deliver(to: Int, from: Int, bytes: [UInt8])
    /// The initiator's state reaches the contacted node, which merges it and answers.
    case pushPullRequest(to: Int, from: Int, bytes: [UInt8])
    /// The answer reaches the initiator.
    case pushPullReply(to: Int, from: Int, bytes: [UInt8])
    case crash(Int)
    case pause(Int, until: Double)
    case resume(Int)
    case leave(Int)
}
