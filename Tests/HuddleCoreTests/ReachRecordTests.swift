import HuddleCrypto
import Testing
@testable import HuddleCore

/// A member's reach addresses in its signed record (issue 36, item 1).
private func signed(_ raw: UInt64, reach: [String], incarnation: UInt64 = 1) -> (MemberInfo, Identity) {
    let identity = Identity(seed: [UInt8](repeating: UInt8(raw), count: 32))
    let info = MemberInfo(id: MemberID(raw: raw), node: identity.publicKey, name: "m\(raw)", addr: testAddr("m\(raw)"),
                          incarnation: incarnation, reach: reach).signed(by: identity)
    return (info, identity)
}

@Test func reachAddressesTravelInTheRecordAndAreSignedWithIt() throws {
    let (info, _) = signed(9, reach: ["198.51.100.1:7400"])
    let decoded = try MemberInfo.decode(info.encoded())
    #expect(decoded == info && decoded.reach == ["198.51.100.1:7400"])
    var w = WireWriter(capacity: 256)
    info.encode(into: &w)
    #expect(w.bytes.count == info.encodedSize)
    #expect(Identity.verify(signature: info.proof, message: MembershipStatement.alive(info), publicKey: info.node))
    var tampered = info
    tampered.reach = ["203.0.113.66:7400"]
    #expect(!Identity.verify(signature: info.proof, message: MembershipStatement.alive(tampered), publicKey: info.node),
            "another reach address breaks the record's signature")
    // A record without reach addresses signs exactly as before they existed.
    let (plain, _) = signed(9, reach: [])
    var old = WireWriter(capacity: 128)
    old.raw(Array("huddle member alive v1".utf8))
    old.member(plain.id); old.bytes16(plain.node); old.string16(plain.name); old.string16(plain.addr); old.u64(plain.incarnation)
    #expect(MembershipStatement.alive(plain) == old.bytes)
}

@Test func aRecordWithTooManyOrNonNumericReachAddressesIsRefused() {
    let (info, _) = signed(9, reach: [])
    var bytes = info.encoded()
    bytes[bytes.count - 1] = UInt8(MemberInfo.maximumReach + 1)
    #expect(throws: CoreError.self) { try MemberInfo.decode(bytes) }
    var w = WireWriter(capacity: 256)
    w.u8(2)
    var named = info
    named.reach = ["example.com:7400"]
    named.encode(into: &w)
    #expect(throws: CoreError.self) { try MemberInfo.decode(w.bytes) }
    // Every truncation of a record with reach addresses is refused, never a trap.
    let (full, _) = signed(9, reach: ["198.51.100.1:7400", "[2001:db8::1]:7400"])
    let encoded = full.encoded()
    for n in 0..<encoded.count { #expect((try? MemberInfo.decode(Array(encoded.prefix(n)))) == nil) }
}

@Test func aRecordsNewReachAddressesAreAnUpdateOthersBelieveOnlySigned() {
    let (first, identity) = signed(9, reach: [], incarnation: 1)
    var s = SWIMInstance(local: MemberInfo(id: MemberID(raw: 5), node: [UInt8](repeating: 5, count: 32), name: "me", addr: testAddr("me")),
                         seed: 1, signer: NodeKeySigner(Identity(seed: [UInt8](repeating: 5, count: 32))))
    _ = s.receivePushPull([first], join: false, from: first.addr, now: 1)
    var moved = first
    moved.reach = ["198.51.100.1:7400"]
    moved.incarnation = 2
    let forged = s.receivePushPull([moved], join: false, from: first.addr, now: 2)
    #expect(s.members[first.id]?.reach == [], "a record whose reach was changed without its member's signature is refused: \(forged)")
    let resigned = moved.signed(by: identity)
    let effects = s.receivePushPull([resigned], join: false, from: first.addr, now: 3)
    #expect(s.members[first.id]?.reach == ["198.51.100.1:7400"])
    #expect(effects.emitted(about: 9) == [.updated])
}

@Test func aMemberBehindAnEasyNATPutsItsMappingInItsRecordAndOnlyThen() {
    let identity = Identity(seed: [UInt8](repeating: 5, count: 32))
    let me = MemberInfo(id: MemberID(raw: 5), node: identity.publicKey, name: "me", addr: "192.168.1.2:7400").signed(by: identity)
    var c = SessionCore(local: me, identity: identity, joining: false, swimSeed: 1, journalSeed: 1)
    let (a, _) = signed(7, reach: []), (b, _) = signed(8, reach: [])
    _ = c.receivePushPull(SWIMPushPull(join: false, members: [a, b]), from: a.addr, now: 1)
    _ = c.receiveLink(.observed(link: "", datagram: "198.51.100.1:7400"), from: a.id, addr: a.addr, now: 2)
    _ = c.tick(now: 2)
    #expect(c.nat == .easy && c.swim.local.reach.isEmpty && c.tentativeReach == ["198.51.100.1:7400"],
            "one reporter's word: tentative (punch steps only), not signed")
    _ = c.receiveLink(.observed(link: "", datagram: "198.51.100.1:7400"), from: b.id, addr: b.addr, now: 3)
    _ = c.tick(now: 3)
    #expect(c.nat == .easy && c.swim.local.reach == ["198.51.100.1:7400"] && c.swim.local.incarnation == 1, "two agree: signed")
    let local = c.swim.local
    #expect(Identity.verify(signature: local.proof, message: MembershipStatement.alive(local), publicKey: me.node))
    // Hard: no address worth anyone's try; taken out of the record (not before the refresh).
    _ = c.receiveLink(.observed(link: "", datagram: "198.51.100.1:40001"), from: a.id, addr: a.addr, now: 4)
    _ = c.receiveLink(.observed(link: "", datagram: "198.51.100.1:40002"), from: b.id, addr: b.addr, now: 4)
    #expect(c.nat == .hard)
    _ = c.tick(now: 4)
    #expect(c.swim.local.reach == ["198.51.100.1:7400"], "at most one record change per refresh")
    _ = c.tick(now: 3 + ReachObservations.refresh)
    #expect(c.swim.local.reach.isEmpty && c.swim.local.incarnation == 2)
}
