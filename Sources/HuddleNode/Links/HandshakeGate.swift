import Synchronization

/// Bounds the handshakes in progress on the listen port (link handshakes and pairings alike):
/// at most `perAddress` from one source address, `total` in all. A connection over either bound
/// is closed at once, before any work, so one address cannot hold every slot while another
/// member still links. A slot is held from accept until the handshake ends either way (at most
/// `NodeConfiguration.handshakeTimeoutSeconds`).
final class HandshakeGate: Sendable {
    let perAddress: Int
    let total: Int
    private let state = Mutex(State())

    private struct State {
        var inProgress: [String: Int] = [:]
        var count = 0
        /// Addresses refused since their count was last below the bound: logged once each.
        var refusing: Set<String> = []
    }

    /// What `enter` decided.
    enum Admission: Equatable {
        case admitted(HandshakeTicket)
        /// Refused; `firstRefusal` is true once per stretch of refusals of this address (log it).
        case refused(firstRefusal: Bool)
    }

    init(perAddress: Int, total: Int) {
        self.perAddress = perAddress
        self.total = total
    }

    func enter(_ address: String) -> Admission {
        state.withLock { state in
            guard state.count < total, state.inProgress[address, default: 0] < perAddress else {
                return .refused(firstRefusal: state.refusing.insert(address).inserted)
            }
            state.inProgress[address, default: 0] += 1
            state.count += 1
            return .admitted(HandshakeTicket(gate: self, address: address))
        }
    }

    /// Handshakes in progress from `address` (for tests and logs).
    func inProgress(from address: String) -> Int { state.withLock { $0.inProgress[address, default: 0] } }

    fileprivate func leave(_ address: String) {
        state.withLock { state in
            state.count -= 1
            let left = state.inProgress[address, default: 1] - 1
            state.inProgress[address] = left > 0 ? left : nil
            state.refusing.remove(address)
        }
    }
}

/// One admitted handshake's slot in a `HandshakeGate`; `release` (or deinit) gives it back once.
final class HandshakeTicket: Sendable, Equatable {
    private let gate: HandshakeGate
    private let address: String
    private let held = Atomic<Bool>(true)

    fileprivate init(gate: HandshakeGate, address: String) {
        self.gate = gate
        self.address = address
    }

    func release() {
        if held.exchange(false, ordering: .acquiringAndReleasing) { gate.leave(address) }
    }

    deinit { release() }

    static func == (a: HandshakeTicket, b: HandshakeTicket) -> Bool { a === b }
}
