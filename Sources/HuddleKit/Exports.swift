// Apple's GroupActivities makes Foundation's types (`Data`, `URL`, `UUID`) visible to a file that
// imports it alone; HuddleKit does the same, so such a file compiles with only `import HuddleKit`.
@_exported import Foundation
