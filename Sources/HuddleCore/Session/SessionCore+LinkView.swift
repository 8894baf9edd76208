/// Which live members this member holds a link to and which it does not, worked out again only
/// when the view, the links or the removed members changed (`SWIMInstance.membersVersion`,
/// `LinkPlanner.linkedVersion`, `SessionCore.removedVersion`), not at every tick: at 100 members, scanning
/// them at each of a member's 20 ticks a second (the journal's live links, the relays' unlinked
/// members) was a tenth of the session simulation.
struct LinkView {
    /// The versions the view was worked out from.
    var key: (members: UInt64, links: UInt64, removed: UInt64)
    /// Live members with a link up, in member order (`SessionCore.linkedLive`).
    var linkedLive: [MemberID]
    /// Live members other than this one with no link up.
    var unlinkedLive: Set<MemberID>
}

extension SessionCore {
    /// The current `LinkView` (kept until what it was worked out from changes).
    mutating func linkView() -> LinkView {
        let key = (members: swim.membersVersion, links: planner.linkedVersion, removed: removedVersion)
        if let view = linkViewCache, view.key == key { return view }
        let linked = planner.linked
        var unlinked = Set<MemberID>()
        for id in swim.members.keys where id != local && !linked.contains(id) && isLive(id) { unlinked.insert(id) }
        let view = LinkView(key: key, linkedLive: linkedLive, unlinkedLive: unlinked)
        linkViewCache = view
        return view
    }
}
