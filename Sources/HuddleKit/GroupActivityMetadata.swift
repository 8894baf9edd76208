import Foundation

/// What an activity says about itself, as SharePlay's `GroupActivityMetadata`: a title and a kind
/// people see. HuddleKit keeps it with the activity's type; it never travels (only the activity's
/// `Codable` value does), so it is what the local program declares.
///
/// Guarantees: every field Apple's has a default (`GroupActivityMetadata()` is valid, `type` is
/// `.generic`); the fields HuddleKit cannot show anywhere (a preview image) are left out.
public struct GroupActivityMetadata: Sendable, Equatable {
    /// What kind of thing the group does, as SharePlay's `ActivityType`.
    public struct ActivityType: RawRepresentable, Hashable, Sendable {
        /// The kind's name.
        public let rawValue: String
        /// A kind by name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Anything not listed.
        public static let generic = ActivityType(rawValue: "generic")
        /// Creating something together (DrawTogether).
        public static let createTogether = ActivityType(rawValue: "createTogether")
        /// Watching a video together.
        public static let watchTogether = ActivityType(rawValue: "watchTogether")
        /// Listening together.
        public static let listenTogether = ActivityType(rawValue: "listenTogether")
        /// Playing a game together.
        public static let playTogether = ActivityType(rawValue: "playTogether")
        /// Reading together.
        public static let readTogether = ActivityType(rawValue: "readTogether")
        /// Learning together.
        public static let learnTogether = ActivityType(rawValue: "learnTogether")
        /// Working out together.
        public static let workoutTogether = ActivityType(rawValue: "workoutTogether")
        /// Shopping together.
        public static let shopTogether = ActivityType(rawValue: "shopTogether")
        /// Exploring together.
        public static let exploreTogether = ActivityType(rawValue: "exploreTogether")
    }

    /// The activity's title, as people see it.
    public var title: String?
    /// A line under the title.
    public var subtitle: String?
    /// The kind of activity; `.generic` unless set.
    public var type: ActivityType = .generic
    /// Where someone without the app can go instead.
    public var fallbackURL: URL?
    /// Apple's TV hand-off flag: kept for source compatibility, it changes nothing here.
    public var supportsContinuationOnTV = false

    /// Metadata with no title and the `.generic` type.
    public init() {}
}
