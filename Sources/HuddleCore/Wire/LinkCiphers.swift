import HuddleCrypto

/// The sending half of a link's transport cipher, rekeyed by volume and by time (Noise REKEY,
/// spec 11.3) without a round trip: when the current key has sealed `rekeyBytes` of records or is
/// `rekeyInterval` seconds old, the next record carries `LinkRecords.rekeyFlag` inside its
/// ciphertext and the key moves on right after it. The receiver (`LinkOpener`) moves on right
/// after opening that record, so both ends change key at the same point of the ordered stream.
/// A key taken from memory opens nothing sealed before its rekey. Pure: `now` is passed in.
public struct LinkSealer: Sendable {
    /// Defaults: 256 MiB of records or 2 minutes (WireGuard's REKEY_AFTER_TIME), whichever first.
    public static let defaultRekeyBytes = 256 << 20
    public static let defaultRekeyInterval = 120.0

    public let rekeyBytes: Int
    public let rekeyInterval: Double
    private var cipher: NoiseCipherState
    private var sealedSinceRekey = 0
    private var keyedAt: Double
    /// How many times the key has moved on.
    public private(set) var rekeys = 0

    public init(_ cipher: NoiseCipherState, now: Double, rekeyBytes: Int = defaultRekeyBytes, rekeyInterval: Double = defaultRekeyInterval) {
        self.cipher = cipher
        keyedAt = now
        self.rekeyBytes = rekeyBytes
        self.rekeyInterval = rekeyInterval
    }

    /// Seals one record (`flags | fragment`, from `LinkRecords.split`).
    public mutating func seal(_ record: [UInt8], now: Double) throws -> [UInt8] {
        var record = record
        let due = !record.isEmpty && (sealedSinceRekey + record.count >= rekeyBytes || now - keyedAt >= rekeyInterval)
        if due { record[0] |= LinkRecords.rekeyFlag }
        let sealed = try cipher.encrypt(ad: [], plaintext: record)
        sealedSinceRekey += record.count
        if due {
            cipher.rekey()
            sealedSinceRekey = 0
            keyedAt = now
            rekeys += 1
        }
        return sealed
    }
}

/// The receiving half of a link's transport cipher: opens records and rekeys right after one
/// that carries `LinkRecords.rekeyFlag` (see `LinkSealer`), handing the record on without it.
/// A peer that sets the flag on every record costs one ChaCha20 block per record, nothing more.
public struct LinkOpener: Sendable {
    private var cipher: NoiseCipherState
    /// How many times the key has moved on.
    public private(set) var rekeys = 0

    public init(_ cipher: NoiseCipherState) { self.cipher = cipher }

    /// Opens one frame's ciphertext, straight from its memory.
    public mutating func open(_ ciphertext: UnsafeRawBufferPointer) throws -> [UInt8] {
        var record = try cipher.decrypt(ciphertext: ciphertext)
        if let flags = record.first, flags & LinkRecords.rekeyFlag != 0 {
            record[0] = flags & ~LinkRecords.rekeyFlag
            cipher.rekey()
            rekeys += 1
        }
        return record
    }

    public mutating func open(_ ciphertext: [UInt8]) throws -> [UInt8] {
        try ciphertext.withUnsafeBytes { try open($0) }
    }
}
