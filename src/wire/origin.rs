//! DNS-rebinding protection: which `Host` and `Origin` a local HTTP listener serves
//! (docs/spec/mcp-2026-07-28.md §9 item 63: a request with a bad `Origin` gets 403;
//! docs/spec/mcp-2025-11-25.md, Streamable HTTP: servers MUST validate `Origin`).
//!
//! A page a browser loads from `evil.example` can make its own name resolve to 127.0.0.1 and
//! then talk to a local test server as if it were that site: the request then names
//! `evil.example` in `Host`, and in `Origin` when the browser sends one. A listener on a
//! loopback address therefore serves only requests whose `Host`, and `Origin` when present,
//! name a loopback host (`localhost`, an address in 127.0.0.0/8, `[::1]`) at any port (a
//! browser-based client on another local port is fine). A listener on another address serves
//! only that address. `allow_hosts` and `allow_origins` widen either default.
//!
//! The check is pure: every HTTP front of mcp-sim (`serve --http`, the reference upstream of
//! `check-proxy`, `record --http` and the probe's relay) asks [`OriginPolicy::check`] before it
//! handles a request.

use std::net::IpAddr;

/// Which hosts and origins a listener serves. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginPolicy {
    /// The address the listener is bound to (`None`: a loopback listener of no one address).
    pub bound: Option<IpAddr>,
    /// More hosts served (`--allow-host`): a name or address, with or without a port.
    pub allow_hosts: Vec<String>,
    /// More origins served (`--allow-origin`): `scheme://host[:port]`, compared exactly.
    pub allow_origins: Vec<String>,
}

/// The two headers the policy reads, as a request sent them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostAndOrigin {
    /// `Host`.
    pub host: Option<String>,
    /// `Origin`.
    pub origin: Option<String>,
}

impl HostAndOrigin {
    /// The two headers among `headers` (names compared without case).
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut found = HostAndOrigin::default();
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("host") {
                found.host = Some(value.to_owned());
            } else if name.eq_ignore_ascii_case("origin") {
                found.origin = Some(value.to_owned());
            }
        }
        found
    }
}

/// A request refused by the policy: the header at fault and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginRefusal {
    /// `Host` or `Origin`.
    pub header: &'static str,
    /// What the request sent (`None`: no `Host` at all).
    pub value: Option<String>,
}

impl std::fmt::Display for OriginRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(
                f,
                "Forbidden: {} {v:?} is not served here (DNS-rebinding protection)",
                self.header
            ),
            None => write!(f, "Forbidden: the request has no {} header", self.header),
        }
    }
}

impl OriginPolicy {
    /// The default policy of a listener bound to `addr`.
    pub fn for_listener(addr: IpAddr) -> Self {
        OriginPolicy {
            bound: Some(addr),
            ..OriginPolicy::default()
        }
    }

    fn loopback_listener(&self) -> bool {
        self.bound.is_none_or(|a| a.is_loopback())
    }

    /// Whether a request that sent `sent` is served.
    pub fn check_request(&self, sent: &HostAndOrigin) -> Result<(), OriginRefusal> {
        self.check(sent.host.as_deref(), sent.origin.as_deref())
    }

    /// Whether a request with these `Host` and `Origin` values is served.
    pub fn check(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), OriginRefusal> {
        let refuse = |header, value: Option<&str>| OriginRefusal {
            header,
            value: value.map(str::to_owned),
        };
        match host {
            Some(h) if self.serves_host(h) => {}
            h => return Err(refuse("Host", h)),
        }
        match origin {
            None => Ok(()),
            Some(o) if self.allow_origins.iter().any(|a| a.eq_ignore_ascii_case(o)) => Ok(()),
            Some(o) if origin_host(o).is_some_and(|h| self.serves_name(h)) => Ok(()),
            Some(o) => Err(refuse("Origin", Some(o))),
        }
    }

    fn serves_host(&self, host: &str) -> bool {
        let host = host.trim();
        let allowed = self
            .allow_hosts
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host));
        allowed || split_port(host).is_some_and(|name| self.serves_name(name))
    }

    /// Whether `name` (a host without its port) is one this listener answers to.
    fn serves_name(&self, name: &str) -> bool {
        let listed = self
            .allow_hosts
            .iter()
            .any(|a| split_port(a).is_some_and(|a| a.eq_ignore_ascii_case(name)));
        let bound = self
            .bound
            .is_some_and(|b| parse_ip(name).is_some_and(|ip| ip == b));
        listed || bound || (self.loopback_listener() && is_loopback_name(name))
    }
}

/// `localhost`, an address in 127.0.0.0/8, or `::1` (brackets taken off).
pub fn is_loopback_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("localhost") || parse_ip(name).is_some_and(|ip| ip.is_loopback())
}

fn parse_ip(name: &str) -> Option<IpAddr> {
    name.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The host of `host[:port]` or `[v6]:port`, if it is well formed.
fn split_port(host: &str) -> Option<&str> {
    if let Some(rest) = host.strip_prefix('[') {
        let (v6, tail) = rest.split_once(']')?;
        let port_ok = tail.is_empty() || tail.strip_prefix(':').is_some_and(is_port);
        return port_ok.then_some(v6);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && is_port(port) => Some(name),
        Some(_) => None,
        None => (!host.is_empty()).then_some(host),
    }
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// The host of an `Origin` value (`scheme://host[:port]`); `None` for `null` or anything
/// that is not of that shape.
fn origin_host(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.trim().split_once("://")?;
    if scheme.is_empty() || rest.contains('/') {
        return None;
    }
    split_port(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> OriginPolicy {
        OriginPolicy::for_listener("127.0.0.1".parse().unwrap())
    }

    #[test]
    fn a_loopback_listener_serves_loopback_names_at_any_port() {
        let p = loopback();
        for host in [
            "localhost:9000",
            "127.0.0.1:1",
            "[::1]:80",
            "localhost",
            "127.1.2.3:5",
        ] {
            assert_eq!(p.check(Some(host), None), Ok(()), "{host}");
        }
        assert_eq!(
            p.check(Some("127.0.0.1:9"), Some("http://localhost:3000")),
            Ok(())
        );
        assert_eq!(p.check(Some("127.0.0.1:9"), Some("https://[::1]")), Ok(()));
    }

    #[test]
    fn a_foreign_host_or_origin_is_refused_naming_the_header() {
        let p = loopback();
        let host = p.check(Some("evil.example"), None).unwrap_err();
        assert_eq!(host.header, "Host");
        let origin = p
            .check(Some("127.0.0.1:9"), Some("http://evil.example"))
            .unwrap_err();
        assert_eq!(origin.header, "Origin");
        assert!(origin.to_string().contains("evil.example"));
        assert_eq!(p.check(None, None).unwrap_err().header, "Host");
        for bad in [
            "null",
            "evil",
            "http://localhost.evil.example",
            "http://127.0.0.1/x",
        ] {
            assert!(p.check(Some("localhost"), Some(bad)).is_err(), "{bad}");
        }
        assert!(p.check(Some("localhost:99999x"), None).is_err());
    }

    #[test]
    fn another_address_serves_itself_and_what_is_allowed() {
        let mut p = OriginPolicy::for_listener("10.1.2.3".parse().unwrap());
        assert_eq!(p.check(Some("10.1.2.3:8000"), None), Ok(()));
        assert!(p.check(Some("localhost:8000"), None).is_err());
        p.allow_hosts.push("mcp.internal".into());
        p.allow_origins.push("https://app.internal".into());
        assert_eq!(
            p.check(Some("mcp.internal:8000"), Some("https://app.internal")),
            Ok(())
        );
        assert!(p
            .check(Some("mcp.internal"), Some("https://other.internal"))
            .is_err());
    }
}
