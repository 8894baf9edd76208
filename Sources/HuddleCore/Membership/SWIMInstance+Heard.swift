extension SWIMInstance {
    /// When this member last heard from `id` over its link (the time as passed in, `now:`); nil
    /// when never, or `id` is not in the table. What `huddle doctor` shows as "last heard".
    public func lastHeard(from id: MemberID) -> Double? { heardFrom[id] }
}
