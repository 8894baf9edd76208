/// A value with a wire encoding that is also stored whole (a row of the node's state): one
/// place for "encode into a fresh writer" and "decode all of these bytes, nothing after".
protocol StoredForm {
    func encode(into w: inout WireWriter)
    static func decode(from r: inout WireReader) throws(CoreError) -> Self
}

extension StoredForm {
    /// The encoding alone, in a writer of `capacity` to start with.
    func storedBytes(capacity: Int) -> [UInt8] {
        var w = WireWriter(capacity: capacity)
        encode(into: &w)
        return w.bytes
    }

    /// The value `bytes` hold whole; refused when anything follows it (`what` names it).
    static func decodeWhole(_ bytes: [UInt8], _ what: String) throws(CoreError) -> Self {
        var r = WireReader(bytes)
        let value = try decode(from: &r)
        try r.expectEnd(what)
        return value
    }
}
