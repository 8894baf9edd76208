import HuddleTestSupport
import Testing
@testable import HuddleCrypto

/// Issue 33, item 6: the handshakes' parsers against what a peer can send — the link handshake's
/// three Noise messages and the pairing frames (CPace messages, hello, answer, confirmation, sealed
/// key) — each taken from a real transcript and damaged (`FuzzRandom.damage`), or made by a peer
/// that holds the right key with an application payload of any length. A trap ends the process, so
/// passing means no input trapped; the counts show every step was reached, and undamaged inputs
/// still complete (a parser that refused everything would pass "no trap" and fail here).
/// `make test` runs 2,000 inputs of each; `make fuzz` 1,000,000 (each costs a few Diffie–Hellmans).
@Suite struct HandshakeInputFuzzTests {
    /// One real link handshake, stopped before each step, reused for many inputs.
    struct Transcript {
        let initiator: LinkHandshake   // after start()
        let responder: LinkHandshake   // fresh
        let afterFirst: LinkHandshake  // responder after message 1
        let m1: [UInt8], m2: [UInt8], m3: [UInt8]

        init(key: SessionKey, payloads: ([UInt8], [UInt8])) throws {
            var a = try LinkHandshake(role: .initiator, sessionKey: key, identity: .generate(), appPayload: payloads.0)
            let b = try LinkHandshake(role: .responder, sessionKey: key, identity: .generate(), appPayload: payloads.1)
            m1 = try a.start()
            initiator = a
            responder = b
            var b1 = b
            m2 = try b1.receive(m1) ?? []
            afterFirst = b1
            var a2 = a
            m3 = try a2.receive(m2) ?? []
        }
    }

    @Test func noLinkHandshakeMessageAPeerCanSendTraps() throws {
        let run = FuzzRun("noise", defaultCount: 2_000)
        let key = SessionKey.generate()
        var transcript = try Transcript(key: key, payloads: ([1], [2]))
        var reached = [0, 0, 0, 0], completed = [0, 0, 0, 0]
        for index in 0..<run.count {
            var rng = run.random(index)
            // A new transcript now and then, some with payloads of extreme lengths.
            if index % 500 == 0 {
                let lengths = [0, 1, LinkHandshake.maximumAppPayload, Int.random(in: 0...LinkHandshake.maximumAppPayload, using: &rng)]
                let pick = { (r: inout FuzzRandom) in lengths.randomElement(using: &r) ?? 0 }
                transcript = try Transcript(key: key, payloads: (rng.bytes(pick(&rng)), rng.bytes(pick(&rng))))
            }
            let step = Int.random(in: 0..<4, using: &rng)
            reached[step] += 1
            switch step {
            case 0:
                let bytes = rng.damage(transcript.m1)
                run.record(index, bytes)
                var b = transcript.responder
                if (try? b.receive(bytes)) != nil, bytes == transcript.m1 { completed[0] += 1 }
            case 1:
                let bytes = rng.damage(transcript.m2)
                run.record(index, bytes)
                var a = transcript.initiator
                if (try? a.receive(bytes)) != nil, bytes == transcript.m2 { completed[1] += 1 }
            case 2:
                let bytes = rng.damage(transcript.m3)
                run.record(index, bytes)
                var b = transcript.afterFirst
                _ = try? b.receive(bytes)  // the last message: nothing to answer, the result is set
                if var result = b.result {
                    if bytes == transcript.m3 { completed[2] += 1 }
                    // Transport messages after it: damaged ciphertexts, never a trap.
                    _ = try? result.receive.decrypt(ad: [], ciphertext: rng.bytes(Int.random(in: 0...64, using: &rng)))
                }
            default:
                // A message 1 of random bytes of any length, and a responder that answers whatever decrypts.
                let bytes = rng.bytes(Int.random(in: 0...(LinkHandshake.maximumAppPayload + 200), using: &rng) % 4096)
                run.record(index, bytes)
                var b = transcript.responder
                if (try? b.receive(bytes)) != nil { completed[3] += 1 }
            }
        }
        print("fuzz noise: per step reached/completed undamaged: \((0..<4).map { "\($0):\(reached[$0])/\(completed[$0])" }.joined(separator: " "))")
        for step in 0..<3 {
            #expect(reached[step] >= run.count / 8, "step \(step) reached only \(reached[step]) times")
            #expect(completed[step] >= run.count / 200, "step \(step): only \(completed[step]) undamaged messages completed")
        }
        #expect(completed[3] == 0, "random bytes passed the first message's AEAD")
    }

    @Test func noPairingFrameAPeerCanSendTraps() throws {
        let run = FuzzRun("pairing", defaultCount: 2_000)
        let password = Array("7-abandon-ability-zoo-zoo".utf8)
        let key = SessionKey.generate()
        var joiner = try PairingHandshake.Joiner(nameplate: 7, password: password)
        var member = try PairingHandshake.Member(hello: try PairingHandshake.parseHello(joiner.hello), password: password)
        var confirm = try joiner.receiveAnswer(member.answer)
        var sealed = member.sealKey(key)
        var reached = [Int](repeating: 0, count: 6), accepted = [Int](repeating: 0, count: 6)
        for index in 0..<run.count {
            var rng = run.random(index)
            if index % 500 == 0 {
                joiner = try PairingHandshake.Joiner(nameplate: UInt32.random(in: 0 ... .max, using: &rng), password: password)
                member = try PairingHandshake.Member(hello: try PairingHandshake.parseHello(joiner.hello), password: password)
                var j = joiner
                confirm = try j.receiveAnswer(member.answer)
                sealed = member.sealKey(key)
            }
            let step = Int.random(in: 0..<6, using: &rng)
            reached[step] += 1
            switch step {
            case 0:
                // The hello, parsed, then answered by a member (a CPace responder on the peer's message).
                let bytes = rng.damage(joiner.hello)
                run.record(index, bytes)
                if let hello = try? PairingHandshake.parseHello(bytes), (try? PairingHandshake.Member(hello: hello, password: password)) != nil {
                    accepted[0] += 1
                }
            case 1:
                let bytes = rng.damage(member.answer)
                run.record(index, bytes)
                var j = joiner
                if (try? j.receiveAnswer(bytes)) != nil { accepted[1] += 1 }
            case 2:
                let bytes = rng.damage(confirm)
                run.record(index, bytes)
                if member.confirms(bytes) { accepted[2] += 1 }
            case 3:
                let bytes = rng.damage(sealed)
                run.record(index, bytes)
                var j = joiner
                _ = try? j.receiveAnswer(member.answer)
                if (try? j.receiveKey(bytes)) != nil { accepted[3] += 1 }
            case 4:
                // CPace alone: a responder on a damaged initiator message.
                let initiator = try CPace.Initiator(password: password, channelIdentifier: [1], sessionID: [2])
                let bytes = rng.damage(initiator.message)
                run.record(index, bytes)
                if let responder = try? CPace.Responder(password: password, channelIdentifier: [1], sessionID: [2], peerMessage: bytes),
                   (try? initiator.finish(peerMessage: responder.message)) == responder.isk { accepted[4] += 1 }
            default:
                // CPace alone: an initiator finishing on a damaged responder message.
                let initiator = try CPace.Initiator(password: password, channelIdentifier: [1], sessionID: [2])
                let responder = try CPace.Responder(password: password, channelIdentifier: [1], sessionID: [2], peerMessage: initiator.message)
                let bytes = rng.damage(responder.message)
                run.record(index, bytes)
                if (try? initiator.finish(peerMessage: bytes)) == responder.isk { accepted[5] += 1 }
            }
        }
        print("fuzz pairing: per step reached/accepted: \((0..<6).map { "\($0):\(reached[$0])/\(accepted[$0])" }.joined(separator: " "))")
        for step in 0..<6 {
            #expect(reached[step] >= run.count / 12, "step \(step) reached only \(reached[step]) times")
            // One input in seven is left undamaged (and some damage keeps a frame valid: a tail the
            // parser ignores is refused, so only the undamaged ones count on).
            #expect(accepted[step] >= run.count / 200, "step \(step): only \(accepted[step]) frames accepted")
        }
    }
}
