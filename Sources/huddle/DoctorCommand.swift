import ArgumentParser
import Foundation
import HuddleControl

/// `huddle doctor`: asks the node what is wrong (`diagnose`) and says it, one finding a line,
/// within `deadline` whatever the node does.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Say what is wrong with this node and its session, one finding a line (exit 0 healthy, 1 with findings).",
        discussion: """
            Checks, within 5 s: the node answers on its control socket; its key file is mode 0600; its own and \
            every member's advertised address answers over TCP and UDP from the node; no member is suspect or \
            failed; every member is on the node's epoch; no linked member's clock is more than 2 s off the \
            node's (measured over its link at once, beyond the measurement's error); the store is under 90 % \
            of its limit; no event subscriber is near an overflow. --verbose adds each member's state, link, \
            last heard, round-trip time over its link, clock skew and epoch.
            """
    )
    @Option(name: [.customLong("control"), .customLong("socket")], help: "Control socket of the node (default: $HUDDLE_CONTROL, else $XDG_RUNTIME_DIR/huddle.sock, else /tmp/huddle-$UID.sock).")
    var control: String?
    @Flag(name: .long, help: "Print {healthy, findings, report, elapsed_ms} as JSON.") var json = false
    @Flag(name: .long, help: "After the findings, a line per member: state, link, last heard, round-trip time, clock skew, epoch.") var verbose = false

    /// The whole run's bound: connect, the node's checks, and the reply.
    static let deadline = Duration.seconds(5)

    func run() async throws {
        let path = ControlPath.resolve(control)
        let started = ContinuousClock.now
        let outcome = await Self.ask(path)
        let elapsed = ContinuousClock.now - started
        let findings: [String]
        var report: JSONObject = [:]
        switch outcome {
        case let .report(r):
            report = r
            findings = Diagnosis.findings(r)
        case let .finding(line): findings = [line]
        }
        if json {
            let ms = Int64(elapsed / .milliseconds(1))
            print(JSON.object(["healthy": .bool(findings.isEmpty), "findings": .array(findings.map { .string($0) }),
                               "report": .object(report), "elapsed_ms": .int(ms)]).serialized)
        } else {
            if findings.isEmpty {
                let members = report["members"]?.arrayValue?.count ?? 0
                print("healthy: \(members) member\(members == 1 ? "" : "s") known, epoch \(plain(report["epoch"])), every advertised address answers")
            }
            for line in findings { print(line) }
            if verbose { printMembers(report) }
        }
        if !findings.isEmpty { throw ExitCode(1) }
    }

    enum Outcome: Sendable {
        case report(JSONObject)
        case finding(String)
    }

    /// The node's `diagnose` reply, or the one finding that says why there is none, within `deadline`.
    static func ask(_ path: String) async -> Outcome {
        let client: ControlClient
        // A Unix socket connects at once (a stopped node's kernel takes it into the backlog).
        do { client = try await ControlClient.connect(path: path) } catch where error.code == .untrustedPath {
            return .finding(error.message)
        } catch {
            return .finding("no node answers on \(path): start one (huddle run --key FILE --control \(path)), or name its socket with --socket")
        }
        let outcome = await withTaskGroup(of: Outcome?.self) { group in
            group.addTask {
                do { return .report(try await client.request(.diagnose).fields) } catch let error as ControlError where error.code == .badRequest {
                    return .finding("the node at \(path) does not know diagnose: it runs an older huddle; restart it with this one")
                } catch {
                    return .finding("the node at \(path) failed to answer diagnose: \(error)")
                }
            }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return Task.isCancelled ? nil : .finding("the node at \(path) did not answer within \(deadline.components.seconds) s: it is stuck or overloaded")
            }
            var first: Outcome?
            while first == nil, let next = await group.next() { first = next }
            // Closing fails a request still waiting, so the group can end; the timer is cancelled.
            await client.close()
            group.cancelAll()
            return first ?? .finding("the node at \(path) did not answer")
        }
        return outcome
    }

    private func printMembers(_ report: JSONObject) {
        let rows = (report["members"]?.arrayValue ?? []).compactMap(\.objectValue).map { m in
            [(m["self"] == .bool(true) ? "*" : " ") + plain(m["member"]), plain(m["name"]), plain(m["addr"]), plain(m["state"]),
             m["linked"] == .bool(true) ? "yes" : "no", m["last_heard_ms"]?.intValue.map { "\($0) ms" } ?? "-",
             milliseconds(m["rtt_ms"]), milliseconds(m["clock_skew_ms"], signed: true), plain(m["epoch"])]
        }
        print("")
        printTable(header: [" MEMBER", "NAME", "ADDR", "STATE", "LINKED", "LAST HEARD", "RTT", "CLOCK SKEW", "EPOCH"], rows: rows)
    }

    /// A report's milliseconds as a table cell: "0.12 ms", "+12.3 s", "-".
    private func milliseconds(_ value: JSON?, signed: Bool = false) -> String {
        guard let ms = Diagnosis.number(value), ms.isFinite else { return "-" }
        let sign = signed && ms > 0 ? "+" : ""
        return abs(ms) >= 1000 ? "\(sign)\((ms / 100).rounded() / 10) s" : "\(sign)\((ms * 100).rounded() / 100) ms"
    }
}
