/// One client connection on the control socket: the node queues reply and event lines on its
/// outbox, and the connection's writer task writes them in order.
final class ControlConnection: Sendable {
    let outbox = Outbox<[UInt8]>()
}
