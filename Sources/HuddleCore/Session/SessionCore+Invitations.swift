/// Pairing invitations as inputs of the session core (issue 35: the shell never reaches into a
/// sub-core). The rules are `InvitationBook`'s: codes valid for a time and a number of uses, at
/// most three failed attempts before an invitation is burned.
extension SessionCore {
    /// A new invitation (control op `invite`); `randomBytes` (16) come from the shell's secure generator.
    public mutating func issueInvitation(now: Double, ttl: Double, uses: Int, randomBytes: [UInt8]) -> InvitationBook.Invitation {
        invitations.issue(now: now, ttl: ttl, uses: uses, randomBytes: randomBytes)
    }

    /// A pairing hello naming `nameplate`: its password, or why it is refused.
    public mutating func beginPairing(nameplate: UInt32, now: Double) -> InvitationBook.Start {
        invitations.beginAttempt(nameplate: nameplate, now: now)
    }

    /// A pairing attempt ended: `confirmed` when the joiner proved it knows the code. Returns true
    /// when a failure burned the invitation.
    public mutating func pairingEnded(nameplate: UInt32, confirmed: Bool) -> Bool {
        if confirmed {
            invitations.attemptSucceeded(nameplate: nameplate)
            return false
        }
        return invitations.attemptFailed(nameplate: nameplate)
    }
}
