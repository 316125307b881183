//! The source address of a request, for the failed-authentication lockout (the api's keys and
//! the dashboard's sign-ins).
//!
//! Pure: no I/O. The peer address is the source unless the peer is a trusted proxy
//! (`APP_TRUSTED_PROXIES`); then `X-Forwarded-For` is read from the right, skipping trusted
//! hops, and the first untrusted hop is the source. A client can prepend anything to the
//! header, so hops left of the first untrusted one are never believed.

use std::{net::IpAddr, str::FromStr};

use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed: IPs and CIDR blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

/// An entry of `APP_TRUSTED_PROXIES` that is neither an IP nor a CIDR block.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither an IP address nor a CIDR block")]
pub struct InvalidProxy(String);

impl FromStr for TrustedProxies {
    type Err = InvalidProxy;

    /// Parses a comma-separated list such as `10.0.0.0/8, 192.168.1.7, fd00::/8`.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        list.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| InvalidProxy(entry.to_owned()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }
}

impl TrustedProxies {
    /// Whether `ip` is one of the trusted proxies. An IPv4-mapped IPv6 address counts as its
    /// IPv4 form.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// Whether the list is empty (then `X-Forwarded-For` is never read).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The source address of a request from `peer` carrying the `X-Forwarded-For` header values
/// `forwarded` (in the order received; several headers are read as one list).
///
/// When the peer is not trusted, or every hop is trusted, or a hop is unreadable, the answer
/// is the closest address known to be reliable.
pub fn client_ip<'a>(
    peer: IpAddr,
    forwarded: impl IntoIterator<Item = &'a str>,
    trusted: &TrustedProxies,
) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(peer) {
        return peer;
    }
    let hops: Vec<&str> = forwarded
        .into_iter()
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    let mut source = peer;
    for hop in hops.iter().rev() {
        let Some(ip) = parse_hop(hop) else {
            // Unreadable: nothing left of it can be trusted either.
            return source;
        };
        source = ip;
        if !trusted.contains(ip) {
            return ip;
        }
    }
    source
}

/// Reads one hop: a bare address, `[v6]`, `[v6]:port` or `v4:port`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Some(rest) = hop.strip_prefix('[') {
        let (inner, _) = rest.split_once(']')?;
        return inner.parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
    }
    let (host, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn proxies(s: &str) -> TrustedProxies {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_source_whatever_the_header_says() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(ip("203.0.113.9"), ["198.51.100.1"], &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        assert_eq!(
            client_ip(
                ip("127.0.0.1"),
                ["198.51.100.1"],
                &TrustedProxies::default()
            ),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_yields_the_first_untrusted_hop_from_the_right() {
        let trusted = proxies("10.0.0.0/8, 192.168.1.7");
        let header = "1.1.1.1, 198.51.100.1, 192.168.1.7, 10.1.2.3";
        assert_eq!(
            client_ip(ip("10.0.0.1"), [header], &trusted),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn several_header_lines_are_read_as_one_list() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(
                ip("10.0.0.1"),
                ["1.1.1.1", "198.51.100.1, 10.0.0.2"],
                &trusted
            ),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn when_every_hop_is_trusted_the_leftmost_is_the_source() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(ip("10.0.0.1"), ["10.0.0.3, 10.0.0.2"], &trusted),
            ip("10.0.0.3")
        );
    }

    #[test]
    fn a_trusted_peer_without_the_header_is_the_source() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(ip("10.0.0.1"), std::iter::empty(), &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn an_unreadable_hop_stops_the_walk_at_the_last_reliable_address() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(
                ip("10.0.0.1"),
                ["198.51.100.1, garbage, 10.0.0.2"],
                &trusted
            ),
            ip("10.0.0.2")
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), ["unknown"], &trusted),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn hops_with_ports_and_bracketed_ipv6_are_read() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(ip("10.0.0.1"), ["198.51.100.1:4711"], &trusted),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), ["[2001:db8::1]:443"], &trusted),
            ip("2001:db8::1")
        );
        assert_eq!(
            client_ip(ip("10.0.0.1"), ["2001:db8::2"], &trusted),
            ip("2001:db8::2")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_ipv4() {
        let trusted = proxies("10.0.0.0/8");
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.1"), ["::ffff:198.51.100.1"], &trusted),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn the_trusted_list_accepts_ips_and_cidrs_and_rejects_anything_else() {
        let trusted = proxies(" 10.0.0.0/8 ,192.168.1.7,, fd00::/8 ");
        assert!(trusted.contains(ip("10.200.0.1")));
        assert!(trusted.contains(ip("192.168.1.7")));
        assert!(!trusted.contains(ip("192.168.1.8")));
        assert!(trusted.contains(ip("fd00::1")));
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
        assert!("proxy.internal".parse::<TrustedProxies>().is_err());
        assert!("".parse::<TrustedProxies>().unwrap().is_empty());
    }
}
