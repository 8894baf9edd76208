/// The numeric address of simulated member `index` (`10.x.y.z:port`): members refuse a record
/// whose address is not a numeric `host:port` (`HostPort.numeric`), in the simulator as in the node.
enum SimAddress {
    static func of(_ index: Int, port: Int) -> String {
        "10.\((index >> 16) & 255).\((index >> 8) & 255).\(index & 255):\(port)"
    }
}
