import Foundation

/// What stands between a lab host and the lab's bridge (the "internet"), issue 36 item 5.
enum Router: String, Sendable {
    /// Nothing: the host is on the bridge with its own address, reachable by everyone.
    case `public`
    /// A NAT router that masquerades keeping ports where it can: one mapping per inside
    /// address:port whatever the destination (endpoint-independent mapping).
    case easy
    /// A NAT router that masquerades with `random`: a new port for every destination
    /// (endpoint-dependent mapping).
    case hard
}

extension HostLab {
    /// The address of host `i` (`host`) or of its router (not `host`) on the private link between
    /// them. Each such link is inside this lab's own namespaces, so labs never see each other's.
    static func lanAddress(_ i: Int, host: Bool) -> String { "192.168.\(i + 1).\(host ? 2 : 1)" }

    /// Puts `host` behind a router namespace of its kind: the router's WAN interface on the
    /// bridge (`host.wan`), a private link to the host, the host's default route through it, and
    /// nftables rules of a home router: what the inside sends out is masqueraded (`random` for
    /// `.hard`), nothing is forwarded inbound that is not a reply (conntrack) or to the host's
    /// forwarded port (when `host.forwarded`: the WAN's 7400, TCP and UDP), and nothing
    /// unsolicited addressed to the router itself is taken (without that rule, a first probe that
    /// arrives before the inside host's own packet leaves a conntrack entry behind and the router
    /// maps the host's next packet to another port).
    func buildRouter(for host: Host, bridge: String, switchNamespace: String, short: String) throws {
        guard let wan = host.wan else { throw LabError(description: "host \(host.name) behind a router has no WAN address") }
        let router = "\(host.namespace)r"
        try addNamespace(router)
        let (wanIf, port) = ("hw\(short)r\(host.index)", "hs\(short)p\(host.index)")
        let lanIf = "hl\(short)l\(host.index)"
        try Shell.must([Shell.ip, "link", "add", wanIf, "netns", router, "type", "veth", "peer", "name", port, "netns", switchNamespace])
        try Shell.must([Shell.ip, "-n", switchNamespace, "link", "set", port, "master", bridge])
        try Shell.must([Shell.ip, "-n", switchNamespace, "link", "set", port, "up"])
        try Shell.must([Shell.ip, "-n", router, "addr", "add", "\(wan)/24", "dev", wanIf])
        try Shell.must([Shell.ip, "-n", router, "link", "set", wanIf, "up"])
        try Shell.must([Shell.ip, "link", "add", host.interface, "netns", host.namespace, "type", "veth", "peer", "name", lanIf, "netns", router])
        try Shell.must([Shell.ip, "-n", router, "addr", "add", "\(Self.lanAddress(host.index, host: false))/24", "dev", lanIf])
        try Shell.must([Shell.ip, "-n", router, "link", "set", lanIf, "up"])
        try Shell.must([Shell.ip, "-n", host.namespace, "addr", "add", "\(host.ip)/24", "dev", host.interface])
        try Shell.must([Shell.ip, "-n", host.namespace, "link", "set", host.interface, "up"])
        try Shell.must([Shell.ip, "-n", host.namespace, "route", "add", "default", "via", Self.lanAddress(host.index, host: false)])
        try Shell.must([Shell.ip, "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
        let masquerade = host.router == .hard ? "masquerade random" : "masquerade"
        // A port forward (`host.forwarded`): the WAN's port 7400, TCP and UDP, to the host's, as a
        // home router's "port forwarding" page sets it up; the forward chain lets those in.
        let forward = !host.forwarded ? "" : """
              chain pre {
                type nat hook prerouting priority dstnat; policy accept;
                iifname "\(wanIf)" tcp dport 7400 dnat to \(host.ip):7400
                iifname "\(wanIf)" udp dport 7400 dnat to \(host.ip):7400
              }
            """
        try Shell.must([Shell.ip, "netns", "exec", router, Shell.nft, "-f", "-"], input: """
            table ip hhnat {
              chain post {
                type nat hook postrouting priority srcnat; policy accept;
                oifname "\(wanIf)" \(masquerade)
              }
            \(forward)
            }
            table inet hhrouter {
              chain routed {
                type filter hook forward priority filter; policy drop;
                ct state established,related accept
                iifname "\(lanIf)" oifname "\(wanIf)" accept
                iifname "\(wanIf)" oifname "\(lanIf)" ct status dnat accept
              }
              chain tome {
                type filter hook input priority filter; policy drop;
                iifname "lo" accept
                ct state established,related accept
                iifname "\(lanIf)" accept
              }
            }

            """)
    }
}
