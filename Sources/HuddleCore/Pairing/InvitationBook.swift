/// A member's invitations (pure: time and randomness are passed in).
///
/// Guarantees:
/// - an invitation admits at most `uses` pairings, none after `expiresAt`, and none once
///   `burnAfterFailures` attempts failed (a wrong code, or a joiner that went away mid-exchange);
/// - attempts in flight count against the uses left, so two joiners racing for the last use
///   cannot both get the key;
/// - at most `limit` invitations are kept: expired, used-up and burned ones are dropped first,
///   then the oldest; nameplates are unique among those kept.
public struct InvitationBook: Sendable {
    public struct Invitation: Sendable, Equatable {
        public let code: InvitationCode
        public let expiresAt: Double
        public fileprivate(set) var usesLeft: Int
        public fileprivate(set) var failures = 0
        fileprivate var inFlight = 0
        public var nameplate: UInt32 { code.nameplate }
    }

    /// Why an attempt is refused before any exchange.
    public enum Refusal: Sendable, Equatable, CustomStringConvertible {
        case unknown, expired, usedUp, burned, busy
        public var description: String {
            switch self {
            case .unknown: "no such invitation on this member"
            case .expired: "the invitation expired"
            case .usedUp: "the invitation was used already"
            case .burned: "the invitation is burned after \(InvitationBook.burnAfterFailures) failed attempts"
            case .busy: "another host is pairing with this invitation right now; try again in a moment"
            }
        }
    }

    public enum Start: Sendable, Equatable {
        case accepted(InvitationCode)
        case refused(Refusal)
    }

    public static let burnAfterFailures = 3
    public static let limit = 64
    public private(set) var invitations: [UInt32: Invitation] = [:]
    private var issued: [UInt32] = []  // nameplates, oldest first

    public init() {}

    /// A new invitation valid for `ttl` seconds and `uses` pairings. `randomBytes` (≥ 10): two pick
    /// the nameplate, eight the words.
    public mutating func issue(now: Double, ttl: Double, uses: Int, randomBytes: [UInt8]) -> Invitation {
        prune(now: now)
        var nameplate = (UInt32(randomBytes[0]) << 8 | UInt32(randomBytes[1])) % InvitationCode.maximumNameplate + 1
        while invitations[nameplate] != nil { nameplate = nameplate % InvitationCode.maximumNameplate + 1 }
        let invitation = Invitation(code: InvitationCode(nameplate: nameplate, randomBytes: Array(randomBytes.dropFirst(2))),
                                    expiresAt: now + ttl, usesLeft: max(1, uses))
        invitations[nameplate] = invitation
        issued.append(nameplate)
        return invitation
    }

    /// A joiner's hello named `nameplate`: its code (the password) when an attempt may start.
    public mutating func beginAttempt(nameplate: UInt32, now: Double) -> Start {
        guard var invitation = invitations[nameplate] else { return .refused(.unknown) }
        if invitation.failures >= Self.burnAfterFailures { return .refused(.burned) }
        if invitation.usesLeft == 0 { return .refused(.usedUp) }
        if now >= invitation.expiresAt { return .refused(.expired) }
        if invitation.inFlight >= invitation.usesLeft { return .refused(.busy) }
        invitation.inFlight += 1
        invitations[nameplate] = invitation
        return .accepted(invitation.code)
    }

    /// The joiner proved it knows the code: one use is spent.
    public mutating func attemptSucceeded(nameplate: UInt32) {
        guard var invitation = invitations[nameplate] else { return }
        invitation.inFlight = max(0, invitation.inFlight - 1)
        invitation.usesLeft = max(0, invitation.usesLeft - 1)
        invitations[nameplate] = invitation
    }

    /// The attempt failed; true when that burned the invitation.
    public mutating func attemptFailed(nameplate: UInt32) -> Bool {
        guard var invitation = invitations[nameplate] else { return false }
        invitation.inFlight = max(0, invitation.inFlight - 1)
        invitation.failures += 1
        invitations[nameplate] = invitation
        return invitation.failures == Self.burnAfterFailures
    }

    /// Keeps the book under `limit`: drops what can no longer pair, then the oldest.
    private mutating func prune(now: Double) {
        guard invitations.count >= Self.limit else { return }
        let dead = issued.filter { plate in
            guard let i = invitations[plate] else { return true }
            return i.inFlight == 0 && (now >= i.expiresAt || i.usesLeft == 0 || i.failures >= Self.burnAfterFailures)
        }
        for plate in dead { invitations[plate] = nil }
        issued.removeAll { invitations[$0] == nil }
        while invitations.count >= Self.limit, let oldest = issued.first {
            invitations[oldest] = nil
            issued.removeFirst()
        }
    }
}
