/// Reads of the event spool's files for subscribers (a `since` replay, a subscriber that lags past
/// what is in memory) run on the spool's I/O queue (`EventLog.FileLoad`), never on the actor.
extension Node {
    /// Turns the off-actor reads on (once; before the first subscriber).
    func readEventFilesOffActor() {
        guard events.loadFromFiles == nil else { return }
        events.loadFromFiles = { [weak self] connection, load in
            guard let self else { return }
            // Once the node's tasks have ended (it stopped) nobody is fed any more: nothing to read.
            self.spawner.spawn {
                let bytes = await load.read()
                await self.eventFilesRead(connection, range: load.range, bytes)
            }
        }
    }

    private func eventFilesRead(_ connection: ControlConnection, range: Range<Int64>, _ bytes: [UInt8]?) {
        events.loaded(connection, range: range, bytes)
    }
}
