/// The numeric address (`10.x.y.z:port`) of the member a test calls `name`: members refuse a record
/// whose address is a hostname (`HostPort.numeric`). The same name always gives the same address.
func testAddr(_ name: String, port: Int = 1) -> String {
    var hash: UInt32 = 2_166_136_261
    for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
    return "10.\(hash >> 16 & 255).\(hash >> 8 & 255).\(hash & 255):\(port)"
}
