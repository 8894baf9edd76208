extension Array where Element == UInt8 {
    /// Makes room for `extra` more bytes, growing geometrically. `reserveCapacity(count + extra)`
    /// allocates exactly what it is asked for, so a buffer appended to that way is reallocated and
    /// copied whole on every append once it is full (or shared): quadratic copying. The event
    /// spool's tail showed it — up to 256 KiB copied per 256 B event after a commit shared it.
    @inlinable
    public mutating func reserveForAppending(_ extra: Int) {
        let (needed, overflow) = count.addingReportingOverflow(extra)
        guard !overflow, needed > capacity else { return }
        reserveCapacity(Swift.max(needed, capacity.multipliedReportingOverflow(by: 2).overflow ? needed : capacity * 2))
    }
}
