import HuddleCore
import HuddleCrypto

/// What a session simulation does: members running `SessionCore`, datagrams on a lossy network,
/// links as reliable ordered channels, faults, messaging load and an attachment.
public struct SessionScenario: Sendable {
    public var members = 10
    public var seed: UInt64 = 1
    /// Datagram loss (SWIM probes, gossip). Links are TCP: reliable and ordered.
    public var loss = 0.0
    /// One-way datagram delay: `delay` plus up to `jitter` more (datagrams reorder).
    public var delay = 0.001
    public var jitter = 0.002
    /// One-way link delay, and each link's bandwidth in bytes per second (chunks take their time).
    public var linkDelay = 0.001
    public var bandwidth = 100e6
    /// Members on a slow line: the bandwidth in bytes per second of every link to or from each.
    public var slowLinks: [Int: Double] = [:]
    /// Every member's link budget, as the node's (`LinkBudget`): at `backlogBytes` queued on a
    /// link what the peer asks of it in bulk is refused until the queue drains
    /// (`SessionCore.refusesWhileBacklogged`, `Refusal.outboxFull`); a backlog that stays for
    /// `stallSeconds`, or a queue past `hardLimitBytes`, aborts the link (`closeStalledLinks`).
    public var linkBudget = LinkBudget()
    /// Members start within this many seconds (member 0 first; the others join through it).
    public var startWindow = 1.0
    /// Reliable sends per member per second while sending; a tenth of them directed to one member.
    public var rate = 5.0
    public var directedFraction = 0.1
    /// Probability that a member answers a message it delivers (a reply depends on it).
    public var replyProbability = 0.01
    /// Sending starts once every member has started, and lasts `sendFor` seconds; then `settleFor`
    /// quiet seconds for repair, detection and transfers to finish.
    public var sendFor = 5.0
    public var settleFor = 15.0
    /// Members that crash (index, time).
    public var crashes: [(member: Int, at: Double)] = []
    /// Members that crash and start again from what they kept (index, crash time, restart time):
    /// as a node on the same `--data-dir` after `kill -9` (CONTROL.md, Restart) — the same member,
    /// its resume point and its own stored broadcasts, its delivery log going on.
    public var restarts: [(member: Int, crashAt: Double, restartAt: Double)] = []
    /// Members that leave for good (index, time), as the `leave` op does it: the hand-off the
    /// session core plans (`SessionCore.beginLeave`), a bounded wait for it, `left` gossiped, the
    /// links closed after `SessionCore.leaveLinger`.
    public var leaves: [(member: Int, at: Double)] = []
    /// Of the sends, this fraction goes unreliable (one datagram per member, as `send` with
    /// `reliable: false`): best effort, never repaired, never held back.
    public var unreliableFraction = 0.0
    /// Activity sets (member, time, value as JSON text), as the `activity.set` op.
    public var activitySets: [(member: Int, at: Double, value: String)] = []
    /// When the uploader removes the attachment (`attach.remove`), if it does.
    public var attachmentRemovedAt: Double?
    /// Per member, a store limit in bytes (`--store-limit`) other than the default.
    public var storeLimits: [Int: Int] = [:]
    /// Members that start late (index, time): they join through a member that is up.
    public var lateJoins: [(member: Int, at: Double)] = []
    /// Two groups that cannot reach each other (datagrams dropped, links closed, dials refused).
    public var partition: (groupA: Set<Int>, from: Double, until: Double)?
    /// An attachment added by `uploader` at `at`, `size` bytes in 256 KiB chunks (bodies simulated by size).
    public var attachment: (uploader: Int, at: Double, size: Int)?
    /// A member that lies to its peers every `attackInterval` seconds while members send
    /// (`HostileMember`), besides running an honest core: nothing it says may mislead the others.
    public var hostile: Int?
    public var attackInterval = 0.5
    /// Epoch changes (issue 21): at `at`, member `by` removes member `remove` (nil: a rekey).
    public var epochChanges: [(by: Int, at: Double, remove: Int?)] = []
    /// Keep a `SimTrace` of deliveries, membership changes, link changes, chunks and faults.
    public var trace = false
    /// What stands in front of each member (`SimNAT`; a member not named is `public`). With any
    /// NATted member, members join only through public ones (the only ones a newcomer can dial).
    public var nat: [Int: SimNAT] = [:]
    /// When set, at this time the member relaying the most links (the lowest index of a tie)
    /// crashes: its relayed pairs must move to another relay or a direct path.
    public var relayCrashAt: Double?
    /// Crossing dials (issue 35, item 3: link admission's duplicates): at `at`, members `a` and `b`
    /// dial each other at once (`a`'s dial first), linked already or not. Each dial that completes
    /// makes a link of its own, so the pair holds two for a moment and the core's duplicate rule
    /// (`SessionCore.linkEstablished`, `LinkPlanner.keepsNewLink`) picks the one both ends keep.
    public var crossingDials: [(a: Int, b: Int, at: Double)] = []
    public init() {}

    /// `easy` and `hard` NATted members: the highest indices, `easy` of them easy and the last
    /// `hard` hard; the others (member 0 among them) public.
    public mutating func natMix(easy: Int, hard: Int) {
        let hard = max(0, min(hard, members - 1)), easy = max(0, min(easy, members - 1 - hard))
        nat = [:]
        for i in (members - hard - easy)..<(members - hard) { nat[i] = .easy }
        for i in (members - hard)..<members { nat[i] = .hard }
    }

    /// 100 members with 5 % datagram loss, 3 crashes and 10 members cut off for 10 s (long enough
    /// for each side to fail the other) while every member sends and a 20 MiB attachment spreads:
    /// the session simulator's test and its `huddle-bench` row run exactly this.
    public static var hundredMembersUnderFaults: SessionScenario {
        var s = SessionScenario()
        s.members = 100
        s.seed = 19
        s.loss = 0.05
        s.rate = 0.5
        // A reply to one delivery in 500: at 1 in 100, each message drew one reply among 99
        // receivers and replies bred replies (6,000 sends in 12 s).
        s.replyProbability = 0.002
        s.sendFor = 12
        // Failed members come back through re-merge push-pulls 10–20 s apart: 40 s after the cut
        // heals every view is whole again.
        s.settleFor = 40
        s.crashes = [(17, 4.0), (58, 7.5), (83, 11.0)]
        s.partition = (Set(90..<100), 4.0, 14.0)
        s.attachment = (0, 3.0, 20 * 1_048_576)
        return s
    }

    /// The chance that a member answers a message it delivers, for `replies` answers per message
    /// on average (nil: 0.5, and at most 1 in 100 deliveries). Each message draws `p × (members − 1)`
    /// replies and each reply draws as many: a fixed 1 in 100 made 100 members a branching process
    /// at its critical point (≈ 12,000 sends in a virtual second, a run that did not end).
    public static func replyProbability(replies: Double?, members: Int) -> Double {
        let others = Double(max(1, members - 1))
        guard let replies else { return min(0.01, 0.5 / others) }
        return replies / others
    }

    /// 100 members of whom 60 are NATted (30 behind `easy` NATs, 30 behind `hard` ones, all joining
    /// through the 40 public members): what issue 36 asks the simulator to run, as `huddle-sim
    /// session --nodes 100 --nat 30,30` runs it (2 sends per member per second for 5 s, each
    /// message drawing 0.5 replies on average, then 20 quiet seconds), and `huddle-bench`'s row.
    public static var hundredMembersSixtyNATted: SessionScenario {
        var s = SessionScenario()
        s.members = 100
        s.seed = 1
        s.rate = 2
        s.replyProbability = replyProbability(replies: nil, members: 100)
        s.sendFor = 5
        s.settleFor = 20
        s.natMix(easy: 30, hard: 30)
        return s
    }
}

/// The outcome: delivery logs for `DeliveryChecker`, the attachment at every member, and load.
public struct SessionReport: Sendable {
    public var logs: [DeliveryLog] = []
    public var sent = 0
    public var datagrams = 0
    /// Datagrams sent in the session-key form (to a member without a link yet), and datagrams that
    /// did not open at their receiver (its keys for the sender were gone, or not there yet).
    public var sessionKeyedDatagrams = 0
    public var droppedDatagrams = 0
    public var linkMessages = 0
    public var chunkTransfers = 0
    public var repairRequests = 0
    public var forged = 0
    /// What the honest survivors refused, by reason, and the lies the hostile member sent.
    public var refusals = RefusalCounts()
    public var lies = 0
    /// Links admitted in another member's name (a pinned member's id with another node key): must
    /// stay 0. And links from member ids nobody knows admitted at one member (at most
    /// `SessionCore.strangerLinkLimit` at once).
    public var impostorLinksAdmitted = 0
    public var strangerLinksAdmitted = 0
    /// Unreliable sends, and their deliveries at members other than the sender.
    public var unreliableSent = 0
    public var unreliableDelivered = 0
    /// Per survivor: the activity value it ends with (JSON text; nil: none).
    public var activity: [Int: String?] = [:]
    /// Per survivor: whether it ends with the attachment removed from its journal and its store.
    public var attachmentGone: [Int: Bool] = [:]
    /// Per survivor: the attachment's bytes it holds at the end, and whether fetching it stopped at its store limit.
    public var attachmentBytesHeld: [Int: Int] = [:]
    public var stoppedByStore: [Int: Bool] = [:]
    /// Chunks members that left pushed to others (`SessionScenario.leaves`), and how many of them
    /// another member held before the leaver's wait ended.
    public var handedOffPushed = 0
    public var handedOff = 0
    /// `left` events seen by survivors about members that left (each survivor should see each).
    public var leftSeen = 0
    /// `failed` or `left` events at honest members about honest members that never crashed (nor restarted), in a
    /// run without a partition: a lie believed (or a false positive).
    public var honestMembersEvicted = 0
    /// Members that stayed to the end (started, never crashed).
    public var survivors: [Int] = []
    /// Per survivor: when it held the whole attachment (nil: never), and whether every chunk it
    /// holds matches the manifest's hash.
    public var attachmentComplete: [Int: Double] = [:]
    public var attachmentIntact: [Int: Bool] = [:]
    /// Per survivor: the live members it sees at the end.
    public var liveViews: [Int: Int] = [:]
    /// Crash detection: per crashed member, when the last survivor saw it failed (nil: not all did).
    public var detection: [Int: Double?] = [:]
    /// `failed` events during the partition about members on the other side (each side fails the
    /// other once the cut lasts longer than the suspicion timeout), and `alive` events about them
    /// after it (the refutations that heal the view).
    public var failedAcrossPartition = 0
    public var aliveAfterPartition = 0
    /// Messages still held back / stored for repair, per survivor.
    public var held: [Int] = []
    public var stored: [Int] = []
    public var traceDigest: String?
    public var traceRecords: Int?
    public var virtualSeconds = 0.0
    /// Dependencies delivered late, checked as each delivery happens (`record`): the logs keep no
    /// dependencies, which at N = 100 would be gigabytes of member strings.
    public var dependencyViolations: [String] = []
    /// Per survivor (removed members excluded): the epoch it ends on, and its head.
    public var epochs: [Int: UInt64] = [:]
    public var epochHeads: [Int: [UInt8]] = [:]
    /// Members removed (they saw their own removal), and links to them still up at the end.
    public var removed: [Int] = []
    public var linksToRemoved = 0
    /// When each survivor moved to the epoch it ends on.
    public var movedAt: [Int: Double] = [:]
    /// Per kind pair of survivors (`SimNAT.pairName`, e.g. "easy-hard"), their links' paths at the
    /// end as the lower index sees them; and pairs whose two ends disagree on the path.
    public var paths: [String: PathCount] = [:]
    public var pathDisagreements = 0
    /// Punch attempts (dials) and successes, summed over the survivors' cores (`HolePunch`).
    public var punchAttempts = 0
    public var punchSuccesses = 0
    /// Links that came up over a relay, and punch dials that reached a peer's NAT and connected.
    public var relayedLinksMade = 0
    public var punchedLinks = 0
    /// Link admission's duplicate rule at work: ends that refused another direct link to a member
    /// they were linked to (`LinkDecision.duplicate`), and ends where the new link replaced the one
    /// up (`admitted(replaces: true)`). Both ends of a pair decide, so a crossing counts at each.
    public var duplicateLinksRefused = 0
    public var duplicateLinksReplaced = 0
    /// Links aborted by the link budget (`ShellNote.linkAborted`: a stalled backlog, an overflow).
    public var linksAborted = 0
    /// Direct links made while the pair had one on the wire already (crossing dials).
    public var secondLinks = 0
    /// Times a pair's ends, once every handshake between them had ended, held different direct
    /// links (or one held one and the other none): the duplicate rule must pick the same at both.
    public var linkEndsDisagreed = 0
    /// At the end: pairs of survivors whose ends hold different links, pairs with more than one
    /// direct link still on the wire, and survivors whose core's linked members (`LinkPlanner.linked`) are not
    /// the members its link table holds.
    public var linkEndsDifferAtEnd = 0
    public var pairsWithTwoLinksAtEnd = 0
    public var linkTableMismatches = 0
    /// The pairs `SessionScenario.crossingDials` made dial each other (both surviving), and how
    /// many of them end on one link that both ends hold.
    public var crossedPairs = 0
    public var crossedPairsLinkedOnce = 0
    /// Directed messages between survivors that their recipient never delivered.
    public var directedUndelivered: [String] = []
    /// The relay that crashed (`SessionScenario.relayCrashAt`), the pairs relayed through it then,
    /// and how many of those (both ends surviving) end linked again, relayed or direct.
    public var relayCrashed: Int?
    public var pairsOnCrashedRelay: [Pair] = []
    public var pairsRelinked = 0
    public var violations: [String] { dependencyViolations + DeliveryChecker.violations(logs) }

    /// Links of a kind pair, by path.
    public struct PathCount: Sendable, Equatable, CustomStringConvertible {
        public var direct = 0, relayed = 0, none = 0
        public var description: String { "direct \(direct), relayed \(relayed), none \(none)" }
    }

    /// Two members (indices), the lower first.
    public struct Pair: Sendable, Equatable, CustomStringConvertible {
        public let low: Int, high: Int
        public var description: String { "\(low)-\(high)" }
    }
}

/// Runs N real `SessionCore`s — the value the node runs — on a simulated network with virtual
/// time. Their effects are executed by the node's own shared shell (`SessionShell`): this type is
/// only the world — virtual time, the network's loss and delay, crashes — and each member's ports
/// (`MemberShell`) put datagrams, link messages and chunks on it.
///
/// Guarantees: the same scenario gives the same run (one seeded generator; identities and core
/// seeds drawn from it; events at equal times in scheduling order; nothing iterates a `Set` or
/// `Dictionary` unsorted), which `trace` shows as one digest. Chunk bodies are not allocated: a
/// chunk crosses a link as its hash and length, taking length ÷ bandwidth.
public final class SessionSimulation {
    private enum Event {
        case start(Int)
        case tick(Int)
        case datagram(to: Int, from: Int, [UInt8])
        case linkOpen(dialer: Int, peer: Int)
        case linkAccepted(dialer: Int, peer: Int, generation: UInt64, LinkCandidate)
        case crossingDial(Int)
        case link(to: Int, from: Int, generation: UInt64, LinkMessage)
        case chunk(to: Int, from: Int, generation: UInt64, id: String, index: Int, hash: [UInt8])
        case send(Int)
        case crash(Int)
        case restart(Int)
        case partitionStarts, partitionEnds
        case attach
        case attack(round: Int)
        case epochChange(Int)
        case closeAfterQueued(Int, Int, generation: UInt64)
        case leave(Int), leaveWaits(Int), leaveEnds(Int)
        case setActivity(Int), removeAttachment
        case punchArrives(from: Int, to: Int)
        case circuitHandshake(initiator: Int, peer: Int, via: Int)
        case relayCrash
    }

    /// A link on the simulated wire, and the ends that took it up (`SessionShell.linkEstablished`).
    private struct Link {
        let generation: UInt64
        var ends: Set<Int> = []
        /// The relay, for a link over a circuit.
        var via: Int?
        /// Ends that closed it (`SessionShell.closeLink`): what they send on it now is refused, as
        /// a closed outbox refuses it; it goes once what was queued has arrived (`closeAfterQueued`).
        var closing: Set<Int> = []
        /// The responder of a direct link's handshake while its end has not decided yet (`linkAccepted`).
        var awaiting: Int?
    }

    private static let chunkSize = 256 * 1024
    private static let linkMessageBytes = 200

    private let scenario: SessionScenario
    private var queue = SimEventQueue<Event>()
    private var rng: SWIMRandom
    private var cores: [CoreSlot?]
    private let infos: [MemberInfo]
    private let identities: [Identity]
    private let indexByAddr: [String: Int]
    private let indexByID: [MemberID: Int]
    /// Members by the host of an address: their own, and their router's.
    private let indexByHost: [Substring: Int]
    private var crashed: [Bool]
    /// Per member, the shared shell's state (`ShellState`): its dials, flush, links' up times, last
    /// tick and the time its timer is armed for.
    private var shellStates: [ShellState]
    /// Per member, replies its application makes once the current effects are done.
    private var replies: [Int]
    /// The session key (drawn from the seeded generator), and per member the session-key datagram
    /// seal of the epoch it is on and of the earlier epochs it still opens.
    private let sessionKey: SessionKey
    private var seals: [DatagramSeal]
    private var olderSeals: [[DatagramSeal]]
    /// Members whose own removal reached them.
    private var removed: Set<Int> = []
    private var links: [Int: Link] = [:] { didSet { linkTablesChanged() } }  // key: lower index * members + higher index
    /// Direct links of a pair (same key) made while its first was on the wire (crossing dials; the
    /// first may be closing, replaced), oldest first: the duplicate rule closes all but one; when
    /// the first closes, the oldest of these takes its place.
    private var crossing: [Int: [Link]] = [:] { didSet { linkTablesChanged() } }
    /// Links over a circuit through a relay (same key): a pair may hold one of each for a moment,
    /// until the direct one replaces it (`LinkPlanner.keepsNewLink`).
    private var relayed: [Int: Link] = [:] { didSet { linkTablesChanged() } }
    /// Each member's linked peers (`linkedPeers(of:)`) as of the last change to the link tables:
    /// asked at every send to all links and every budget check, and O(members) to work out, but
    /// links change rarely (at N = 100 under faults the cache took a run from 69.8 to 66.0 s,
    /// with the same trace digest).
    private var linkedPeersCache: [[Int]?] = []
    /// The NAT in front of each member (`SimNAT`), and what each NAT lets in: member a has sent to
    /// member b (key a * members + b), and a's punch dials towards b (the same key).
    private let nat: SimNATMap
    private var sentTo: Set<Int> = []
    private var punchDials: [Int: (at: Double, addrs: [String], initiator: Bool)] = [:]
    /// Each member's ends of circuits (key member * members + peer): the relay and the shared
    /// shell's serial for the end; and the bytes from the relay not yet a whole link message, with
    /// the relayed link's generation.
    private var circuitEnds: [Int: (via: Int, serial: UInt64)] = [:]
    private var circuitInbox: [Int: (generation: UInt64, bytes: [UInt8])] = [:]
    /// What a member that is to restart kept when it crashed (`SessionScenario.restarts`).
    private var kept: [Int: (point: ResumePoint, own: [SignedMessage])] = [:]
    private var lastArrival: [Int: Double] = [:]    // key: from * members + to
    /// Since when each queue (same key) has stayed at the link budget's backlog (`backlogWaited`).
    private var backloggedSince: [Int: Double] = [:]
    private var generation: UInt64 = 0
    private var held: [[String: [Int: [UInt8]]]]    // per member, attachment → chunk → hash held
    private var manifest: Manifest?
    private var logs: [DeliveryLog]
    /// Per member, the highest application seq it delivered of each origin (for `record`'s check).
    private var clocks: [[MemberID: UInt64]]
    private var report = SessionReport()
    private var now = 0.0
    private var sendingFrom = 0.0
    private var trace: SimTrace?
    private var needsFlush: Set<Int> = []
    /// Members leaving (their hand-off and its wait run in the shared shell, `SessionShell+Leave`).
    private var leaving: Set<Int> = []
    /// Members that left for good (`SessionScenario.leaves`).
    private var leftMembers: Set<Int> = []
    private var hostile: HostileMember?
    /// Links from member ids nobody knows that the hostile member holds open (`admissionLies`).
    private var strangersOpen: [(member: Int, stranger: MemberID)] = []
    /// Directed sends (message id, sender, recipient), checked at the end against the recipient's log.
    private var directedSent: [(id: String, from: Int, to: Int)] = []
    /// The pairs `SessionScenario.crossingDials` made dial each other (link keys).
    private var crossed: Set<Int> = []

    public static func run(_ scenario: SessionScenario) -> SessionReport {
        let sim = SessionSimulation(scenario)
        return sim.execute()
    }

    /// Where a run is, once per virtual second (`run(_:progress:)`): the whole session's load in
    /// the second that ended, and what its survivors hold.
    public struct Progress: Sendable {
        /// Virtual seconds since the start.
        public var seconds: Double
        /// Reliable sends so far, and in the second that ended.
        public var sent: Int, sentInSecond: Int
        /// Link messages and datagrams sent in the second that ended (all members together).
        public var linkMessages: Int, datagrams: Int
        /// Messages held back and stored for repair, summed over the members up.
        public var held: Int, stored: Int
        public var repairRequests: Int
    }

    /// `run(_:)`, telling `progress` where the run is once per virtual second: a long run shows it
    /// is moving, and a load that grows shows itself (`huddle-sim session --progress`).
    public static func run(_ scenario: SessionScenario, progress: @escaping (Progress) -> Void) -> SessionReport {
        let sim = SessionSimulation(scenario)
        sim.progress = progress
        return sim.execute()
    }

    private var progress: ((Progress) -> Void)?
    private var progressMark = (seconds: 0.0, sent: 0, linkMessages: 0, datagrams: 0)

    /// Tells `progress` about each virtual second that ended before `now`.
    private func reportProgress() {
        guard let progress, now >= progressMark.seconds + 1 else { return }
        let up = (0..<scenario.members).filter(isUp)
        var held = 0, stored = 0
        for i in up {
            held += cores[i]!.core.broadcast.heldCount
            stored += cores[i]!.core.broadcast.storedCount
        }
        let second = (now - progressMark.seconds).rounded(.down) + progressMark.seconds
        progress(Progress(seconds: second, sent: report.sent, sentInSecond: report.sent - progressMark.sent,
                          linkMessages: report.linkMessages - progressMark.linkMessages, datagrams: report.datagrams - progressMark.datagrams,
                          held: held, stored: stored, repairRequests: report.repairRequests))
        progressMark = (second, report.sent, report.linkMessages, report.datagrams)
    }

    private init(_ s: SessionScenario) {
        scenario = s
        rng = SWIMRandom(seed: s.seed)
        trace = s.trace ? SimTrace() : nil
        var identities: [Identity] = []
        var infos: [MemberInfo] = []
        for i in 0..<s.members {
            var seed: [UInt8] = []
            for _ in 0..<4 { withUnsafeBytes(of: rng.next().littleEndian) { seed += $0 } }
            let identity = Identity(seed: seed)
            identities.append(identity)
            infos.append(MemberInfo(id: MemberID(raw: UInt64(i + 1)), node: identity.publicKey, name: "m\(i)", addr: SimAddress.of(i, port: 7400)))
        }
        self.identities = identities
        self.infos = infos
        indexByAddr = Dictionary(uniqueKeysWithValues: infos.enumerated().map { ($1.addr, $0) })
        indexByID = Dictionary(uniqueKeysWithValues: infos.enumerated().map { ($1.id, $0) })
        nat = SimNATMap(kinds: (0..<s.members).map { s.nat[$0] ?? .public })
        var hosts: [Substring: Int] = [:]
        for i in 0..<s.members {
            hosts[SimNATMap.hostPart(infos[i].addr)] = i
            if nat.kind(i) != .public { hosts[Substring(SimNATMap.routerHost(i))] = i }
        }
        indexByHost = hosts
        cores = Array(repeating: nil, count: s.members)
        crashed = Array(repeating: false, count: s.members)
        shellStates = Array(repeating: ShellState(linkBudget: s.linkBudget), count: s.members)
        replies = Array(repeating: 0, count: s.members)
        linkedPeersCache = Array(repeating: nil, count: s.members)
        var keyBytes: [UInt8] = []
        for _ in 0..<4 { withUnsafeBytes(of: rng.next().littleEndian) { keyBytes += $0 } }
        sessionKey = (try? SessionKey(bytes: keyBytes)) ?? SessionKey.generate()
        seals = Array(repeating: DatagramSeal(key: sessionKey.subkey(.datagram)), count: s.members)
        olderSeals = Array(repeating: [], count: s.members)
        held = Array(repeating: [:], count: s.members)
        logs = infos.map { DeliveryLog(member: $0.id.description, baseline: [:], deliveries: [], stayed: true) }
        clocks = Array(repeating: [:], count: s.members)
    }

    private func execute() -> SessionReport {
        let late = Dictionary(scenario.lateJoins.map { ($0.member, $0.at) }, uniquingKeysWith: min)
        queue.schedule(.start(0), at: 0)
        for i in 1..<scenario.members {
            queue.schedule(.start(i), at: late[i] ?? rng.uniform(0.01, max(0.02, scenario.startWindow)))
        }
        sendingFrom = scenario.startWindow + 1
        for i in 0..<scenario.members { queue.schedule(.send(i), at: sendingFrom + rng.uniform(0, 1 / scenario.rate)) }
        for c in scenario.crashes where c.member < scenario.members { queue.schedule(.crash(c.member), at: c.at) }
        for l in scenario.leaves where l.member < scenario.members { queue.schedule(.leave(l.member), at: l.at) }
        for (k, set) in scenario.activitySets.enumerated() where set.member < scenario.members { queue.schedule(.setActivity(k), at: set.at) }
        if let at = scenario.attachmentRemovedAt { queue.schedule(.removeAttachment, at: at) }
        for r in scenario.restarts where r.member > 0 && r.member < scenario.members {
            queue.schedule(.crash(r.member), at: r.crashAt)
            queue.schedule(.restart(r.member), at: r.restartAt)
        }
        if let p = scenario.partition {
            queue.schedule(.partitionStarts, at: p.from)
            queue.schedule(.partitionEnds, at: p.until)
        }
        if let a = scenario.attachment { queue.schedule(.attach, at: a.at) }
        if let at = scenario.relayCrashAt { queue.schedule(.relayCrash, at: at) }
        for (k, c) in scenario.crossingDials.enumerated() where max(c.a, c.b) < scenario.members && c.a != c.b { queue.schedule(.crossingDial(k), at: c.at) }
        for (k, change) in scenario.epochChanges.enumerated() { queue.schedule(.epochChange(k), at: change.at) }
        if let h = scenario.hostile, h < scenario.members {
            hostile = HostileMember(info: infos[h], identity: identities[h])
            queue.schedule(.attack(round: 0), at: sendingFrom)
        }
        let end = sendingFrom + scenario.sendFor + scenario.settleFor
        while let time = queue.nextTime, time <= end, let (_, event) = queue.pop() {
            now = time
            reportProgress()
            handle(event)
            // Taken before flushing: a flush that asks for another is flushed after the next event.
            let flushing = needsFlush.sorted()
            needsFlush = []
            for i in flushing where isUp(i) { shell(i).flushNow() }
        }
        return finish(end)
    }

    // MARK: events

    private func handle(_ event: Event) {
        switch event {
        case let .start(i):
            guard cores[i] == nil, !crashed[i] else { return }
            start(i, resuming: nil)
        case let .restart(i):
            guard crashed[i], let kept = kept.removeValue(forKey: i) else { return }
            crashed[i] = false
            start(i, resuming: kept)
        case let .tick(i):
            // Only the tick the timer is armed for: an earlier arming left this one stale.
            guard isUp(i), shellStates[i].armedWake == now else { return }
            shell(i).tick()
        case let .datagram(to, from, bytes):
            guard isUp(to), reachable(to, from) else { return }
            // Opened as the node's receive thread opens it: with the keys the receiver holds now.
            guard let opened = try? DatagramOpener(local: infos[to].id, session: seals[to], keys: cores[to]!.core.datagramKeys, older: olderSeals[to]).open(bytes) else {
                report.droppedDatagrams += 1
                return
            }
            execute(to, cores[to]!.core.receiveDatagram(opened, from: nat.mapped(from, toward: to), now: now))
        case let .linkOpen(dialer, peer):
            // The dial ends here (`SessionShell.dialFinished`). As the node's, it names the peer
            // whenever the handshake finished, even if the new link was refused or lost the duplicate
            // rule: a push-pull it carried then goes over the link that is up, if one is.
            var handshook = false
            defer { if isUp(dialer) { shell(dialer).dialFinished(infos[peer].addr, peer: handshook ? infos[peer].id : nil) } }
            // A NATted member is dialed only by a hole punch (`punchArrives`).
            guard isUp(dialer), isUp(peer), reachable(dialer, peer), nat.kind(peer) == .public else { return }
            handshook = handshakeKey(dialer: dialer, peer: peer) != nil
            // As the node: a dial to a member linked already completes its handshake too (a crossing
            // dial); the wire holds the new link beside the first, and the duplicate rule picks one.
            _ = establish(dialer: dialer, peer: peer, via: nil, punched: false)
        case let .linkAccepted(dialer, peer, gen, candidate):
            // The responder's end of a direct link's handshake (`establish`): it decides now.
            let wire = linkKey(dialer, peer)
            guard directLink(wire, gen)?.awaiting == peer else { return }
            updateDirect(wire, gen) { $0.awaiting = nil }
            if isUp(peer) {
                _ = takeUp(peer, candidate, generation: gen, other: dialer, via: nil)
            } else {
                closeLink(dialer, peer, generation: gen)
            }
            checkLinkEnds(dialer, peer)
        case let .crossingDial(k):
            let c = scenario.crossingDials[k]
            guard isUp(c.a), isUp(c.b) else { return }
            crossed.insert(linkKey(c.a, c.b))
            shell(c.a).dial(infos[c.b].addr, pushPull: nil)
            shell(c.b).dial(infos[c.a].addr, pushPull: nil)
        case let .link(to, from, gen, message):
            guard isUp(to), isCurrent(gen, at: to, from: from) else { return }
            shell(to).receiveLink(message, from: infos[from].id, addr: infos[from].addr)
        case let .chunk(to, from, gen, id, index, hash):
            guard isUp(to), isCurrent(gen, at: to, from: from) else { return }
            chunkArrived(to, from: from, id: id, index: index, hash: hash)
        case let .send(i):
            guard now < sendingFrom + scenario.sendFor else { return }
            queue.schedule(.send(i), at: now + rng.uniform(0.5, 1.5) / scenario.rate)
            guard isUp(i), !(cores[i]!.core.broadcast.awaitingBaseline) else { return }
            let peers = cores[i]!.core.live.subtracting([infos[i].id]).sorted()
            let directed = !peers.isEmpty && rng.unit() < scenario.directedFraction
            if scenario.unreliableFraction > 0, rng.unit() < scenario.unreliableFraction {
                let body = Array("u\(i)@\(now)".utf8)
                guard let (_, effects) = try? cores[i]!.core.send(body: body, to: nil, reliable: false) else { return }
                report.unreliableSent += 1
                execute(i, effects)
                return
            }
            send(i, to: directed ? [peers[rng.index(peers.count)]] : nil)
        case let .crash(i):
            guard !crashed[i] else { return }
            trace?.record(.crash, at: now, UInt64(i))
            if scenario.restarts.contains(where: { $0.member == i }), var core = cores[i]?.core {
                // What the node commits before anything leaves: its batch signed, its point, its own broadcasts.
                _ = core.flushBatch()
                kept[i] = (core.resumePoint, core.broadcast.ownStored(from: 0))
            }
            crashed[i] = true
            forgetCircuitEnds(of: i)
            for j in linkedPeers(of: i) { closeLink(i, j); closeRelayed(i, j) }
        case .partitionStarts:
            guard let p = scenario.partition else { return }
            trace?.record(.pause, at: now, UInt64(p.groupA.count))
            for key in links.keys.sorted() {
                let (a, b) = (key / scenario.members, key % scenario.members)
                if p.groupA.contains(a) != p.groupA.contains(b) { closeLink(a, b) }
            }
        case .partitionEnds:
            trace?.record(.resume, at: now, 0)
        case .attach:
            guard let a = scenario.attachment, isUp(a.uploader) else { return }
            let count = max(1, (a.size + Self.chunkSize - 1) / Self.chunkSize)
            let hashes = (0..<count).map { k in BLAKE2b.hash(Array("sim chunk".utf8) + withUnsafeBytes(of: (scenario.seed &+ UInt64(k)).littleEndian) { Array($0) }, length: 32) }
            var m = Manifest(name: "sim.bin", size: UInt64(a.size), chunkSize: UInt32(Self.chunkSize), chunkHashes: hashes, meta: [],
                             uploader: infos[a.uploader].id, uploaderNodeKey: infos[a.uploader].node, signature: [])
            var key: [UInt8] = []
            for _ in 0..<4 { withUnsafeBytes(of: rng.next()) { key += $0 } }
            m.sign(with: identities[a.uploader], key: key)
            manifest = m
            held[a.uploader][m.id] = Dictionary(uniqueKeysWithValues: hashes.enumerated().map { ($0, $1) })
            execute(a.uploader, cores[a.uploader]!.core.addAttachment(m, key: key, now: now))
        case let .setActivity(k):
            let set = scenario.activitySets[k]
            guard isUp(set.member) else { return }
            execute(set.member, cores[set.member]!.core.setActivity(Array(set.value.utf8), now: now))
        case .removeAttachment:
            guard let a = scenario.attachment, let m = manifest, isUp(a.uploader) else { return }
            if let effects = try? cores[a.uploader]!.core.removeAttachment(m.id, now: now) { execute(a.uploader, effects) }
        case let .leave(i):
            guard isUp(i), !leaving.contains(i) else { return }
            trace?.record(.leave, at: now, UInt64(i))
            leaving.insert(i)
            let leaver = shell(i)
            leaver.beginLeave(.request(handOffWait: nil))
            while let (peer, id, index) = leaver.nextHandOff() {
                // As the node: each chunk read from the store and pushed over the peer's link.
                guard let j = indexByID[peer], let hash = held[i][id]?[index], let gen = links[linkKey(i, j)]?.generation else {
                    leaver.handOffFailed(id: id, index: index)
                    continue
                }
                let length = manifest.map { $0.plainLength(of: index) + AEAD.tagLength } ?? Self.chunkSize
                report.chunkTransfers += 1
                report.handedOffPushed += 1
                queue.schedule(.chunk(to: j, from: i, generation: gen, id: id, index: index, hash: hash), at: arrival(from: i, to: j, bytes: length))
            }
            queue.schedule(.leaveWaits(i), at: now)
        case let .leaveWaits(i):
            guard isUp(i), leaving.contains(i) else { return }
            switch shell(i).handOffProgress() {
            case let .waiting(until):
                // The node waits for the receivers' `have`s; the simulator looks again shortly.
                queue.schedule(.leaveWaits(i), at: min(until, now + 0.05))
            case let .done(handedOff):
                report.handedOff += handedOff
                queue.schedule(.leaveEnds(i), at: shell(i).sayLeft())
            }
        case let .leaveEnds(i):
            guard isUp(i) else { return }
            // The node closes its links and exits: for the others, as gone as a crash, but it said it was leaving.
            crashed[i] = true
            leftMembers.insert(i)
            forgetCircuitEnds(of: i)
            for j in linkedPeers(of: i) { closeLink(i, j); closeRelayed(i, j) }
        case let .closeAfterQueued(a, b, gen):
            closeLink(a, b, generation: gen)
            if relayed[linkKey(a, b)]?.generation == gen { closeRelayed(a, b) }
        case let .punchArrives(from, to): punchArrives(from: from, to: to)
        case let .circuitHandshake(initiator, peer, via): circuitHandshake(initiator: initiator, peer: peer, via: via)
        case .relayCrash:
            // The member relaying the most links now (the lowest index of a tie).
            var count: [Int: Int] = [:]
            for key in relayed.keys.sorted() { if let v = relayed[key]?.via { count[v, default: 0] += 1 } }
            guard let busiest = count.sorted(by: { ($0.value, -$0.key) > ($1.value, -$1.key) }).first?.key else { return }
            report.relayCrashed = busiest
            report.pairsOnCrashedRelay = relayed.keys.sorted().filter { relayed[$0]?.via == busiest }
                .map { SessionReport.Pair(low: $0 / scenario.members, high: $0 % scenario.members) }
            handle(.crash(busiest))
        case let .epochChange(k):
            let change = scenario.epochChanges[k]
            guard isUp(change.by) else { return }
            do {
                let made = try change.remove.map { try cores[change.by]!.core.remove(nodes: [infos[$0].node], now: now) } ?? cores[change.by]!.core.rekey(now: now)
                trace?.record(.epoch, at: now, UInt64(change.by), made.0.epoch)
                execute(change.by, made.1)
            } catch {
                // Not this member's to make now (it holds no current key yet): nothing happens.
            }
        case let .attack(round):
            guard let h = scenario.hostile, now < sendingFrom + scenario.sendFor else { return }
            queue.schedule(.attack(round: round + 1), at: now + scenario.attackInterval)
            guard isUp(h), var liar = hostile else { return }
            let peers = linkedPeers(of: h)
            for (k, j) in peers.enumerated() where peers.count >= 3 {
                let others = peers.filter { $0 != j }
                let victim = others[(round + k) % others.count], witness = others[(round + k + 1) % others.count]
                // The victim as it is now (its incarnation grows with each refutation).
                let current = cores[victim]?.core.swim.local ?? infos[victim]
                for lie in liar.lies(round: round, to: infos[j], about: current, witness: infos[witness]) {
                    report.lies += 1
                    sendLink(from: h, to: j, lie)
                }
            }
            admissionLies(round: round, by: h, peers: peers)
            if round == 0, let victim = peers.first {
                // Announced in its own signed broadcast: a manifest in another uploader's name.
                let (theirs, key) = liar.foreignManifest(round: round, uploader: infos[victim])
                report.lies += 1
                execute(h, cores[h]!.core.addAttachment(theirs, key: key, now: now))
            }
            hostile = liar
        }
    }

    /// Link admission's lies (issue 35, item 3), as the node's handshake would hand them to one peer
    /// `j` of the hostile member `h` per round: a link in the name of another member `j` knows (its
    /// id, `h`'s own node key — a takeover of a pinned member), one with that member's own record
    /// over a handshake that proved `h`'s node key, and in round 1 more links from
    /// member ids nobody knows than `SessionCore.strangerLinkLimit` lets in at once (closed again
    /// the round after, as strangers that never join). Each goes through the shared shell's
    /// `linkEstablished`, as a real one would; one admitted in another member's name is counted.
    private func admissionLies(round: Int, by h: Int, peers: [Int]) {
        guard peers.count >= 2, let liar = hostile else { return }
        for (member, stranger) in strangersOpen where isUp(member) { shell(member).linkClosed(stranger) }
        strangersOpen = []
        let j = peers[round % peers.count], victim = peers[(round + 1) % peers.count]
        guard isUp(j) else { return }
        let key = cores[j]!.core.handshakeKeys(now: now).first?.head ?? []
        let takeover = MemberInfo(id: infos[victim].id, node: liar.identity.publicKey, name: infos[victim].name, addr: infos[h].addr,
                                  incarnation: 0).signed(by: liar.identity)
        report.lies += 1
        _ = shell(j).linkEstablished(LinkCandidate(peer: takeover, nodeKey: liar.identity.publicKey, keyHead: key, datagramKeys: linkDatagramKeys(), dialer: infos[h].id),
                                     install: { report.impostorLinksAdmitted += 1 })
        // The victim's own record, as gossip carries it, over a handshake that proved `h`'s node key.
        report.lies += 1
        _ = shell(j).linkEstablished(LinkCandidate(peer: infos[victim], nodeKey: liar.identity.publicKey, keyHead: key, datagramKeys: linkDatagramKeys(), dialer: infos[h].id),
                                     install: { report.impostorLinksAdmitted += 1 })
        guard round == 1 else { return }
        for k in 0..<(SessionCore.strangerLinkLimit + 8) {
            let id = MemberID(raw: 0x5EED_0000 + UInt64(k))
            let nobody = MemberInfo(id: id, node: liar.identity.publicKey, name: "stranger", addr: infos[h].addr, incarnation: 0).signed(by: liar.identity)
            report.lies += 1
            var admitted = false
            _ = shell(j).linkEstablished(LinkCandidate(peer: nobody, nodeKey: liar.identity.publicKey, keyHead: key, datagramKeys: linkDatagramKeys(), dialer: id), install: { admitted = true })
            if admitted { strangersOpen.append((j, id)); report.strangerLinksAdmitted += 1 }
        }
    }

    /// Starts member `i` (a new member; or, `resuming`, the same member again from what it kept,
    /// at a higher incarnation), and has it join through a live member.
    private func start(_ i: Int, resuming: (point: ResumePoint, own: [SignedMessage])?) {
        var info = infos[i]
        if let resuming { info.incarnation = resuming.point.incarnation + 1 }
        var limits = SessionCore.Limits()
        if let bytes = scenario.storeLimits[i] { limits.storeBytes = bytes }
        var core = SessionCore(local: info, identity: identities[i], limits: limits, joining: i != 0 && resuming == nil, swimSeed: rng.next(), journalSeed: rng.next(),
                               sessionKey: sessionKey, epochRandom: SWIMRandom(seed: rng.next()))
        if let resuming { core.resume(from: resuming.point, ownMessages: resuming.own) }
        trace?.record(.start, at: now, UInt64(i))
        shellStates[i] = ShellState(linkBudget: scenario.linkBudget)
        cores[i] = CoreSlot(core)
        if i != 0 {
            let sponsors = (0..<scenario.members).filter { $0 != i && isUp($0) && reachable(i, $0) && nat.kind($0) == .public }
            if !sponsors.isEmpty {
                let sponsor = sponsors[rng.index(sponsors.count)]
                trace?.record(.join, at: now, UInt64(i), UInt64(sponsor))
                // As `huddle run --join`: a link to the sponsor, then a join push-pull over it.
                shell(i).dial(infos[sponsor].addr, pushPull: true)
            }
        }
        shell(i).tick()
    }

    /// A reliable send (a broadcast, or directed to `to`), as the control op `send` does it.

    private func send(_ i: Int, to: [MemberID]?) {
        let body = Array("m\(i)@\(now)".utf8)
        do {
            let (message, effects) = try cores[i]!.core.send(body: body, to: to, reliable: true)
            report.sent += 1
            for peer in to ?? [] { if let j = indexByID[peer] { directedSent.append((message.id, i, j)) } }
            execute(i, effects)
        } catch {
            // busy or a recipient that just failed: the application would try later
        }
    }

    // MARK: effects, through the shared shell

    /// Member `i`'s ports.
    private func shell(_ i: Int) -> MemberShell { MemberShell(sim: self, i: i) }

    /// Member `i`'s effects, carried out by the shared shell (`SessionShell.perform`); then the
    /// replies its application makes, and its next tick.
    private func execute(_ i: Int, _ effects: [SessionEffect]) {
        shell(i).perform(effects)
        // An application answers after it has seen what was delivered, never in the middle of it.
        let count = replies[i]
        replies[i] = 0
        for _ in 0..<count { send(i, to: nil) }
        // As the node after every input: its timer armed for when it next has work.
        if isUp(i) { shell(i).rearm() }
    }

    /// A `member` event at member `i`: traced, and checked against what the scenario did.
    private func memberChanged(_ i: Int, _ change: MemberChange, _ info: MemberInfo) {
        trace?.record(.memberChange, at: now, UInt64(i), info.id.raw, UInt64(change.hashValueForTrace))
        if change == .left, let j = indexByID[info.id], scenario.leaves.contains(where: { $0.member == j }) { report.leftSeen += 1 }
        if change == .failed || (change == .left && !scenario.leaves.contains(where: { $0.member == indexByID[info.id] })),
           scenario.partition == nil, i != scenario.hostile,
           let j = indexByID[info.id], j != scenario.hostile, !crashed[j],
           // A restarted member may be seen failed after it is back: the others detect the
           // crash after the restart (then see it alive at its new incarnation).
           !scenario.restarts.contains(where: { $0.member == j }) {
            report.honestMembersEvicted += 1
        }
        if let p = scenario.partition, let j = indexByID[info.id], p.groupA.contains(i) != p.groupA.contains(j) {
            if change == .failed, now >= p.from, now < p.until { report.failedAcrossPartition += 1 }
            if change == .alive, now >= p.until { report.aliveAfterPartition += 1 }
        }
        // Detected once no survivor holds it live (one partitioned away may have failed it
        // before it crashed; one that joined after may never have known it).
        if change == .failed, let j = indexByID[info.id], crashed[j], report.detection[j] == nil,
           survivorsNow().allSatisfy({ !(cores[$0]?.core.isLive(info.id) ?? false) }) {
            report.detection[j] = now
        }
    }

    /// A chunk body arrived, with its hash: the core decides (`chunkArrived`); an admitted one is
    /// written at once (the store's write), and the core told (`chunkWritten`).
    private func chunkArrived(_ i: Int, from j: Int, id: String, index: Int, hash: [UInt8]) {
        trace?.record(.chunk, at: now, UInt64(i), UInt64(j), UInt64(index))
        let (arrival, effects) = shell(i).withCore { $0.chunkArrived(id: id, index: index, hash: hash, from: infos[j].id, now: now) }
        execute(i, effects)
        guard case .write = arrival else { return }
        let (stored, written) = shell(i).withCore { $0.chunkWritten(id: id, index: index, from: infos[j].id, failed: false, now: now) }
        if stored { held[i][id, default: [:]][index] = hash }
        execute(i, written)
    }

    // MARK: network

    private func linkKey(_ a: Int, _ b: Int) -> Int { min(a, b) * scenario.members + max(a, b) }

    private func isUp(_ i: Int) -> Bool { cores[i] != nil && !crashed[i] }

    private func reachable(_ a: Int, _ b: Int) -> Bool {
        guard let p = scenario.partition, now >= p.from, now < p.until else { return true }
        return p.groupA.contains(a) == p.groupA.contains(b)
    }

    /// The members linked to `i` at its end, directly or over a relay (the node's link table).
    private func linkedPeers(of i: Int) -> [Int] {
        if let cached = linkedPeersCache[i] { return cached }
        let peers = (0..<scenario.members).filter { link(at: i, to: $0) != nil }
        linkedPeersCache[i] = peers
        return peers
    }

    private func linkTablesChanged() {
        for i in linkedPeersCache.indices { linkedPeersCache[i] = nil }
    }

    /// The link between `a` and `b` if `a`'s end took it up: the direct one, else one over a relay.
    private func link(at a: Int, to b: Int) -> Link? {
        guard a != b else { return nil }
        if let link = direct(at: a, to: b) { return link }
        if let link = relayed[linkKey(a, b)], link.ends.contains(a) { return link }
        return nil
    }

    /// The direct link between `a` and `b` that `a`'s table holds (of the pair's links on the wire).
    private func direct(at a: Int, to b: Int) -> Link? {
        let key = linkKey(a, b)
        if let link = links[key], link.ends.contains(a) { return link }
        return crossing[key]?.first { $0.ends.contains(a) }
    }

    /// The pair's direct link `generation` on the wire, if it is still there.
    private func directLink(_ key: Int, _ generation: UInt64) -> Link? {
        if let link = links[key], link.generation == generation { return link }
        return crossing[key]?.first { $0.generation == generation }
    }

    /// Changes the pair's link `generation` on the wire (direct, or over a relay).
    private func updateLink(_ key: Int, _ generation: UInt64, _ change: (inout Link) -> Void) {
        if links[key]?.generation == generation { change(&links[key]!) }
        else if let n = crossing[key]?.firstIndex(where: { $0.generation == generation }) { change(&crossing[key]![n]) }
        else if relayed[key]?.generation == generation { change(&relayed[key]!) }
    }

    private func updateDirect(_ key: Int, _ generation: UInt64, _ change: (inout Link) -> Void) {
        guard directLink(key, generation) != nil else { return }
        updateLink(key, generation, change)
    }

    /// Whether link `generation` is the link between `to` and `from` at `to`'s end: what a link
    /// carries once that end's table no longer holds it (replaced by another) is dropped, as the
    /// node drops reads of a link that is not the one in its table.
    private func isCurrent(_ generation: UInt64, at to: Int, from: Int) -> Bool {
        if let link = directLink(linkKey(to, from), generation) { return link.ends.contains(to) }
        return relayed[linkKey(to, from)]?.generation == generation && direct(at: to, to: from) == nil
    }

    /// Once no handshake between `a` and `b` is under way, their ends must hold the same direct
    /// link, or none: the duplicate rule decides alike at both (`SessionReport.linkEndsDisagreed`).
    private func checkLinkEnds(_ a: Int, _ b: Int) {
        let key = linkKey(a, b)
        guard isUp(a), isUp(b), links[key]?.awaiting == nil, !(crossing[key] ?? []).contains(where: { $0.awaiting != nil }) else { return }
        if direct(at: a, to: b)?.generation != direct(at: b, to: a)?.generation { report.linkEndsDisagreed += 1 }
    }

    /// Whether a datagram from `i` to `addr` gets to member `j`: a public member at its address; a
    /// NATted one only at its NAT's mapping towards `i`, once it has sent to `i` (never at its own
    /// address, which is not routed from another network).
    private func datagramAdmitted(to j: Int, at addr: String, from i: Int) -> Bool {
        if nat.kind(j) == .public { return addr == infos[j].addr }
        return addr == nat.mapped(j, toward: i) && sentTo.contains(j * scenario.members + i)
    }

    private func survivorsNow() -> [Int] { (0..<scenario.members).filter(isUp) }

    /// When `bytes` sent now from `a` reach `b`: after the link delay, in order behind what is already on the way.
    private func arrival(from a: Int, to b: Int, bytes: Int) -> Double {
        let key = a * scenario.members + b
        let at = max(now + scenario.linkDelay, lastArrival[key] ?? 0) + Double(bytes) / bandwidth(a, b)
        lastArrival[key] = at
        return at
    }

    /// The bandwidth of the link between `a` and `b`: the slower of their lines.
    private func bandwidth(_ a: Int, _ b: Int) -> Double {
        min(scenario.bandwidth, scenario.slowLinks[a] ?? .infinity, scenario.slowLinks[b] ?? .infinity)
    }

    /// Bytes member `a` has queued to `b` that have not left yet: what is still to go out at the
    /// link's bandwidth before the last one sent is on the wire.
    private func queuedBytes(from a: Int, to b: Int) -> Int {
        guard let last = lastArrival[a * scenario.members + b] else { return 0 }
        let seconds = last - scenario.linkDelay - now
        return seconds > 0 ? Int(min(seconds * bandwidth(a, b), Double(Int.max / 2))) : 0
    }

    /// As the node's outbox (`LinkHandle`): seconds `a`'s queue to `b` has stayed at the link
    /// budget's backlog, as of each time it is asked (each budget check, `LinkBudget.checkInterval`); nil below it. The simulated
    /// wire takes at its bandwidth, so bytes never wait untaken.
    private func backlogWaited(from a: Int, to b: Int) -> Double? {
        let key = a * scenario.members + b
        guard shellStates[a].linkBudget.isBacklogged(queuedBytes: queuedBytes(from: a, to: b)) else {
            backloggedSince[key] = nil
            return nil
        }
        let since = backloggedSince[key] ?? now
        backloggedSince[key] = since
        return now - since
    }

    private func sendLink(from a: Int, to b: Int, _ message: LinkMessage) {
        guard let link = link(at: a, to: b), !link.closing.contains(a) else { return }
        report.linkMessages += 1
        if let via = link.via { return sendOverCircuit(from: a, to: b, via: via, message) }
        queue.schedule(.link(to: b, from: a, generation: link.generation, message), at: arrival(from: a, to: b, bytes: Self.linkMessageBytes))
    }

    /// Datagram keys for a new link, drawn from the seeded generator, oriented for its dialer.
    private func linkDatagramKeys() -> PairDatagramKeys {
        var seed: [UInt8] = []
        for _ in 0..<4 { withUnsafeBytes(of: rng.next().littleEndian) { seed += $0 } }
        return PairDatagramKeys(seed: seed)
    }

    /// The key a link handshake between `dialer` and `peer` proves, as the node's: the dialer tries
    /// its dial keys in turn, the peer every key it holds; nil when none matches.
    private func handshakeKey(dialer: Int, peer: Int) -> SessionKey? {
        let offered = cores[peer]!.core.handshakeKeys(now: now).map(\.head)
        return cores[dialer]!.core.dialKeys(now: now).first(where: { offered.contains($0.head) })
    }

    /// A link's handshake between `dialer` and `peer` (over a connection; over a circuit through
    /// `via`; `punched`: a hole punch's simultaneous open from both listening ports), then each
    /// end's decision. True when both ends took it up; for a dialed connection, when the dialer's
    /// end did: the peer's end, the handshake's responder, decides a wire delay later
    /// (`linkAccepted`), when the dialer's last handshake message reaches it. So two crossing dials
    /// reach the two ends in either order, and the duplicate rule must pick the same link at both.
    private func establish(dialer: Int, peer: Int, via: Int?, punched: Bool) -> Bool {
        guard let key = handshakeKey(dialer: dialer, peer: peer) else { return false }
        // As the handshake's exporter: one key per direction that only these two ends hold.
        let keys = linkDatagramKeys()
        generation += 1
        let gen = generation
        let wire = linkKey(dialer, peer)
        let responderLater = via == nil && !punched
        if via != nil { relayed[wire] = Link(generation: gen, via: via) }
        else if links[wire] == nil { links[wire] = Link(generation: gen, awaiting: responderLater ? peer : nil) }
        else {
            crossing[wire, default: []].append(Link(generation: gen, awaiting: responderLater ? peer : nil))
            report.secondLinks += 1
        }
        trace?.record(.linkUp, at: now, UInt64(dialer), UInt64(peer))
        // What each end's socket says: the dialer's end leaves from an ephemeral port (a punch from
        // the listening port) through its NAT; a link over a circuit has no addresses.
        let port = punched ? SimNATMap.listenPort : SimNATMap.ephemeralPort(toward: peer)
        let dialed = punched ? nat.mapped(peer, toward: dialer) : infos[peer].addr
        let ends = via != nil ? [("", ""), ("", "")]
            : [(dialed, "\(SimNATMap.host(dialer)):\(port)"), (nat.mapped(dialer, toward: peer, port: port), punched ? "\(SimNATMap.host(peer)):\(SimNATMap.listenPort)" : infos[peer].addr)]
        let candidates = [(dialer, peer, keys), (peer, dialer, keys.reversed)].enumerated().map { n, end in
            LinkCandidate(peer: infos[end.1], nodeKey: infos[end.1].node, keyHead: key.head, datagramKeys: end.2, dialer: infos[dialer].id, via: via.map { infos[$0].id },
                          remote: ends[n].0, local: ends[n].1)
        }
        guard takeUp(dialer, candidates[0], generation: gen, other: peer, via: via) else { return false }
        if responderLater {
            queue.schedule(.linkAccepted(dialer: dialer, peer: peer, generation: gen, candidates[1]), at: now + scenario.linkDelay)
            return true
        }
        guard takeUp(peer, candidates[1], generation: gen, other: dialer, via: via) else { return false }
        if via != nil { report.relayedLinksMade += 1 } else if punched { report.punchedLinks += 1 }
        return true
    }

    /// End `a` decides on link `gen` to `b` and takes it up as `Node.register` does (the shared
    /// shell's `linkEstablished`): in its table it takes the place of the link it replaces (a
    /// direct link's place, or a relayed one's; that one closes, replaced, and its end there is
    /// not told). An end that refuses closes the new link, and an end that took it up sees it close.
    private func takeUp(_ a: Int, _ candidate: LinkCandidate, generation gen: UInt64, other b: Int, via: Int?) -> Bool {
        let wire = linkKey(a, b)
        let hadDirect = direct(at: a, to: b) != nil
        let decision = shell(a).linkEstablished(candidate, install: {
            if via == nil {
                updateDirect(wire, gen) { _ = $0.ends.insert(a) }
                for other in [links[wire]].compactMap({ $0 }) + (crossing[wire] ?? []) where other.generation != gen {
                    updateDirect(wire, other.generation) { _ = $0.ends.remove(a) }
                }
                _ = relayed[wire]?.ends.remove(a)
            } else {
                _ = relayed[wire]?.ends.insert(a)
            }
        })
        switch decision {
        case let .admitted(replaces, _, _, _):
            if replaces, via == nil, hadDirect { report.duplicateLinksReplaced += 1 }
            return true
        case .duplicate, .refused:
            if case .duplicate = decision, via == nil { report.duplicateLinksRefused += 1 }
            if via == nil { closeLink(a, b, generation: gen) } else { closeRelayed(a, b) }
            return false
        }
    }

    /// The pair's direct link `generation` closes at both ends (nil: every direct link of the
    /// pair; a crash, a partition, or a core's `closeLink`); each end that holds it in its table
    /// is told (`SessionShell.linkClosed`). When the first closes, the oldest later one takes its place.
    private func closeLink(_ a: Int, _ b: Int, generation: UInt64? = nil) {
        let key = linkKey(a, b)
        var later = crossing.removeValue(forKey: key) ?? []
        var closed = later.filter { generation == nil || $0.generation == generation }
        later.removeAll { generation == nil || $0.generation == generation }
        if let link = links[key], generation == nil || link.generation == generation {
            closed.append(link)
            links[key] = later.isEmpty ? nil : later.removeFirst()
        }
        if !later.isEmpty { crossing[key] = later }
        guard !closed.isEmpty else { return }
        // The line's queues empty with its last link (a second one's messages stay in order behind the first's).
        if links[key] == nil {
            lastArrival[a * scenario.members + b] = nil
            lastArrival[b * scenario.members + a] = nil
        }
        for link in closed {
            trace?.record(.linkDown, at: now, UInt64(a), UInt64(b))
            for (x, y) in [(a, b), (b, a)] where isUp(x) && link.ends.contains(x) {
                shell(x).linkClosed(infos[y].id)
            }
        }
    }

    /// How the survivors' links end (`SessionReport.linkEndsDifferAtEnd` and what follows it), and
    /// the directed messages between survivors that their recipient never delivered.
    private func reportLinks() {
        let survivors = report.survivors
        for (x, i) in survivors.enumerated() {
            for j in survivors[(x + 1)...] {
                let key = linkKey(i, j)
                let mine = direct(at: i, to: j)
                if mine?.generation != direct(at: j, to: i)?.generation { report.linkEndsDifferAtEnd += 1 }
                if crossing[key] != nil { report.pairsWithTwoLinksAtEnd += 1 }
                guard crossed.contains(key) else { continue }
                report.crossedPairs += 1
                if crossing[key] == nil, let mine, direct(at: j, to: i)?.generation == mine.generation { report.crossedPairsLinkedOnce += 1 }
            }
            let table = Set(linkedPeers(of: i).map { infos[$0].id })
            if cores[i]!.core.planner.linked.filter({ indexByID[$0] != nil }) != table { report.linkTableMismatches += 1 }
        }
        let alive = Set(survivors)
        var delivered: [Int: Set<String>] = [:]
        for d in directedSent where alive.contains(d.from) && alive.contains(d.to) {
            if delivered[d.to] == nil { delivered[d.to] = Set(logs[d.to].deliveries.map(\.msg)) }
            if delivered[d.to]?.contains(d.id) != true { report.directedUndelivered.append("\(infos[d.to].id) never delivered \(d.id)") }
        }
    }

    // MARK: relays and punching

    /// Paths between survivors by kind pair, punches, and the pairs a crashed relay carried.
    private func reportPaths() {
        let survivors = report.survivors
        for i in survivors {
            report.punchAttempts += cores[i]!.core.punch.attempts
            report.punchSuccesses += cores[i]!.core.punch.successes
        }
        for (x, i) in survivors.enumerated() {
            for j in survivors[(x + 1)...] {
                let path = cores[i]!.core.path(to: infos[j].id)
                if path != cores[j]!.core.path(to: infos[i].id) { report.pathDisagreements += 1 }
                let name = SimNAT.pairName(nat.kind(i), nat.kind(j))
                var count = report.paths[name] ?? SessionReport.PathCount()
                switch path {
                case .direct: count.direct += 1
                case .relayed: count.relayed += 1
                case .none, .self: count.none += 1
                }
                report.paths[name] = count
            }
        }
        let alive = Set(survivors)
        report.pairsRelinked = report.pairsOnCrashedRelay.filter { p in
            alive.contains(p.low) && alive.contains(p.high) && cores[p.low]!.core.path(to: infos[p.high].id) != .none
                && cores[p.high]!.core.path(to: infos[p.low].id) != .none
        }.count
    }

    /// The link over the circuit between `a` and `b` ends at both ends (its relay or a core closed
    /// the circuit, the direct link replaced it, or an end crashed): each end whose table holds it
    /// is told (`SessionShell.linkClosed`), and each end still holding its end of the circuit tells
    /// its core (`SessionCore.circuitEnded`, as the node's `CircuitEnd` does when its link ends).
    private func closeRelayed(_ a: Int, _ b: Int) {
        guard let link = relayed.removeValue(forKey: linkKey(a, b)), let via = link.via else { return }
        trace?.record(.linkDown, at: now, UInt64(a), UInt64(b))
        for (x, y) in [(a, b), (b, a)] where isUp(x) {
            circuitInbox[x * scenario.members + y] = nil
            if link.ends.contains(x) { shell(x).linkClosed(infos[y].id) }
        }
        for (x, y) in [(a, b), (b, a)] where isUp(x) {
            guard let end = circuitEnds[x * scenario.members + y], end.via == via else { continue }
            circuitEnds[x * scenario.members + y] = nil
            shell(x).circuitEndClosed(peer: infos[y].id, serial: end.serial)
        }
    }

    /// A member that crashed or left holds no circuit ends.
    private func forgetCircuitEnds(of i: Int) {
        for j in 0..<scenario.members {
            circuitEnds[i * scenario.members + j] = nil
            circuitInbox[i * scenario.members + j] = nil
        }
    }

    /// A link message from `a` to `b` over their circuit through `via`: framed (a 4-byte length,
    /// then its encoding), in `circuitData` messages of at most `LinkMessage.circuitDataLimit`
    /// bytes on `a`'s link to the relay, whose core forwards them (`SessionCore+Relay`, its budget
    /// applying) as it forwards a node's; so the bytes cross the wire twice.
    private func sendOverCircuit(from a: Int, to b: Int, via: Int, _ message: LinkMessage) {
        let body = message.encoded()
        let n = UInt32(clamping: body.count)
        let frame = [UInt8(n >> 24), UInt8((n >> 16) & 255), UInt8((n >> 8) & 255), UInt8(n & 255)] + body
        for start in stride(from: 0, to: frame.count, by: LinkMessage.circuitDataLimit) {
            let piece = Array(frame[start..<min(start + LinkMessage.circuitDataLimit, frame.count)])
            sendLink(from: a, to: via, .circuitData(peer: infos[b].id, bytes: piece))
        }
    }

    /// Bytes the relay `via` forwarded to `i` from `j` over their circuit: whole link messages go to
    /// `i`'s core as any link's do (as a `link` event now, after the current effects).
    private func circuitBytes(at i: Int, from j: Int, via: Int, _ bytes: [UInt8]) {
        let key = i * scenario.members + j
        guard circuitEnds[key]?.via == via, let link = relayed[linkKey(i, j)], link.via == via, link.ends.contains(i) else { return }
        var inbox = circuitInbox[key].flatMap { $0.generation == link.generation ? $0.bytes : nil } ?? []
        inbox += bytes
        while inbox.count >= 4 {
            let n = inbox[0..<4].reduce(0) { $0 << 8 | Int($1) }
            guard inbox.count >= 4 + n else { break }
            if let message = try? LinkMessage.decode(Array(inbox[4..<(4 + n)])) {
                queue.schedule(.link(to: i, from: j, generation: link.generation, message), at: now)
            }
            inbox.removeFirst(4 + n)
        }
        circuitInbox[key] = (link.generation, inbox)
    }

    /// `i`'s end of a circuit to `j` through `via` opened; the initiator's starts the link's
    /// handshake, which crosses the relay (a round trip and a half, each way twice the wire's delay).
    private func circuitUp(at i: Int, peer j: Int, via: Int, initiator: Bool, serial: UInt64) {
        circuitEnds[i * scenario.members + j] = (via, serial)
        circuitInbox[i * scenario.members + j] = nil
        if initiator { queue.schedule(.circuitHandshake(initiator: i, peer: j, via: via), at: now + 6 * scenario.linkDelay) }
    }

    /// The handshake over the circuit ends: a link when both ends still hold the circuit; else the
    /// ends that do see it fail (`SessionCore.circuitEnded`).
    private func circuitHandshake(initiator i: Int, peer j: Int, via: Int) {
        let (ij, ji) = (i * scenario.members + j, j * scenario.members + i)
        guard isUp(i), circuitEnds[ij]?.via == via else { return }
        if isUp(j), isUp(via), circuitEnds[ji]?.via == via, relayed[linkKey(i, j)] == nil,
           establish(dialer: i, peer: j, via: via, punched: false) { return }
        if relayed[linkKey(i, j)]?.via == via { return }
        for (x, y, key) in [(i, j, ij), (j, i, ji)] where isUp(x) {
            guard let end = circuitEnds[key], end.via == via else { continue }
            circuitEnds[key] = nil
            shell(x).circuitEndClosed(peer: infos[y].id, serial: end.serial)
        }
    }

    /// `i` dials `addrs` of `j` from its listening port (a hole punch): its NAT now lets `j` in at
    /// its mapping towards `j`. The dial reaches `j`'s side after the wire's delay (`punchArrives`).
    private func punchDial(at i: Int, peer j: Int, addrs: [String], initiator: Bool) {
        sentTo.insert(i * scenario.members + j)
        punchDials[i * scenario.members + j] = (now, addrs, initiator)
        queue.schedule(.punchArrives(from: i, to: j), at: now + scenario.linkDelay)
    }

    /// How long a punch dial keeps trying (`Node.punchConnectTimeout`): the other end's dial must
    /// come within it for the two to meet.
    static let punchWindow = 3.0

    /// `from`'s punch dial reaches `to`'s side: it connects when `to` is public and was dialed at its
    /// address, or when `to` dialed `from` too within `punchWindow`, each at the address the other's
    /// NAT maps it to towards it (a simultaneous open). The link that forms is the ordinary one,
    /// its handshake started by the attempt's initiator.
    private func punchArrives(from i: Int, to j: Int) {
        guard isUp(i), isUp(j), reachable(i, j), let mine = punchDials[i * scenario.members + j], now - mine.at <= Self.punchWindow + scenario.linkDelay,
              links[linkKey(i, j)] == nil else { return }
        let connects: Bool
        if nat.kind(j) == .public {
            connects = mine.addrs.contains(infos[j].addr)
        } else if let theirs = punchDials[j * scenario.members + i], abs(theirs.at - mine.at) <= Self.punchWindow {
            connects = mine.addrs.contains(nat.mapped(j, toward: i)) && theirs.addrs.contains(nat.mapped(i, toward: j))
        } else {
            connects = false
        }
        guard connects else { return }
        let (dialer, peer) = mine.initiator ? (i, j) : (j, i)
        _ = establish(dialer: dialer, peer: peer, via: nil, punched: true)
    }

    /// A delivery, logged as the node's `message` event shows it (application seqs).
    ///
    /// Its dependencies are checked here, as `DeliveryChecker` would check them in the log: each
    /// (origin, seq) must be at most what this member delivered of that origin before, or its
    /// baseline. A baseline is set before anything of its origin is delivered, so the baseline now
    /// is never larger than the final one the offline check would use.
    private func record(_ i: Int, _ delivered: WireMessage) {
        // Read in place (`CoreSlot.inPlace`): a method called on `slot.core` copied the whole core,
        // retaining and releasing every table, per delivery.
        let slot = cores[i]!
        let m = slot.inPlace { $0.applicationView(delivered) }
        trace?.record(.delivery, at: now, UInt64(i), m.origin.raw, m.seq, m.counter)
        for dep in m.deps where !(dep.member == m.origin && m.seq != 0 && dep.seq < m.seq) {
            let baseline = slot.inPlace { core in core.broadcast.baseline[dep.member].map { core.applicationSeqs.applicationSeq(dep.member, $0) } } ?? 0
            if dep.seq > max(clocks[i][dep.member] ?? 0, baseline) {
                report.dependencyViolations.append("\(infos[i].id): \(m.id) delivered before its dependency \(dep.member)#\(dep.seq)")
            }
        }
        if m.seq != 0 { clocks[i][m.origin] = max(clocks[i][m.origin] ?? 0, m.seq) }
        logs[i].deliveries.append(DeliveryRecord(msg: m.id, from: m.origin.description, seq: m.seq == 0 ? nil : m.seq, deps: [:]))
    }

    private func finish(_ end: Double) -> SessionReport {
        // Removed: a member that saw its own removal, or that a member still in the session removed.
        for i in survivorsNow() where !removed.contains(i) {
            for j in 0..<scenario.members where cores[i]!.core.removedMembers.contains(infos[j].id) { removed.insert(j) }
        }
        report.survivors = survivorsNow().filter { !removed.contains($0) }
        for i in 0..<scenario.members where !isUp(i) || removed.contains(i) { logs[i].stayed = false }
        report.removed = removed.sorted()
        report.linksToRemoved = links.keys.filter { removed.contains($0 / scenario.members) || removed.contains($0 % scenario.members) }.count
        for i in report.survivors {
            report.epochs[i] = cores[i]!.core.epoch
            report.epochHeads[i] = cores[i]!.core.epochs.head
        }
        for i in report.survivors {
            let core = cores[i]!.core
            logs[i].baseline = Dictionary(uniqueKeysWithValues: core.applicationClock(core.broadcast.baseline).map { ($0.key.description, $0.value) })
            report.held.append(core.broadcast.heldCount)
            report.stored.append(core.broadcast.unacknowledgedCount)
            report.liveViews[i] = core.live.count
            if i != scenario.hostile { report.refusals = report.refusals.adding(core.refusals) }
            report.activity[i] = core.activity.current.map { String(decoding: $0.value, as: UTF8.self) }
            if let m = manifest {
                report.attachmentGone[i] = (core.journal.records[m.id]?.removed ?? false) && held[i][m.id] == nil
                report.attachmentBytesHeld[i] = (held[i][m.id] ?? [:]).keys.reduce(0) { $0 + m.plainLength(of: $1) }
                report.stoppedByStore[i] = core.journal.stoppedByStore.contains(m.id)
                let chunks = held[i][m.id] ?? [:]
                report.attachmentIntact[i] = chunks.count == m.chunkCount && chunks.allSatisfy { m.chunkHashes[$0.key] == $0.value }
            }
        }
        for c in scenario.crashes where report.detection[c.member] == nil { report.detection[c.member] = .some(nil) }
        reportPaths()
        reportLinks()
        // A member that never started is not in the session: its empty log proves nothing.
        report.logs = (0..<scenario.members).filter { cores[$0] != nil }.map { logs[$0] }
        report.traceDigest = trace?.digest
        report.traceRecords = trace?.records
        report.virtualSeconds = end
        return report
    }
}

extension MemberChange {
    /// A stable number per change for the trace (independent of declaration order elsewhere).
    var hashValueForTrace: Int {
        switch self {
        case .joined: 1
        case .alive: 2
        case .suspect: 3
        case .failed: 4
        case .left: 5
        case .updated: 6
        case .removed: 7
        case .path: 8
        }
    }
}

/// A member's `SessionCore` behind a reference, so the simulator reads its properties in place:
/// through an array of values each read (`nextDeadline`, at every event) copied the whole core.
private final class CoreSlot {
    var core: SessionCore
    init(_ core: SessionCore) { self.core = core }
    /// `body` on the core where it lies: a method called on `slot.core` works on a copy of it.
    func inPlace<R>(_ body: (inout SessionCore) -> R) -> R { body(&core) }
}

extension SessionSimulation {
    /// Member `i`'s ports for the shared shell: the simulated world's side of each effect.
    private struct MemberShell: SessionShell {
        unowned let sim: SessionSimulation
        let i: Int

        var shellNow: Double { sim.now }
        func withCore<R: Sendable>(_ body: (inout SessionCore) -> R) -> R { body(&sim.cores[i]!.core) }
        func withShellState<R: Sendable>(_ body: (inout ShellState) -> R) -> R { body(&sim.shellStates[i]) }
        func execute(_ effects: [SessionEffect]) { sim.execute(i, effects) }

        func isLinked(_ peer: MemberID) -> Bool { sim.indexByID[peer].flatMap { sim.link(at: i, to: $0) } != nil }
        func sendOnLink(_ message: LinkMessage, to peer: MemberID) {
            if let j = sim.indexByID[peer] { sim.sendLink(from: i, to: j, message) }
        }
        func linkQueuedBytes(_ peer: MemberID) -> Int { sim.indexByID[peer].map { sim.queuedBytes(from: i, to: $0) } ?? 0 }
        func linkedPeers() -> [MemberID] { sim.linkedPeers(of: i).map { sim.infos[$0].id } }
        func linkWaited(_ peer: MemberID) -> Double? { sim.indexByID[peer].flatMap { sim.backlogWaited(from: i, to: $0) } }
        /// As `LinkHandle.abort`: the link closes at both ends now; what was queued on it is lost.
        func abortLink(_ peer: MemberID) {
            guard let j = sim.indexByID[peer], let link = sim.link(at: i, to: j) else { return }
            if link.via != nil { sim.closeRelayed(i, j) } else { sim.closeLink(i, j, generation: link.generation) }
        }
        func sendOnEveryLink(_ message: LinkMessage) {
            for j in sim.linkedPeers(of: i) { sim.sendLink(from: i, to: j, message) }
        }
        /// As the node's `relayForward`: the relay's bytes on its link to `peer`.
        func forwardCircuit(_ message: LinkMessage, to peer: MemberID) { sendOnLink(message, to: peer) }
        func circuitUp(peer: MemberID, via: MemberID, initiator: Bool, serial: UInt64) {
            guard let j = sim.indexByID[peer], let v = sim.indexByID[via] else { return }
            sim.circuitUp(at: i, peer: j, via: v, initiator: initiator, serial: serial)
        }
        func circuitBytes(peer: MemberID, via: MemberID, _ bytes: [UInt8]) {
            guard let j = sim.indexByID[peer], let v = sim.indexByID[via] else { return }
            sim.circuitBytes(at: i, from: j, via: v, bytes)
        }
        /// As the node's `circuitDown`: this end of the circuit closes (without telling the core
        /// again), and the link over it ends.
        func circuitDown(peer: MemberID, via: MemberID) {
            guard let j = sim.indexByID[peer], let v = sim.indexByID[via], sim.circuitEnds[i * sim.scenario.members + j]?.via == v else { return }
            sim.circuitEnds[i * sim.scenario.members + j] = nil
            if sim.relayed[sim.linkKey(i, j)]?.via == v { sim.closeRelayed(i, j) }
        }
        func punchDial(peer: MemberID, addrs: [String], initiator: Bool) {
            guard let j = sim.indexByID[peer] else { return }
            sim.punchDial(at: i, peer: j, addrs: addrs, initiator: initiator)
        }

        /// A TCP connect and handshake: a round trip and a half (`linkOpen`).
        func startDial(_ addr: String) {
            // Only a member's own address is dialed this way (its NAT's mappings only by a punch).
            guard let j = sim.indexByAddr[addr], j != i else { return dialFinished(addr, peer: nil) }
            sim.sentTo.insert(i * sim.scenario.members + j)
            sim.queue.schedule(.linkOpen(dialer: i, peer: j), at: sim.now + 3 * sim.scenario.linkDelay)
        }

        /// As `LinkHandle.close`: this end sends nothing more on the link; what is queued on it goes
        /// out first, then it closes.
        func closeLink(_ peer: MemberID) {
            guard let j = sim.indexByID[peer], let link = sim.link(at: i, to: j) else { return }
            sim.updateLink(sim.linkKey(i, j), link.generation) { _ = $0.closing.insert(i) }
            let drained = sim.lastArrival[i * sim.scenario.members + (link.via ?? j)] ?? sim.now
            sim.queue.schedule(.closeAfterQueued(i, j, generation: link.generation), at: max(sim.now, drained))
        }

        func sendDatagram(_ payload: DatagramPayload, to addr: String, sealing: DatagramSealing) {
            guard let j = sim.indexByHost[SimNATMap.hostPart(addr)], let sealed = sim.cores[i]!.core.datagramKeys.seal(payload, sealing, session: sim.seals[i]) else { return }
            sim.report.datagrams += 1
            if sealing == .session { sim.report.sessionKeyedDatagrams += 1 }
            sim.sentTo.insert(i * sim.scenario.members + j)
            guard sim.rng.unit() >= sim.scenario.loss, sim.reachable(i, j), sim.datagramAdmitted(to: j, at: addr, from: i) else { return }
            sim.queue.schedule(.datagram(to: j, from: i, sealed), at: sim.now + sim.scenario.delay + sim.rng.uniform(0, sim.scenario.jitter))
        }

        func memberChanged(_ change: MemberChange, _ info: MemberInfo, by: MemberID?) { sim.memberChanged(i, change, info) }

        func deliver(_ message: WireMessage, reliable: Bool, own: Bool) {
            guard reliable else {
                if message.origin != sim.infos[i].id { sim.report.unreliableDelivered += 1 }
                return
            }
            sim.record(i, message)
            if !own, sim.now < sim.sendingFrom + sim.scenario.sendFor, sim.rng.unit() < sim.scenario.replyProbability { sim.replies[i] += 1 }
        }

        func gap(member: MemberID, fromSeq: UInt64, toSeq: UInt64) {
            sim.clocks[i][member] = max(sim.clocks[i][member] ?? 0, toSeq)
            sim.logs[i].deliveries.append(.gap(from: member.description, lost: fromSeq...max(fromSeq, toSeq)))
        }

        func activityChanged() {}
        func participantsChanged(_ changes: [ParticipantChange]) {}
        func attachmentChanged(_ change: AttachmentChange, id: String) {
            if change == .complete, sim.report.attachmentComplete[i] == nil, sim.manifest?.id == id { sim.report.attachmentComplete[i] = sim.now }
        }
        func attachmentWaitersWake(id: String, storeFull: Bool) {}

        /// The store's read, done at once; what follows it is the core's (`chunkRead`).
        func serveChunk(id: String, index: Int, to peer: MemberID) {
            guard let j = sim.indexByID[peer], let link = sim.link(at: i, to: j) else { return }
            let hash = sim.held[i][id]?[index]
            let now = sim.now
            guard withCore({ $0.chunkRead(id: id, index: index, found: hash != nil, for: peer, now: now) }) == .send, let hash,
                  !link.closing.contains(i) else { return }
            let length = sim.manifest.map { $0.plainLength(of: index) + AEAD.tagLength } ?? SessionSimulation.chunkSize
            sim.report.chunkTransfers += 1
            sim.queue.schedule(.chunk(to: j, from: i, generation: link.generation, id: id, index: index, hash: hash),
                               at: sim.arrival(from: i, to: j, bytes: length) + (link.via != nil ? sim.scenario.linkDelay : 0))
        }
        func recheckChunk(id: String, index: Int, reportedBy peer: MemberID) {}
        // As the node's store: the attachment's file goes.
        func deleteStored(id: String) { sim.held[i][id] = nil }

        func scheduleFlush() -> Bool {
            sim.needsFlush.insert(i)
            return true
        }
        func congestionCleared() {}
        /// The member's timer: a tick event at `time` (one armed earlier stays queued and is
        /// skipped when it comes, `ShellState.armedWake` no longer naming it).
        func wakeAt(_ time: Double) { sim.queue.schedule(.tick(i), at: time) }

        /// As `Node.moveToEpoch`: session-key datagrams under the new epoch's key.
        func epochMoved(_ key: SessionKey) {
            sim.seals[i] = DatagramSeal(key: key.subkey(.datagram))
            let now = sim.now
            sim.olderSeals[i] = sim.cores[i]!.core.olderDatagramSeals(now: now)
            sim.report.movedAt[i] = now
        }
        func epochRemoved(by maker: [UInt8], member: MemberID?) { sim.removed.insert(i) }

        func noted(_ note: ShellNote) {
            switch note {
            case let .forged(_, count): sim.report.forged += count
            case let .repairRequested(peer, origin, from, to):
                sim.report.repairRequests += 1
                sim.trace?.record(.repairRequest, at: sim.now, UInt64(i), peer.raw, origin.raw, from, to)
            case .linkAborted: sim.report.linksAborted += 1
            case .refused, .unreadable, .retransmitted, .unreliableDropped: break
            }
        }
    }
}
