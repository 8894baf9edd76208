/// What a `SWIMInstance` asks its shell (the node, or the simulator) to do.
///
/// The instance never performs I/O; every effect is one of these, returned in order.
public enum SWIMEffect: Sendable, Equatable {
    /// Send this message as one datagram to `host:port` (best effort; loss is expected).
    case send(SWIMMessage, to: String)
    /// Exchange full state with `host:port` over a reliable link: send `pushPullState()`, have the
    /// peer call `receivePushPull` and answer with its own `pushPullState()` (taken after it merged
    /// ours), then hand that answer to `receivePushPull`. A failed exchange needs no report.
    /// `member`: the member chosen (nil for a seed, known only by its address).
    case pushPull(to: String, member: MemberID?, join: Bool)
    /// Tell the application what happened to a member (never emitted about the local member).
    case emit(MemberChange, MemberInfo)
    /// The first record refused for `Refusal` (later ones are only counted in `refusals`).
    case refused(Refusal)
}
