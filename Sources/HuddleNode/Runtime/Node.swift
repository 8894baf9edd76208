import Foundation
import HuddleControl
import HuddleCore
import HuddleCrypto
import NIOCore

/// The secrets a node proves itself with on every link.
struct LinkSecurity: Sendable {
    let sessionKey: SessionKey
    let identity: Identity
}

/// One running member: it owns the protocol cores and executes what they decide over links,
/// datagrams and the control socket. All mutable state lives in this actor.
actor Node {
    nonisolated let local: MemberInfo
    nonisolated let security: LinkSecurity
    nonisolated let config: NodeConfiguration
    nonisolated let counters = NodeCounters()
    nonisolated let log: NodeLog
    nonisolated let spawner = TaskSpawner()
    nonisolated let datagramOutbox = Outbox<AddressedEnvelope<ByteBuffer>>()
    nonisolated let seal: DatagramSeal
    let started = ContinuousClock.now

    var membership: MeshMembership
    var sequencer: MessageSequencer
    var links: [MemberID: LinkHandle] = [:]
    var events = EventLog()
    private var helloSeen: Set<MemberID> = []
    private var helloWaiters: [MemberID: [CheckedContinuation<Void, Never>]] = [:]
    private var dialsInFlight: Set<String> = []
    var replayWindows: [MemberID: ReplayWindow] = [:]
    var datagramCounter: UInt64 = 0
    var datagramAddresses: [MemberID: SocketAddress] = [:]
    private(set) var stopping = false
    private var stopped = false
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []

    init(local: MemberInfo, security: LinkSecurity, config: NodeConfiguration) {
        self.local = local
        self.security = security
        self.config = config
        log = NodeLog(name: local.name)
        seal = DatagramSeal(key: security.sessionKey.subkey(.datagram))
        membership = MeshMembership(local: local)
        sequencer = MessageSequencer(local: local.id)
    }

    /// Seconds since the node started: the time the protocol cores see.
    var now: Double {
        let d = ContinuousClock.now - started
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    // MARK: links

    /// Adds an authenticated link; false when it must be closed (self, a run that ended, a losing duplicate).
    func register(_ link: LinkHandle) -> Bool {
        guard !stopping else { return false }
        let peer = link.peer.id
        if peer == local.id {
            log.warning("refused a link to ourselves at \(link.remoteAddress)")
            return false
        }
        if let known = membership.members[peer], known.state != .alive { return false }
        if let existing = links[peer] {
            guard MeshMembership.keepsNewLink(newDialedBy: link.dialer, existingDialedBy: existing.dialer) else { return false }
            existing.close()
        }
        links[peer] = link
        link.send(LinkMessage.hello(ownSeq: sequencer.ownSeq, members: membership.aliveMembers).encoded())
        execute(membership.linkEstablished(link.peer, now: now))
        return true
    }

    func linkReceived(_ link: LinkHandle, _ message: LinkMessage) {
        guard links[link.peer.id] === link else { return }
        let peer = link.peer.id
        switch message {
        case let .hello(ownSeq, members):
            sequencer.linkBaseline(origin: peer, seq: ownSeq)
            helloSeen.insert(peer)
            for waiter in helloWaiters.removeValue(forKey: peer) ?? [] { waiter.resume() }
            execute(membership.receive(members: members, from: peer, now: now))
        case let .members(list):
            execute(membership.receive(members: list, from: peer, now: now))
        case let .message(m):
            receiveReliable(m, on: link)
        case .leave:
            membership.receiveLeave(from: peer)
        }
    }

    func linkClosed(_ link: LinkHandle) {
        let peer = link.peer.id
        guard links[peer] === link else { return }
        links[peer] = nil
        for waiter in helloWaiters.removeValue(forKey: peer) ?? [] { waiter.resume() }
        execute(membership.linkClosed(peer, now: now))
    }

    /// Waits (bounded) until `peer`'s hello arrived, so a joiner knows the members its sponsor knows.
    func waitForHello(_ peer: MemberID) async {
        guard !helloSeen.contains(peer), links[peer] != nil else { return }
        await withCheckedContinuation { helloWaiters[peer, default: []].append($0) }
    }

    func execute(_ actions: [MeshMembership.Action]) {
        for action in actions {
            switch action {
            case let .dial(addr, member):
                guard links[member] == nil, !stopping, dialsInFlight.insert(addr).inserted else { continue }
                spawner.spawn { [self] in
                    do { _ = try await dial(addr) } catch { log.info("could not link to \(member) at \(addr): \(error)") }
                    await dialFinished(addr)
                }
            case let .emit(change, info):
                emitMember(change, info)
            case let .announce(list, except):
                let encoded = LinkMessage.members(list).encoded()
                for (id, link) in links where id != except { link.send(encoded) }
            }
        }
    }

    private func dialFinished(_ addr: String) { dialsInFlight.remove(addr) }

    func tick() { execute(membership.tick(now: now)) }

    // MARK: stopping

    /// Says `leave` on every link, lets the links drain (bounded), and marks the node stopped.
    func leave() async {
        guard !stopping else { return }
        stopping = true
        log.info("leaving the session")
        let goodbye = LinkMessage.leave.encoded()
        for link in links.values {
            link.send(goodbye)
            link.close()
        }
        let deadline = ContinuousClock.now + .seconds(3)
        while !links.isEmpty && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        stopped = true
        for waiter in stopWaiters { waiter.resume() }
        stopWaiters = []
    }

    func waitUntilStopped() async {
        guard !stopped else { return }
        await withCheckedContinuation { stopWaiters.append($0) }
    }
}
