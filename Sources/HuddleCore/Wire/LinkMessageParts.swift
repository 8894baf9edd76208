/// A catch-up or a push-pull cut into several link messages, each within the link's message limit.
///
/// Guarantees: every part `LinkMessage.journalParts` and `SWIMPushPull.parts` make encodes to at
/// most `LinkMessage.partBytes` (far below `LinkMessage.maximumSize`, what a reader accepts),
/// whatever the size of the journal or the member table; the parts carry every item, in order.
/// A journal entry above `SessionCore.maximumJournalBody` (which no peer accepts) is left out.
extension LinkMessage {
    /// Largest link message a member accepts from a peer (the reader's reassembly limit): one
    /// message body at its largest plus its header. The one source of the limit (the node's reader
    /// uses it; the core keeps what it sends within it).
    public static let maximumSize = WireMessage.maximumBody + 64 * 1024

    /// Most bytes of one part of a catch-up or push-pull: a quarter of `maximumSize`, so a part never
    /// reaches the reader's limit and a large catch-up does not hold other messages up behind it.
    public static let partBytes = 256 * 1024

    /// A joiner's copy of the journal as `journal` messages of at most `partBytes` each (none when
    /// the journal is empty).
    public static func journalParts(_ entries: [JournalEntry], budget: Int = partBytes) -> [LinkMessage] {
        // version, kind, count; each entry is length-prefixed.
        let header = 1 + 1 + 4
        let sized = entries.map { ($0, $0.encoded().count) }.filter { $0.1 <= SessionCore.maximumJournalBody }
        guard !sized.isEmpty else { return [] }
        return sized.cut(within: budget - header) { 4 + $0.1 }.map { .journal($0.map(\.0)) }
    }
}

extension SWIMPushPull {
    /// `members` as push-pulls of at most `budget` bytes each as link messages, `more` set on every
    /// part but the last (at least one part, perhaps without members).
    public static func parts(join: Bool, members: [MemberInfo], budget: Int = LinkMessage.partBytes) -> [SWIMPushPull] {
        // The link message's version and kind, then the push-pull's version, flags and count.
        let header = 2 + 1 + 1 + 4
        let cut = members.cut(within: budget - header) { $0.encodedSize }
        return cut.enumerated().map { SWIMPushPull(join: join, members: $0.element, more: $0.offset < cut.count - 1) }
    }
}

extension Array {
    /// The elements in order, in runs whose `size`s add up to at most `budget` (an element larger
    /// than `budget` alone in its run); one empty run when there are no elements.
    func cut(within budget: Int, size: (Element) -> Int) -> [[Element]] {
        var runs: [[Element]] = [[]]
        var bytes = 0
        for element in self {
            let n = size(element)
            if !runs[runs.count - 1].isEmpty && n > budget - bytes {
                runs.append([])
                bytes = 0
            }
            runs[runs.count - 1].append(element)
            bytes += n
        }
        return runs
    }
}
