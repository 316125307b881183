//! The one URL guard: every media URL, webhook URL and address connected to passes here.
//!
//! A URL is allowed when its scheme is allowed (http/https for media, https for webhooks), it
//! has no userinfo, its host resolves, and every address it resolves to is public unicast.
//! Numeric host spellings (decimal, octal, hex, short forms) are parsed by the WHATWG URL
//! rules into the address they mean, so `http://2130706433/` is `127.0.0.1`. The resolver is
//! injectable so tests can map a name to a private address.

use std::{
    collections::HashMap,
    future::Future,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    pin::Pin,
    sync::Arc,
    time::Duration,
};

use url::{Host, Url};

/// How long resolving a host may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all.
    #[error("not a valid absolute URL")]
    Malformed,
    /// Longer than [`MAX_URL_LEN`].
    #[error("the URL is longer than {MAX_URL_LEN} bytes")]
    TooLong,
    /// A scheme other than the ones allowed.
    #[error("the URL scheme must be {0}")]
    Scheme(&'static str),
    /// `user:password@` in the URL.
    #[error("the URL must not contain a user name or password")]
    Userinfo,
    /// No host name.
    #[error("the URL has no host")]
    NoHost,
    /// The host did not resolve.
    #[error("the URL's host does not resolve")]
    Unresolvable,
    /// The host resolves to an address that is not public.
    #[error("the URL resolves to a private or internal network address")]
    NotPublic,
}

/// Which schemes a use allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlUse {
    /// Media to fetch: http or https.
    Media,
    /// Webhook targets: https only.
    Webhook,
}

/// A URL that passed, with the addresses it resolved to (connect only to these).
#[derive(Debug, Clone)]
pub struct CheckedUrl {
    /// The parsed URL.
    pub url: Url,
    /// Its resolved addresses, each already checked.
    pub addrs: Vec<SocketAddr>,
}

/// Boxed future of a resolution.
pub type ResolveFuture<'a> =
    Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Resolves host names to addresses.
pub trait Resolver: Send + Sync {
    /// All addresses of `host`.
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a>;
}

/// The system resolver (getaddrinfo through tokio).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host, 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// Fixed names first, then another resolver: lets tests map a name to any address.
pub struct OverrideResolver {
    fixed: HashMap<String, Vec<IpAddr>>,
    fallback: Arc<dyn Resolver>,
}

impl OverrideResolver {
    /// `fixed` names (lowercase) answered as given; others go to `fallback`.
    pub fn new(fixed: HashMap<String, Vec<IpAddr>>, fallback: Arc<dyn Resolver>) -> Self {
        Self { fixed, fallback }
    }
}

impl Resolver for OverrideResolver {
    fn resolve<'a>(&'a self, host: &'a str) -> ResolveFuture<'a> {
        match self.fixed.get(&host.to_ascii_lowercase()) {
            Some(addrs) => {
                let addrs = addrs.clone();
                Box::pin(async move { Ok(addrs) })
            }
            None => self.fallback.resolve(host),
        }
    }
}

/// The guard, shared by the api, the workers and the dispatcher.
#[derive(Clone)]
pub struct UrlGuard {
    resolver: Arc<dyn Resolver>,
    allow_private: bool,
}

impl std::fmt::Debug for UrlGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlGuard")
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl UrlGuard {
    /// A guard using `resolver`. `allow_private` (development and tests only) lets URLs
    /// reach loopback and private addresses.
    pub fn new(resolver: Arc<dyn Resolver>, allow_private: bool) -> Self {
        Self {
            resolver,
            allow_private,
        }
    }

    /// A guard on the system resolver.
    pub fn system(allow_private: bool) -> Self {
        Self::new(Arc::new(SystemResolver), allow_private)
    }

    /// Whether private addresses are let through.
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Checks `raw` for `use_`, resolving its host.
    pub async fn check(&self, raw: &str, use_: UrlUse) -> Result<CheckedUrl, UrlError> {
        let url = parse(raw, use_)?;
        let addrs = self.resolve_checked(&url).await?;
        Ok(CheckedUrl { url, addrs })
    }

    /// Resolves an already parsed URL's host and checks every address (for each redirect hop
    /// and each connection).
    pub async fn resolve_checked(&self, url: &Url) -> Result<Vec<SocketAddr>, UrlError> {
        let port = url.port_or_known_default().ok_or(UrlError::Malformed)?;
        let ips = match url.host().ok_or(UrlError::NoHost)? {
            Host::Ipv4(ip) => vec![IpAddr::V4(ip)],
            Host::Ipv6(ip) => vec![IpAddr::V6(ip)],
            Host::Domain(name) if name.trim_end_matches('.').is_empty() => {
                return Err(UrlError::NoHost)
            }
            Host::Domain(name) => self.resolve_host(name).await?,
        };
        self.check_ips(&ips)?;
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }

    /// Resolves a bare host name and checks every address: the hook for HTTP clients, so every
    /// address connected to is checked at connect time (no DNS rebinding).
    pub async fn resolve_host(&self, host: &str) -> Result<Vec<IpAddr>, UrlError> {
        let host = host.trim_end_matches('.');
        let ips = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => {
                match tokio::time::timeout(RESOLVE_TIMEOUT, self.resolver.resolve(host)).await {
                    Ok(Ok(ips)) if !ips.is_empty() => ips,
                    _ => return Err(UrlError::Unresolvable),
                }
            }
        };
        self.check_ips(&ips)?;
        Ok(ips)
    }

    /// Checks addresses (all must be public unless private ones are allowed).
    pub fn check_ips(&self, ips: &[IpAddr]) -> Result<(), UrlError> {
        let allowed =
            |ip: IpAddr| is_public(ip) || (self.allow_private && is_development_reachable(ip));
        if ips.iter().all(|ip| allowed(*ip)) {
            Ok(())
        } else {
            Err(UrlError::NotPublic)
        }
    }
}

/// Parses `raw` and applies the rules that need no resolution.
pub fn parse(raw: &str, use_: UrlUse) -> Result<Url, UrlError> {
    let raw = raw.trim();
    if raw.len() > MAX_URL_LEN {
        return Err(UrlError::TooLong);
    }
    let url = Url::parse(raw).map_err(|_| UrlError::Malformed)?;
    match (use_, url.scheme()) {
        (UrlUse::Media, "http" | "https") | (UrlUse::Webhook, "https") => {}
        (UrlUse::Media, _) => return Err(UrlError::Scheme("http or https")),
        (UrlUse::Webhook, _) => return Err(UrlError::Scheme("https")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Userinfo);
    }
    if url.host().is_none() {
        return Err(UrlError::NoHost);
    }
    Ok(url)
}

/// What `APP_ALLOW_PRIVATE_URLS` opens for development and tests: loopback, private
/// (RFC 1918), CGNAT and unique-local addresses. Link-local addresses (the cloud metadata
/// address 169.254.169.254 among them), the metadata addresses inside the opened ranges
/// (100.100.100.200, fd00:ec2::254), multicast and unspecified addresses stay refused even
/// then.
pub fn is_development_reachable(ip: IpAddr) -> bool {
    match ip {
        // Alibaba's metadata address sits inside CGNAT.
        IpAddr::V4(v4) if v4 == Ipv4Addr::new(100, 100, 100, 200) => false,
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback() || v4.is_private() || (a == 100 && (64..128).contains(&b))
        }
        // AWS's IPv6 metadata address sits inside unique-local.
        IpAddr::V6(v6) if v6.segments() == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] => false,
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_development_reachable(IpAddr::V4(v4)))
        }
    }
}

/// A reqwest client builder whose every connection is checked by `guard` at connect time (its
/// resolver is the guard's), with redirects off (callers follow them hop by hop, checking
/// each), no environment proxies, and `extra_ca_pem` trusted besides the system roots.
pub fn http_client_builder(
    guard: &UrlGuard,
    extra_ca_pem: Option<&[u8]>,
) -> Result<reqwest::ClientBuilder, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardResolver(guard.clone())));
    if let Some(pem) = extra_ca_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

/// Resolves through the URL guard, so a name that resolves to a refused address fails at
/// connect time.
struct GuardResolver(UrlGuard);

impl reqwest::dns::Resolve for GuardResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        Box::pin(async move {
            let ips = guard.resolve_host(name.as_str()).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// Whether `ip` is public unicast: not loopback, private, link-local, CGNAT, unique-local,
/// multicast, unspecified, documentation, benchmarking, reserved, nor an IPv6 form
/// (mapped, compatible, 6to4, NAT64, Teredo) of such an address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                   // "this network", unspecified
        || a == 10                             // private
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10 (also Alibaba metadata)
        || a == 127                            // loopback
        || (a == 169 && b == 254)              // link-local, cloud metadata 169.254.169.254
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)      // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)      // TEST-NET-1
        || (a == 192 && b == 88 && c == 99)    // 6to4 relay anycast
        || (a == 192 && b == 168)              // private
        || (a == 198 && (b == 18 || b == 19))  // benchmarking
        || (a == 198 && b == 51 && c == 100)   // TEST-NET-2
        || (a == 203 && b == 0 && c == 113)    // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    let embedded_v4 =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0) {
        // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d, includes :: and ::1).
        return seg[5] == 0xffff && is_public_v4(embedded_v4(seg[6], seg[7]));
    }
    if seg[0] == 0x0064 && seg[1] == 0xff9b {
        // NAT64: 64:ff9b::/96 embeds an IPv4 address; 64:ff9b:1::/48 is for local use.
        return seg[2..6] == [0; 4] && is_public_v4(embedded_v4(seg[6], seg[7]));
    }
    if seg[0] == 0x2002 {
        // 6to4 embeds the IPv4 address in bits 16..48.
        return is_public_v4(embedded_v4(seg[1], seg[2]));
    }
    let first = seg[0];
    !((first & 0xfe00) == 0xfc00          // unique local fc00::/7 (incl. fd00:ec2::254 metadata)
        || (first & 0xffc0) == 0xfe80     // link-local
        || (first & 0xffc0) == 0xfec0     // site-local (deprecated)
        || (first & 0xff00) == 0xff00     // multicast
        || (first == 0x2001 && seg[1] < 0x0200) // 2001::/23: Teredo, benchmarking, ORCHID…
        || (first == 0x2001 && seg[1] == 0x0db8) // documentation
        || (first & 0xfff0) == 0x3ff0     // documentation 3fff::/20
        || (first == 0x0100 && seg[1..4] == [0; 3]) // discard-only 100::/64
        || first == 0) // the rest of ::/16 (reserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.215.14",
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn non_public_addresses_are_recognised() {
        for ip in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.100.100.200",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.1.1.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "100::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn embedded_public_ipv4_in_ipv6_forms_passes() {
        for ip in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
