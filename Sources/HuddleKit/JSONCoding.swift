import Foundation
import HuddleControl

/// Turns `Codable` values into the control protocol's JSON and back, through Foundation's coders.
enum JSONCoding {
    static func json(_ value: some Encodable) throws(HuddleKitError) -> JSON {
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch { throw .encodingFailed("\(type(of: value)): \(error)") }
        do { return try JSON.parse(Array(data)) } catch { throw .encodingFailed("\(type(of: value)): \(error)") }
    }

    static func decode<T: Decodable>(_ type: T.Type, from json: JSON) throws(HuddleKitError) -> T {
        var bytes: [UInt8] = []
        json.write(into: &bytes)
        do { return try JSONDecoder().decode(T.self, from: Data(bytes)) } catch {
            throw .decodingFailed("\(T.self): \(describe(error))")
        }
    }

    /// One line for a DecodingError (Foundation's description is a paragraph).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return String(describing: error) }
        switch error {
        case let .keyNotFound(key, _): return "no field '\(key.stringValue)'"
        case let .typeMismatch(type, context): return "\(path(context)) is not \(type)"
        case let .valueNotFound(type, context): return "\(path(context)) has no \(type)"
        case let .dataCorrupted(context): return "\(path(context)): \(context.debugDescription)"
        @unknown default: return String(describing: error)
        }
    }

    private static func path(_ context: DecodingError.Context) -> String {
        context.codingPath.isEmpty ? "the value" : "'" + context.codingPath.map(\.stringValue).joined(separator: ".") + "'"
    }
}
