import HuddleCrypto

/// Signs this member's membership statements and checks other members' (issue 20, item 2).
///
/// Guarantees of `NodeKeySigner`, the one the session core uses: a statement verifies only under
/// the node key that signed it, and statements of different kinds never verify as each other
/// (each starts with its own context string; see `MembershipStatement`).
public protocol MembershipSigner: Sendable {
    /// This member's signature over `statement` (empty when the signer does not sign).
    func sign(_ statement: [UInt8]) -> [UInt8]
    /// Whether `signature` is `nodeKey`'s over `statement`.
    func verify(_ signature: [UInt8], of statement: [UInt8], by nodeKey: [UInt8]) -> Bool
}

/// Ed25519 under the member's node key: what every real member runs.
public struct NodeKeySigner: MembershipSigner {
    private let identity: Identity
    public init(_ identity: Identity) { self.identity = identity }
    public func sign(_ statement: [UInt8]) -> [UInt8] { identity.sign(statement) }
    public func verify(_ signature: [UInt8], of statement: [UInt8], by nodeKey: [UInt8]) -> Bool {
        Identity.verify(signature: signature, message: statement, publicKey: nodeKey)
    }
}

/// Signs nothing and believes everything. Only for simulations that measure dissemination at
/// thousands of members and for tests of SWIM's precedence rules; `SessionCore` never uses it.
public struct UncheckedMembershipSigner: MembershipSigner {
    public init() {}
    public func sign(_ statement: [UInt8]) -> [UInt8] { [] }
    public func verify(_ signature: [UInt8], of statement: [UInt8], by nodeKey: [UInt8]) -> Bool { true }
}

/// The bytes a membership signature covers. A member signs its own `alive` record (every
/// incarnation: join, refutation, update) and its `left`; a suspecter signs its `suspect` or
/// `failed` claim about another member, naming that member's incarnation.
public enum MembershipStatement {
    public static func alive(_ info: MemberInfo) -> [UInt8] {
        var w = WireWriter(capacity: 96 + info.name.utf8.count + info.addr.utf8.count)
        w.raw(Array("huddle member alive v1".utf8))
        w.member(info.id); w.bytes16(info.node); w.string16(info.name); w.string16(info.addr); w.u64(info.incarnation)
        // The reach addresses (issue 36), only when there are any: a record without them signs as before.
        if !info.reach.isEmpty {
            w.u8(UInt8(info.reach.prefix(MemberInfo.maximumReach).count))
            for addr in info.reach.prefix(MemberInfo.maximumReach) { w.string16(addr) }
        }
        return w.bytes
    }

    public static func left(_ id: MemberID, incarnation: UInt64) -> [UInt8] {
        var w = WireWriter(capacity: 40)
        w.raw(Array("huddle member left v1".utf8))
        w.member(id); w.u64(incarnation)
        return w.bytes
    }

    /// `failed` false: a suspicion; true: a declaration that the member failed.
    public static func claim(failed: Bool, about id: MemberID, incarnation: UInt64, by from: MemberID) -> [UInt8] {
        var w = WireWriter(capacity: 48)
        w.raw(Array((failed ? "huddle member failed v1" : "huddle member suspect v1").utf8))
        w.member(id); w.u64(incarnation); w.member(from)
        return w.bytes
    }
}

extension MemberInfo {
    /// This record, alive, with `identity`'s signature as its proof: how a member (or a simulation
    /// or test speaking for one) presents itself. `identity` must be the record's own node key for
    /// anyone to believe it.
    public func signed(by identity: Identity) -> MemberInfo {
        var record = self
        record.state = .alive
        record.claim = nil
        record.proof = identity.sign(MembershipStatement.alive(record))
        return record
    }
}
