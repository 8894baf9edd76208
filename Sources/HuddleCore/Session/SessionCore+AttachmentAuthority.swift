/// Who may remove an attachment from the session's journal (issue 33, item 3).
///
/// Guarantees: a `remove` entry counts only when its broadcast's origin (whose signature the
/// broadcast layer checked under its pinned node key) is the attachment's uploader — the member
/// id the manifest names, or a member holding the uploader's node key (the same node after a
/// restart) — or an admin of the session. Any other remove is refused at every member and
/// counted (`Refusal.journalRemoveNotAllowed`); so is a remove that names no origin (a catch-up
/// carries live attachments only, never removals). A remove of an attachment unknown here, or
/// removed already, changes nothing. This member asking to remove an attachment it may not gets
/// `CoreError.Code.notUploaderOrAdmin`, and nothing is broadcast.
extension SessionCore {
    /// Whether `member` may remove the attachment `manifest` names: its uploader or an admin.
    func mayRemoveAttachment(_ manifest: Manifest, by member: MemberID) -> Bool {
        if member == manifest.uploader { return true }
        guard let node = member == local ? identity.publicKey : swim.members[member]?.node else { return false }
        return node == manifest.uploaderNodeKey || isAdmin(node)
    }

    /// Whether `node` is an admin of the session in the current epoch (admins may remove any
    /// attachment; the admin set is the session's signed state, issue 33). With no admins nobody
    /// is, and only an attachment's uploader removes it.
    func isAdmin(_ node: [UInt8]) -> Bool { epochs.admins.contains(node) }

    /// Whether a `remove` of attachment `id` announced by `origin` (nil: from a catch-up) is applied.
    /// Nil when there is nothing to decide (unknown here, or removed already).
    func removeAllowed(_ id: String, announcedBy origin: MemberID?) -> Bool? {
        guard let record = journal.records[id], !record.removed else { return nil }
        guard let origin else { return false }
        return mayRemoveAttachment(record.manifest, by: origin)
    }
}
