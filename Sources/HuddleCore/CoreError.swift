import HuddleCrypto
import HuddleErrors

/// Every error HuddleCore throws: what failed (`code`, which a program matches, with the payload a
/// caller acts on) and the one line a person reads (`message`). One type for the module, as
/// swift-nio-ssh's `NIOSSHError`; never a trap: every bad input is one of these.
///
/// Guarantees: each static constructor below makes its code with the same line every time, so two
/// errors made by one are equal; the core counts a refusal (`SessionCore.ownRefusals`, the relay's
/// `refusals`) where it throws it, not here.
public typealias CoreError = CodedError<CoreErrorCode>

/// What failed (`CoreError.code`): a program matches it; the payload is what a caller acts on.
public enum CoreErrorCode: ErrorCode {
    // Decoding.
    /// A byte string that cannot be decoded (a decoder's "why"): `message` says what.
    case malformed
    /// A text that is not a `host:port` (`HostPort.split`).
    case badAddress
    /// A typed invitation code that is not one (`InvitationCode.parse`).
    case badInvitationCode

    // An epoch change this member makes (`EpochHistory+Making`, `SessionCore+Epochs`).
    /// It does not hold the current epoch's key (removed, or waiting for a grant).
    case notHandedCurrentKey
    /// The session has admins and this node key is not one.
    case notAdmin
    /// An admin-set change that cannot be made: the session has no admins (they are fixed at
    /// `huddle keygen`), it would leave none, or more than `SessionKey.maxAdmins`.
    case adminsUnchangeable
    /// A member cannot remove itself.
    case removingSelf
    /// Nothing to remove.
    case nobodyToRemove
    /// More node keys to remove than one change carries (`EpochChange.maxRemoved`).
    case tooManyToRemove
    /// This member holds the current key by a grant, not by the roster: only the roster makes the next epoch.
    case notOnRoster
    /// The new key could not be sealed to a roster node key (never for keys `SealedBox.canSeal` accepts).
    case cannotSeal
    /// This member made `EpochSettings.changeBurst` changes in a row already: its next one would
    /// be above its rate, so it is not made before `until` (the session core's `now`).
    case rateLimited(until: Double)
    /// The epoch rules refused the change this member made (they never should: a bug).
    case ownChangeRefused(Refusal)

    // A link this member does not admit (`SessionCore.admitLink`, `linkEstablished`).
    /// The handshake proved this member itself.
    case linkToSelf
    /// The peer left the session.
    case peerLeft
    /// The epoch rules refused the key its handshake proved, or its node key (`EpochHistory.admission`).
    case linkRefusedByEpoch(Refusal)
    /// The member id is pinned to another node key than the one the handshake proved.
    case anotherNodeKey
    /// The peer's own record names another node key than the one its handshake proved.
    case recordNamesAnotherNodeKey
    /// `SessionCore.strangerLinkLimit` links to peers that are not members yet are up already.
    case tooManyStrangers
    /// The peer's record names an address that is not a numeric `host:port` (`HostPort.numeric`).
    case hostnameAddress
    /// A link over a relay for which no circuit to that peer through that relay is open, or
    /// while another link to the peer is up (a relayed link never replaces one).
    case noCircuitForLink

    // Relaying (`RelayCircuits.forward`).
    /// The relay does not forward: why (counted in `RelayCircuits.refusals`).
    case relayRefused(RelayCircuits.Refusal)

    // A send this member makes (`SessionCore.send`).
    /// The body is larger than the limit for its delivery mode.
    case tooLarge
    /// A recipient this member has never heard of.
    case unknownMember
    /// A recipient that is known but not live (failed or left), or this member was removed.
    case notMember
    /// Retransmit buffers are full (`storedBytes` held for slow members): try again later.
    case busy(storedBytes: Int)

    // A program of this member joining (`SessionCore.joinProgram`).
    /// This member has `ParticipantTable.maximumPerMember` programs already.
    case participantsFull
    /// The activity is empty or longer than `ParticipantRecord.maximumActivityBytes`.
    case badActivity

    // An attachment this member removes (`SessionCore.removeAttachment`).
    /// No live attachment has this id.
    case noSuchAttachment
    /// This member neither uploaded the attachment nor is an admin.
    case notUploaderOrAdmin
}

extension CodedError where Codes == CoreErrorCode {
    /// A byte string that cannot be decoded (`Code.malformed`): `message` says what.
    public init(_ message: String) { self.init(.malformed, message) }

    // Decoding.
    static func truncated(_ what: String) -> CoreError { CoreError("truncated \(what)") }
    /// The text has no port; the line follows the address it is about ("address X has no port …").
    public static func noPort(bracketed: Bool) -> CoreError {
        CoreError(.badAddress, bracketed ? "has no port (expected [host]:port)" : "has no port (expected host:port)")
    }
    public static var badPort: CoreError { CoreError(.badAddress, "has a bad port (expected 0-65535)") }
    public static func badNameplate(_ text: String) -> CoreError {
        CoreError(.badInvitationCode, "an invitation code starts with its number (1-\(InvitationCode.maximumNameplate)), not \"\(text)\" (e.g. 7-crossover-clockwork-ribbon)")
    }
    public static func wordCount(_ n: Int) -> CoreError {
        CoreError(.badInvitationCode, "an invitation code has \(InvitationCode.wordCount) words after its number, not \(n)")
    }
    public static func unknownWord(_ word: String) -> CoreError {
        CoreError(.badInvitationCode, "\"\(word)\" is not a word of invitation codes: check the spelling")
    }

    // Epoch changes: the lines the control protocol answers with (CONTROL.md, remove/rekey/admins).
    public static var notHandedCurrentKey: CoreError { CoreError(.notHandedCurrentKey, "this node does not hold the current epoch's key (removed, or waiting for it)") }
    public static var notAdmin: CoreError { CoreError(.notAdmin, "this node is not an admin of the session (see status.admins): it may not remove, rekey or change the admins") }
    public static var adminsUnchangeable: CoreError { CoreError(
        .adminsUnchangeable,
        "the admin set cannot be changed that way: a session without admins never gets some (they are fixed at huddle keygen --admin), one with admins keeps at least one that is a member and not removed, and at most \(SessionKey.maxAdmins)") }
    public static var removingSelf: CoreError { CoreError(.removingSelf, "a member cannot remove itself (use leave)") }
    public static var nobodyToRemove: CoreError { CoreError(.nobodyToRemove, "nobody to remove") }
    public static var tooManyToRemove: CoreError { CoreError(.tooManyToRemove, "too many node keys to remove at once (at most \(EpochChange.maxRemoved))") }
    public static var notOnRoster: CoreError { CoreError(.notOnRoster, "this node holds the current key by a grant, not by the roster: only the roster makes the next epoch") }
    public static var cannotSeal: CoreError { CoreError(.cannotSeal, "the new key cannot be sealed to a roster node key") }
    public static func rateLimited(until: Double) -> CoreError {
        CoreError(.rateLimited(until: until), "this node made epoch changes faster than the session allows (3 in a row, then one per 2 s): try again shortly")
    }
    public static func ownChangeRefused(_ reason: Refusal) -> CoreError {
        CoreError(.ownChangeRefused(reason), "the epoch rules refused this member's own change (\(reason.rawValue))")
    }

    // Links.
    public static var linkToSelf: CoreError { CoreError(.linkToSelf, "the link's handshake proved this member itself") }
    public static var peerLeft: CoreError { CoreError(.peerLeft, "the peer left the session") }
    public static func linkRefusedByEpoch(_ reason: Refusal) -> CoreError {
        CoreError(.linkRefusedByEpoch(reason), "the epoch rules refused the link's key or node key (\(reason.rawValue))")
    }
    public static var recordNamesAnotherNodeKey: CoreError { CoreError(.recordNamesAnotherNodeKey, "the peer's member record names another node key than its handshake proved") }
    public static var anotherNodeKey: CoreError { CoreError(.anotherNodeKey, "the member is pinned to another node key than the link's handshake proved") }
    public static var tooManyStrangers: CoreError { CoreError(.tooManyStrangers, "\(SessionCore.strangerLinkLimit) links from non-members are up") }
    public static var hostnameAddress: CoreError { CoreError(.hostnameAddress, "the peer's record's address is not a numeric host:port") }
    public static var noCircuitForLink: CoreError { CoreError(.noCircuitForLink, "no circuit to the peer through that relay is open, or another link to it is up") }

    // Relaying.
    public static func relayRefused(_ reason: RelayCircuits.Refusal) -> CoreError {
        CoreError(.relayRefused(reason), "the relay does not forward: \(reason.rawValue)")
    }

    // Sends: the lines the control protocol answers with (CONTROL.md, send).
    public static func tooLarge(size: Int, limit: Int, reliable: Bool) -> CoreError {
        CoreError(.tooLarge, "message body is \(size) bytes; the limit for \(reliable ? "reliable" : "unreliable") sends is \(limit)")
    }
    public static func unknownMember(_ target: MemberID) -> CoreError { CoreError(.unknownMember, "\(target) is not a live member of this session") }
    public static func notMember(_ target: MemberID) -> CoreError { CoreError(.notMember, "\(target) is not a live member of this session") }
    public static func busy(storedBytes: Int) -> CoreError {
        CoreError(.busy(storedBytes: storedBytes), "retransmit buffers are full (\(storedBytes) bytes held for slow members); try again")
    }

    // Participants: the lines the control protocol answers with (CONTROL.md, participant.join).
    public static var participantsFull: CoreError { CoreError(.participantsFull, "this node has \(ParticipantTable.maximumPerMember) participants already") }
    public static var badActivity: CoreError { CoreError(.badActivity, "\"activity\" must be 1 to \(ParticipantRecord.maximumActivityBytes) UTF-8 bytes") }

    // Attachments: the lines the control protocol answers with (CONTROL.md, attach.remove).
    public static func noSuchAttachment(_ id: String) -> CoreError { CoreError(.noSuchAttachment, "no attachment \(id)") }
    public static func notUploaderOrAdmin(_ id: String) -> CoreError {
        CoreError(.notUploaderOrAdmin, "only the uploader of attachment \(id) or an admin of the session may remove it")
    }
}
