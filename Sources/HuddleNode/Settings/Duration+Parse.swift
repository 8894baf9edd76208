import Foundation

/// Seconds in a duration written as `90`, `90s`, `10m`, `2h` or `1d`; nil when it is not one.
public func parseDuration(_ text: String) -> Double? {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    var number = Substring(text.trimmingCharacters(in: .whitespaces))
    var scale = 1.0
    if let last = number.last, let unit = units[last] {
        scale = unit
        number = number.dropLast()
    }
    guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
    return value * scale
}
