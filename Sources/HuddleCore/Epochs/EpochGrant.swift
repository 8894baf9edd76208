import HuddleCrypto

/// The current session key handed to one member that came back holding an older epoch's key and
/// that the current roster does not include (`EpochHistory.handover(to:holding:now:using:)` decides
/// who may have one). The key is sealed to the member's node key, with the epoch number, like a
/// recipient entry of an epoch change.
///
/// Guarantee: a grant is only as good as the epoch change it names. It carries no signature; the
/// member that receives it accepts it only for an epoch change it already holds as its head, and
/// only when the key it opens matches that change's signed key check — so a grant can hand over
/// nothing but the key the change's maker handed its roster.
///
/// Wire form: version 1 (u8), session id (8), epoch (u64, a count), head (32), recipient node key
/// (32), sealed key (`EpochChange.sealedKeyLength`).
public struct EpochGrant: Sendable, Equatable {
    public var session: [UInt8]
    public var epoch: UInt64
    /// The hash of the epoch change that made the granted epoch.
    public var head: [UInt8]
    public var recipient: [UInt8]
    public var sealedKey: [UInt8]

    public init(session: [UInt8], epoch: UInt64, head: [UInt8], recipient: [UInt8], sealedKey: [UInt8]) {
        self.session = session; self.epoch = epoch; self.head = head; self.recipient = recipient; self.sealedKey = sealedKey
    }

    static let version: UInt8 = 1

    public func encode(into w: inout WireWriter) {
        w.u8(Self.version); w.raw(session); w.u64(epoch); w.raw(head); w.raw(recipient); w.raw(sealedKey)
    }

    public func encoded() -> [UInt8] {
        var w = WireWriter(capacity: 180)
        encode(into: &w)
        return w.bytes
    }

    public static func decode(from r: inout WireReader) throws(CoreError) -> EpochGrant {
        guard try r.u8("epoch grant version") == version else { throw CoreError("unknown epoch grant version") }
        return EpochGrant(session: try r.raw(SessionKey.sessionIDLength, "session id"), epoch: try r.count("epoch"),
                          head: try r.raw(SessionKey.headLength, "head"), recipient: try r.raw(EpochChange.nodeKeyLength, "recipient"),
                          sealedKey: try r.raw(EpochChange.sealedKeyLength, "sealed key"))
    }

    /// Decodes one grant that fills `bytes` exactly.
    public static func decode(_ bytes: [UInt8]) throws(CoreError) -> EpochGrant {
        var r = WireReader(bytes)
        let grant = try decode(from: &r)
        try r.expectEnd("epoch grant")
        return grant
    }
}
