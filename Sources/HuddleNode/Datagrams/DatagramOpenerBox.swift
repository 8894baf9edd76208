import HuddleCore
import Synchronization

/// The `DatagramOpener` the UDP receive thread opens datagrams with. The node replaces it whenever
/// its link keys change (`Node.publishDatagramKeys`); the thread takes the current one for each
/// datagram, so a key is used from the moment its link is admitted until it is dropped.
final class DatagramOpenerBox: Sendable {
    private let opener: Mutex<DatagramOpener>

    init(_ opener: DatagramOpener) { self.opener = Mutex(opener) }

    var current: DatagramOpener { opener.withLock { $0 } }

    func replace(with new: DatagramOpener) { opener.withLock { $0 = new } }
}
