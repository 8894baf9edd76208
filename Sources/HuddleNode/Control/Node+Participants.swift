import HuddleControl
import HuddleCore
import HuddleCrypto

/// The control side of "participants are programs" (issue 38): a program joins an activity on its
/// control connection and stops being a participant when it leaves or the connection closes; the
/// core decides the rest (`SessionCore+Participants`).
extension Node {
    /// `participant.join`: the program on `connection` joins `activity`. With `id`, the program id it
    /// had before: taken over from another connection that held it (a program reconnecting), which
    /// then no longer ends it when it closes.
    func joinProgram(activity: String, id text: String?, on connection: ControlConnection) throws(ControlError) -> JSONObject {
        let key = ObjectIdentifier(connection)
        var id: UInt64
        if let text, let wanted = MemberID(text)?.raw {
            for (other, ids) in programsByConnection where other != key && ids.contains(wanted) {
                programsByConnection[other]?.remove(wanted)
                if programsByConnection[other]?.isEmpty == true { programsByConnection[other] = nil }
            }
            id = wanted
        } else {
            repeat { id = UInt64.random(in: 1...UInt64.max) } while core.presence.localPrograms[id] != nil
        }
        do throws(CoreError) {
            execute(try core.joinProgram(id, activity: activity))
        } catch {
            throw ControlError(error.code == .participantsFull ? .tooLarge : .badRequest, error.message)
        }
        programsByConnection[key, default: []].insert(id)
        return ["participant": participantJSON(local.id, ProgramPresence(id: id, activity: activity))]
    }

    /// `participant.leave`: program `text` of this node is no longer a participant.
    func leaveProgram(_ text: String) throws(ControlError) {
        guard let id = MemberID(text)?.raw, core.presence.localPrograms[id] != nil else {
            throw ControlError(.notFound, "no participant \(text) on this node")
        }
        for (key, ids) in programsByConnection where ids.contains(id) {
            programsByConnection[key]?.remove(id)
            if programsByConnection[key]?.isEmpty == true { programsByConnection[key] = nil }
        }
        execute(core.leaveProgram(id))
    }

    /// The programs `connection` joined stop being participants (it closed).
    func endPrograms(of connection: ControlConnection) {
        guard let ids = programsByConnection.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        for id in ids.sorted() { execute(core.leaveProgram(id)) }
    }

    /// A `participant` event per change (topic `participants`).
    func emitParticipants(_ changes: [ParticipantChange]) {
        for change in changes {
            events.append("participant", topic: .participants,
                          ["change": .string(change.kind.rawValue), "participant": participantJSON(change.member, change.program)])
        }
    }

    /// The participants shown here, of every activity or of `activity`.
    func participantsJSON(activity: String?) -> [JSON] {
        core.presence.participants.filter { activity == nil || $0.program.activity == activity }.map { participantJSON($0.member, $0.program) }
    }

    /// A participant object: `{id, member, node, name, activity, self}`.
    func participantJSON(_ member: MemberID, _ program: ProgramPresence) -> JSON {
        let info: MemberInfo? = member == local.id ? local : swim.members[member]
        return .object([
            "id": .string(MemberID(raw: program.id).description),
            "member": .string(member.description),
            "node": .string(info.map { hexString($0.node) } ?? ""),
            "name": .string(info?.name ?? ""),
            "activity": .string(program.activity),
            "self": .bool(member == local.id),
        ])
    }
}
