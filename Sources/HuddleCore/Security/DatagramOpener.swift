/// A datagram that opened, and under which form: what `SessionCore.receiveDatagram` judges.
public struct OpenedDatagram: Sendable, Equatable {
    public enum Form: Sendable, Equatable {
        /// The session-key form (`DatagramSeal`): any key holder could have sealed it, so its
        /// `sender` is only a claim.
        case session
        /// Under the receive key `serial` of the payload's sender (`PairDatagramSeal`): the sender
        /// is authenticated and the datagram was sealed for this member.
        case link(serial: UInt64)
    }

    public let payload: DatagramPayload
    public let form: Form

    public init(_ payload: DatagramPayload, form: Form) { self.payload = payload; self.form = form }
}

/// Opens datagrams for `local` with the session key and the link keys held when it was made (a
/// `DatagramKeyring` snapshot; the node hands a fresh one to its UDP receive thread whenever keys
/// change).
///
/// Guarantees: nothing is parsed before the AEAD check but the seal's clear header; a datagram
/// opens as `.link` only under a receive key of the member its header names, only when sealed for
/// `local`, and only when its payload names that same member as sender; at most one AEAD check per
/// datagram unless two of a member's keys share an id (2⁻³² per pair). The session-key form is
/// tried under the current epoch's key, then under at most `maximumOlderSeals` keys of earlier
/// epochs still within the grace (`older`, issue 21: a member that missed a rotation still pings):
/// after a rotation, a session-key datagram that fails costs up to 1 + that many AEAD checks.
public struct DatagramOpener: Sendable {
    public let local: MemberID
    let session: DatagramSeal
    let entries: [MemberID: [DatagramKeyring.Entry]]
    let older: [DatagramSeal]
    /// Most earlier epochs' session keys a datagram is tried under.
    public static let maximumOlderSeals = 2

    public init(local: MemberID, session: DatagramSeal, keys: DatagramKeyring, older: [DatagramSeal] = []) {
        self.local = local; self.session = session; entries = keys.entries; self.older = Array(older.prefix(Self.maximumOlderSeals))
    }

    public func open(_ datagram: [UInt8]) throws(CoreError) -> OpenedDatagram {
        guard let version = datagram.first else { throw CoreError("empty datagram") }
        switch version {
        case DatagramSeal.version:
            if let plain = try? session.open(datagram) { return OpenedDatagram(try DatagramPayload.decode(plain), form: .session) }
            for seal in older {
                if let plain = try? seal.open(datagram) { return OpenedDatagram(try DatagramPayload.decode(plain), form: .session) }
            }
            throw CoreError("datagram failed to open")
        case PairDatagramSeal.version:
            let (sender, keyID) = try PairDatagramSeal.header(datagram)
            for entry in entries[sender] ?? [] where entry.keys.receiveID == keyID {
                guard let plain = try? PairDatagramSeal.open(datagram, to: local, key: entry.keys.receive) else { continue }
                let payload = try DatagramPayload.decode(plain)
                guard payload.sender == sender else { throw CoreError("datagram payload names another sender than its seal") }
                return OpenedDatagram(payload, form: .link(serial: entry.serial))
            }
            throw CoreError("datagram failed to open")
        default:
            throw CoreError("unsupported datagram seal version \(version)")
        }
    }
}
