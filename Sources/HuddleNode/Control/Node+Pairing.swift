import HuddleControl
import HuddleCore
import HuddleCrypto

/// Invitations (control op `invite`) and the member's side of a pairing: the rules live in the
/// session core's `InvitationBook`; the node issues codes, reports each attempt as an `invite`
/// event and a log line, and hands `PairingSession` the password of a live invitation.
extension Node {
    /// What a pairing hello gets: refused with a reason, or the invitation's password.
    enum PairingStart: Sendable {
        case refused(String)
        case accepted([UInt8])
    }

    func invite(ttlMs: Int64?, uses: Int?) -> JSONObject {
        let ttl = Double(ttlMs ?? 600_000) / 1000
        let invitation = core.issueInvitation(now: now, ttl: ttl, uses: uses ?? 1, randomBytes: SecureRandom.bytes(16))
        log.info("invitation \(invitation.nameplate) made: valid \(Int(ttl)) s, \(uses ?? 1) use(s)")
        emitInvite("issued", nameplate: invitation.nameplate, from: nil)
        return ["code": .string(invitation.code.text), "addr": .string(local.addr), "expires_ms": .int(Int64(ttl * 1000))]
    }

    func beginPairing(nameplate: UInt32, from remote: String) -> PairingStart {
        switch core.beginPairing(nameplate: nameplate, now: now) {
        case let .accepted(code):
            emitInvite("attempt", nameplate: nameplate, from: remote)
            return .accepted(Array(code.text.utf8))
        case let .refused(reason):
            log.info("refused a pairing from \(remote) on invitation \(nameplate): \(reason)")
            emitInvite("refused", nameplate: nameplate, from: remote, reason: reason.description)
            return .refused(reason.description)
        }
    }

    /// A pairing attempt ended: `confirmed` when the joiner proved it knows the code (the key
    /// then goes to it); otherwise a failed attempt (three burn the invitation).
    func pairingEnded(nameplate: UInt32, from remote: String, confirmed: Bool) {
        let burned = core.pairingEnded(nameplate: nameplate, confirmed: confirmed)
        if confirmed {
            log.info("paired a new host at \(remote) with invitation \(nameplate)")
            emitInvite("paired", nameplate: nameplate, from: remote)
        } else {
            log.info("a pairing from \(remote) on invitation \(nameplate) failed (wrong code or connection lost)\(burned ? "; the invitation is burned" : "")")
            emitInvite(burned ? "burned" : "failed", nameplate: nameplate, from: remote)
        }
    }

    private func emitInvite(_ change: String, nameplate: UInt32, from remote: String?, reason: String? = nil) {
        var fields: JSONObject = ["change": .string(change), "nameplate": .int(Int64(nameplate))]
        if let remote { fields["from"] = .string(remote) }
        if let reason { fields["reason"] = .string(reason) }
        events.append("invite", topic: .invite, fields)
    }
}
