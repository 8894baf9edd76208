@_spi(Testing) import HuddleControl

extension ControlClient {
    /// A request as a test states it, CONTROL.md's `op` and fields; returns the `ok` reply's fields
    /// (or throws the node's `ControlError`). Sent typed (`ControlRequest.decode`, then
    /// `request(_:)`, whose reply decoding is checked too) when it is a request the node would
    /// take; else sent as it is (`requestUnchecked`), so that the refusal a test sees is the node's.
    public func ask(_ op: String, _ fields: JSONObject = [:]) async throws -> JSONObject {
        var object: JSONObject = ["op": .string(op)]
        for (key, value) in fields { object[key] = value }
        let typed: ControlRequest
        do { typed = try ControlRequest.decode(object) } catch { return try await requestUnchecked(object) }
        return try await request(typed).fields
    }
}
