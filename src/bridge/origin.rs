//! Who may talk to the bridge.
//!
//! The bridge runs code in Roblox Studio, so reaching it is equivalent to running code
//! on the developer's machine. It binds loopback only, but that alone does not stop a
//! web page: a page can open `ws://127.0.0.1:38741` directly (browsers do not apply the
//! same-origin policy to WebSockets), and a DNS-rebinding attack can point a hostile
//! domain at 127.0.0.1 so that even plain HTTP requests look same-origin to the browser.
//!
//! Two checks close both doors, applied to every request before any upgrade:
//! - `Host` must name loopback (`127.0.0.1`, `localhost` or `[::1]`, with our port or
//!   none). A rebound hostile domain still sends its own name as `Host`.
//! - `Origin`, when present, must be an http(s) loopback origin. Browsers always send
//!   `Origin` on WebSocket handshakes, so a page on any other site is refused; Studio's
//!   `WebStreamClient` and our own peers send none. `Origin: null` (sandboxed frames,
//!   `file://` pages) is refused too.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

const LOOPBACK_HOSTS: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// Checks the `Host` and `Origin` headers of a request to the bridge on `port`.
/// On refusal, returns the reason (sent with the 403 and logged).
pub fn check(headers: &HeaderMap, port: u16) -> Result<(), String> {
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host.to_str().map_err(|_| "Host header is not text".to_string())?,
        (None, _) => return Err("missing Host header".into()),
        (Some(_), Some(_)) => return Err("more than one Host header".into()),
    };
    if !host_allowed(host, port) {
        return Err(format!("Host {host:?} is not a loopback address of this bridge"));
    }
    let mut origins = headers.get_all(ORIGIN).iter();
    match (origins.next(), origins.next()) {
        (None, _) => Ok(()),
        (Some(origin), None) => {
            let origin = origin.to_str().map_err(|_| "Origin header is not text".to_string())?;
            if origin_allowed(origin) {
                Ok(())
            } else {
                Err(format!(
                    "Origin {origin:?} is not a loopback origin; browsers may not reach Studio"
                ))
            }
        }
        (Some(_), Some(_)) => Err("more than one Origin header".into()),
    }
}

fn host_allowed(host: &str, port: u16) -> bool {
    let (name, host_port) = split_port(host);
    LOOPBACK_HOSTS.contains(&name) && host_port.is_none_or(|p| p == port.to_string())
}

fn origin_allowed(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let (name, port) = split_port(rest);
    LOOPBACK_HOSTS.contains(&name) && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits `name[:port]`, keeping the brackets of an IPv6 literal in the name.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (name, rest) = authority.split_at(end + 1);
                (name, rest.strip_prefix(':'))
            }
            None => (authority, None),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn loopback_hosts_are_allowed_with_our_port_or_none() {
        for host in [
            "127.0.0.1:38741",
            "127.0.0.1",
            "localhost:38741",
            "localhost",
            "[::1]:38741",
            "[::1]",
        ] {
            assert_eq!(check(&headers(&[("host", host)]), 38741), Ok(()), "{host}");
        }
    }

    #[test]
    fn other_hosts_and_ports_are_refused() {
        for host in [
            "evil.example:38741",
            "127.0.0.1:9999",
            "127.0.0.2:38741",
            "localhost.evil.example",
            "[::2]:38741",
            "",
        ] {
            assert!(check(&headers(&[("host", host)]), 38741).is_err(), "{host}");
        }
        assert!(check(&headers(&[]), 38741).is_err(), "missing Host");
        assert!(
            check(&headers(&[("host", "127.0.0.1"), ("host", "127.0.0.1")]), 38741).is_err(),
            "two Hosts"
        );
    }

    #[test]
    fn loopback_origins_are_allowed_on_any_port() {
        for origin in [
            "http://127.0.0.1",
            "http://localhost:3000",
            "https://[::1]:8443",
            "http://127.0.0.1:38741",
        ] {
            assert_eq!(
                check(&headers(&[("host", "127.0.0.1"), ("origin", origin)]), 38741),
                Ok(()),
                "{origin}"
            );
        }
    }

    #[test]
    fn browser_origins_are_refused() {
        for origin in [
            "null",
            "https://evil.example",
            "http://localhost.evil.example",
            "file://",
            "chrome-extension://abc",
            "http://127.0.0.1.evil.example",
            "ws://127.0.0.1",
            "http://localhost:",
        ] {
            assert!(
                check(&headers(&[("host", "127.0.0.1"), ("origin", origin)]), 38741).is_err(),
                "{origin}"
            );
        }
    }
}
