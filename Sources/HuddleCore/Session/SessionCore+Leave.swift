/// Why this member leaves for good (`SessionCore.beginLeave`).
public enum LeaveCause: Sendable, Equatable {
    /// The control op `leave`, with its `timeout_ms` in seconds (nil: CONTROL.md's default, 30 s).
    case request(handOffWait: Double?)
    /// A signal, without a data directory (with one, the node stops and keeps its membership).
    case shutdown
}

/// A graceful leave, as the session core plans it (`SessionCore.beginLeave`). In order, the shell:
/// 1. runs `effects` (this member's waiting batch: an announcement must reach the peers before
///    its chunks do);
/// 2. reads and pushes each chunk of `handOff` to its peer, then waits at most `handOffWait`
///    seconds until `SessionCore.handedOff` counts them all;
/// 3. runs `SessionCore.leave(now:)`, keeps the membership running for `SessionCore.leaveLinger`
///    seconds (repeating `left` in its gossip), and closes its links.
public struct LeavePlan: Sendable {
    public let handOff: [(peer: MemberID, id: String, index: Int)]
    public let effects: [SessionEffect]
    public let handOffWait: Double
}

extension SessionCore {
    /// How long the `leave` op waits for its hand-off, unless it names a `timeout_ms` (CONTROL.md).
    public static let requestHandOffWait = 30.0
    /// How long a signal's leave waits for its hand-off (a service manager's stop timeout is near).
    public static let shutdownHandOffWait = 10.0
    /// Seconds membership keeps gossiping `left` before the links close.
    public static let leaveLinger = 0.5

    /// The first step of a graceful leave: the hand-off (`handOff`) and how long to wait for it.
    public mutating func beginLeave(_ cause: LeaveCause) -> LeavePlan {
        let wait: Double = switch cause {
        case let .request(wait): max(0, wait ?? Self.requestHandOffWait)
        case .shutdown: Self.shutdownHandOffWait
        }
        let (plan, effects) = handOff()
        return LeavePlan(handOff: plan, effects: effects, handOffWait: wait)
    }

    /// This member leaves: membership gossips `left`, by datagram and over every link too (a
    /// datagram may be lost, and the links close right after).
    public mutating func leave(now: Double) -> [SessionEffect] {
        let effects = membership(swim.leave(now: now), now: now)
        var out: [SessionEffect] = []
        for effect in effects {
            out.append(effect)
            if case let .sendDatagram(payload, _, _) = effect, case let .swim(message) = payload.content { out.append(.sendToLinks(.swim(message))) }
        }
        return out
    }
}
