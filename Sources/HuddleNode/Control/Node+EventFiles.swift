/// Reads of the event spool's files for subscribers (a `since` replay, a subscriber that lags past
/// what is in memory) run on the spool's I/O queue (`EventLog.FileLoad`), never on the actor; a
/// writer that falls behind is waited for with the actor free (`waitForEventWriter`).
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

    /// The spool's writer is more than its pending limit behind (a disk that throttles writes):
    /// the caller waits for it here, with the actor free, before making more events — a link's
    /// reader before its next batch, the datagram receiver before its next datagram, `send` and
    /// every control request that changes the session before it is carried out. An append never
    /// waits (`EventSpool.writerWait`). Waits again while others' events kept the writer behind,
    /// so what the caller makes next starts within the limit; not once the node stops.
    func waitForEventWriter() async {
        while mayWait, let wait = events.spoolWriterWait() {
            await wait()
            events.spoolWriterProgressed()
        }
    }

    private func eventFilesRead(_ connection: ControlConnection, range: Range<Int64>, _ bytes: [UInt8]?) {
        events.loaded(connection, range: range, bytes)
    }
}
