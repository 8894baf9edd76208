import HuddleControl
import HuddleCore

extension Node {
    /// Every refusal so far, the core's and the shell's, by reason; every reason is listed (0 too).
    func refusalsJSON() -> JSONObject {
        let all = core.refusals.adding(counters.refusals)
        var object = JSONObject()
        for reason in Refusal.allCases.sorted() { object[reason.rawValue] = .int(Int64(all[reason])) }
        return object
    }

    /// Logs the first refusal of a reason; later ones are only counted (`stats` → `refused`).
    func logFirstRefusal(_ reason: Refusal) {
        log.warning("refused input from a peer (\(reason.rawValue)); further ones are counted in stats.refused")
    }
}
