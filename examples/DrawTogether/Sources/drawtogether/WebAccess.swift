import Foundation
import Hummingbird

/// Who may use the page `drawtogether serve` serves: only the browser the user opened the printed
/// URL in. Any other web page open in that browser can send requests to a loopback address too
/// (cross-site WebSocket hijacking, a no-cors POST, DNS rebinding); this refuses them:
///
/// - a per-launch secret **token** (printed in the URL): `GET /?token=T` sets it as a cookie
///   (`HttpOnly`, `SameSite=Strict`, so no other site's request carries it), and every request —
///   the page, its state, images, uploads, the WebSocket — must carry it (cookie or `token=`);
/// - the **Host** header names an IP address, `localhost`, or the `--http` host: a DNS name that
///   an attacker points at 127.0.0.1 (rebinding) is refused;
/// - an **Origin** header, when present, must be this server's own: `http://` + the request's Host,
///   port included (a page served from another port of this host is the same *site*, so the cookie
///   alone would not keep it out);
/// - every response says `nosniff`, sends no referrer (the URL holds the token) and may not be framed.
///
/// Guarantees: a request failing any check gets 403 and reaches no route. Immutable, so `Sendable`.
struct WebAccess: Sendable {
    let token: String
    let servedHost: String
    static let cookieName = "dt_token"

    init(servedHost: String, token: String = WebAccess.newToken()) {
        self.servedHost = servedHost.lowercased()
        self.token = token
    }

    /// 32 random bytes, hex.
    static func newToken() -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0 ... .max, using: &rng)) }.joined()
    }

    /// Why `request` is refused, or nil when it may go on.
    func refusal(_ request: Request) -> String? {
        guard let authority = request.head.authority, isAllowed(host: Self.hostname(of: authority)) else {
            return "this page is served to its own address only (Host)"
        }
        // Another port on this host is another origin (but the same site: it would carry the cookie).
        if let origin = request.headers[.origin], origin.lowercased() != "http://" + authority.lowercased() {
            return "requests from other sites are refused (Origin)"
        }
        guard carriesToken(request) else { return "open the URL drawtogether serve printed (it holds the page's token)" }
        return nil
    }

    func isAllowed(host: String) -> Bool {
        let host = host.lowercased()
        if host == servedHost || host == "localhost" { return true }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, bare, &v4) == 1 || inet_pton(AF_INET6, bare, &v6) == 1
    }

    /// The host of `host:port`, `[v6]:port` or `host`.
    static func hostname(of authority: String) -> String {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") { return String(authority[...close]) }
        guard let colon = authority.lastIndex(of: ":") else { return authority }
        return String(authority[..<colon])
    }

    func carriesToken(_ request: Request) -> Bool {
        if let given = request.uri.queryParameters.get("token"), Self.same(given, token) { return true }
        for field in request.headers[values: .cookie] {
            for pair in field.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == Self.cookieName, Self.same(String(parts[1]), token) { return true }
            }
        }
        return false
    }

    /// Compares without stopping at the first difference.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The headers every response carries; the cookie when the request brought the token in its URL.
    func harden(_ response: inout Response, for request: Request) {
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        response.headers[.init("X-Frame-Options")!] = "DENY"
        if request.uri.queryParameters.get("token") != nil {
            response.headers[.setCookie] = "\(Self.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict"
        }
    }
}

/// `WebAccess` on every route of a router.
struct WebAccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: WebAccess

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let reason = access.refusal(request) {
            var response = Response(status: .forbidden, headers: [.contentType: "text/plain; charset=utf-8"],
                                    body: .init(byteBuffer: ByteBuffer(string: reason + "\n")))
            access.harden(&response, for: request)
            response.headers[.setCookie] = nil
            return response
        }
        var response = try await next(request, context)
        access.harden(&response, for: request)
        return response
    }
}
