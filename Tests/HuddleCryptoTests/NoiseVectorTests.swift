import Foundation
import Testing
@testable import HuddleCrypto

/// The cacophony vectors in ../shared/vectors: path from $HUDDLE_NOISE_VECTORS, else beside the repo.
private let vectorsPath: String = {
    if let path = ProcessInfo.processInfo.environment["HUDDLE_NOISE_VECTORS"], !path.isEmpty { return path }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.deletingLastPathComponent().appendingPathComponent("shared/vectors/noise-25519-chachapoly.json").path
}()

private struct Vector: Decodable {
    let protocol_name: String
    let init_prologue: String
    let init_psks: [String]?
    let init_static: String?
    let init_ephemeral: String
    let init_remote_static: String?
    let resp_prologue: String
    let resp_psks: [String]?
    let resp_static: String?
    let resp_ephemeral: String?
    let resp_remote_static: String?
    let handshake_hash: String?
    let messages: [Message]
    struct Message: Decodable { let payload: String; let ciphertext: String }
}

private struct VectorFile: Decodable { let vectors: [Vector] }

private func hex(_ s: String?) throws -> [UInt8]? {
    guard let s else { return nil }
    guard let b = bytesFromHex(s) else { throw CryptoError("bad hex in vector") }
    return b
}

private func key(_ s: String?) throws -> NoiseKeyPair? { try hex(s).map { try NoiseKeyPair(privateKey: $0) } }

/// Runs one vector: both sides through the handshake, then the transport messages.
private func run(_ v: Vector) throws {
    var initiator = try NoiseHandshakeState(protocolName: v.protocol_name, initiator: true, prologue: try hex(v.init_prologue) ?? [],
                                            s: try key(v.init_static), e: try key(v.init_ephemeral), rs: try hex(v.init_remote_static),
                                            psks: try (v.init_psks ?? []).map { try hex($0) ?? [] })
    var responder = try NoiseHandshakeState(protocolName: v.protocol_name, initiator: false, prologue: try hex(v.resp_prologue) ?? [],
                                            s: try key(v.resp_static), e: try key(v.resp_ephemeral), rs: try hex(v.resp_remote_static),
                                            psks: try (v.resp_psks ?? []).map { try hex($0) ?? [] })
    var transport: (i: (send: NoiseCipherState, receive: NoiseCipherState), r: (send: NoiseCipherState, receive: NoiseCipherState))?
    for (index, message) in v.messages.enumerated() {
        let payload = try hex(message.payload) ?? []
        let expected = try hex(message.ciphertext) ?? []
        let initiatorSends = initiator.pattern.isOneWay || index % 2 == 0
        if var t = transport {
            if initiatorSends {
                #expect(try t.i.send.encrypt(ad: [], plaintext: payload) == expected, "\(v.protocol_name) transport \(index)")
                #expect(try t.r.receive.decrypt(ad: [], ciphertext: expected) == payload)
            } else {
                #expect(try t.r.send.encrypt(ad: [], plaintext: payload) == expected, "\(v.protocol_name) transport \(index)")
                #expect(try t.i.receive.decrypt(ad: [], ciphertext: expected) == payload)
            }
            transport = t
            continue
        }
        if initiatorSends {
            #expect(try initiator.writeMessage(payload: payload) == expected, "\(v.protocol_name) handshake \(index)")
            #expect(try responder.readMessage(expected) == payload)
        } else {
            #expect(try responder.writeMessage(payload: payload) == expected, "\(v.protocol_name) handshake \(index)")
            #expect(try initiator.readMessage(expected) == payload)
        }
        if initiator.isComplete {
            #expect(responder.isComplete)
            if let h = try hex(v.handshake_hash) { #expect(initiator.handshakeHash == h && responder.handshakeHash == h, "\(v.protocol_name) hash") }
            transport = (try initiator.split(), try responder.split())
        }
    }
}

@Test func cacophonyVectorsPass() throws {
    guard let data = FileManager.default.contents(atPath: vectorsPath) else {
        Issue.record("NOISE VECTORS MISSING at \(vectorsPath): set HUDDLE_NOISE_VECTORS or put ../shared beside the repository")
        return
    }
    let vectors = try JSONDecoder().decode(VectorFile.self, from: data).vectors
    var ran: [String: Int] = [:]
    var unsupported: [String] = []
    for v in vectors {
        let pattern = String(v.protocol_name.split(separator: "_")[1])
        guard (try? NoisePattern.named(pattern)) != nil else { unsupported.append(v.protocol_name); continue }
        try run(v)
        ran[pattern, default: 0] += 1
    }
    let required = ["NN", "XX", "IK", "NNpsk0", "NNpsk2", "KKpsk0", "IKpsk2", "XXpsk3"]
    for name in required { #expect(ran[name] == 2, "required pattern \(name) must run for SHA256 and BLAKE2b") }
    #expect(unsupported.isEmpty, "vectors this engine cannot run: \(unsupported)")
    let total = ran.values.reduce(0, +)
    print("noise vectors: \(total) of \(vectors.count) run, \(ran.count) patterns: \(ran.keys.sorted().joined(separator: " "))")
    #expect(total == vectors.count)
}

@Test func handshakeRefusesGarbageWithoutTrapping() throws {
    var rng = SystemRandomNumberGenerator()
    for size in [0, 1, 31, 32, 47, 48, 100, 70_000] {
        var responder = try NoiseHandshakeState(protocolName: "Noise_XXpsk0_25519_ChaChaPoly_BLAKE2b", initiator: false, prologue: [],
                                                s: .generate(), psks: [SecureRandom.bytes(32)])
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(throws: CryptoError.self) { try responder.readMessage(bytes) }
    }
}
