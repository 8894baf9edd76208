/// What a page sends over its WebSocket: `{"op":"point","stroke":ID,"x":X,"y":Y}` (one more point
/// of the stroke the pointer draws), `{"op":"cursor","x":X,"y":Y}` (where the pointer is; without
/// x and y: it left the canvas) or `{"op":"reset"}`.
struct PageCommand: Decodable {
    let op: String
    let stroke: String?
    let x: Double?
    let y: Double?
}
