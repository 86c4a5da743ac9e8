//! Who the client is when Bazaar runs behind a reverse proxy: the address rate limits and logs
//! use, and the request id a proxy may already have given the request. Forwarding headers are
//! believed only from the proxies listed in `server.trusted_proxies`; from anyone else they are
//! ignored, so a visitor cannot pick their own address to dodge a rate limit.

use std::net::IpAddr;

use actix_web::web;
use actix_web::HttpRequest;

use crate::config::TrustedProxies;

/// The client's address: the connecting peer, or, when the peer is a trusted proxy, the
/// nearest address in `X-Forwarded-For` that is not itself a trusted proxy (proxies append the
/// address they received a request from, so the list is read from the right).
pub(crate) fn client_ip(req: &HttpRequest) -> Option<IpAddr> {
    let peer = req.peer_addr().map(|a| a.ip())?;
    let Some(trusted) = req.app_data::<web::Data<TrustedProxies>>() else {
        return Some(peer);
    };
    Some(forwarded_client(trusted, peer, req))
}

/// Whether the connecting peer is a trusted proxy, whose forwarding headers are believed.
pub(crate) fn from_trusted_proxy(req: &HttpRequest) -> bool {
    match (req.peer_addr(), req.app_data::<web::Data<TrustedProxies>>()) {
        (Some(peer), Some(trusted)) => trusted.contains(peer.ip()),
        _ => false,
    }
}

fn forwarded_client(trusted: &TrustedProxies, peer: IpAddr, req: &HttpRequest) -> IpAddr {
    if !trusted.contains(peer) {
        return peer;
    }
    let mut client = peer;
    // Several X-Forwarded-For headers count as one list, in order.
    let hops = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    for hop in hops.into_iter().rev() {
        let Ok(address) = hop.parse::<IpAddr>() else {
            // A malformed entry was written by something untrusted: stop at the last good one.
            break;
        };
        client = address;
        if !trusted.contains(address) {
            break;
        }
    }
    client
}

/// A request id a trusted proxy sent (`X-Request-Id`), when it is a sane token: 1 to 64
/// characters of letters, digits, `-`, `_`, `.`. Anything else is replaced by a fresh id.
pub(crate) fn forwarded_request_id(req: &HttpRequest) -> Option<String> {
    if !from_trusted_proxy(req) {
        return None;
    }
    let id = req.headers().get("x-request-id")?.to_str().ok()?.trim();
    let sane = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    sane.then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn request(peer: &str, forwarded: &[&str], proxies: &str) -> HttpRequest {
        let mut req = TestRequest::default()
            .peer_addr(format!("{peer}:40000").parse().unwrap())
            .app_data(web::Data::new(TrustedProxies::parse(proxies).unwrap()));
        for value in forwarded {
            req = req.append_header(("X-Forwarded-For", *value));
        }
        req.to_http_request()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let req = request("203.0.113.9", &["198.51.100.1"], "127.0.0.1");
        assert_eq!(client_ip(&req), Some("203.0.113.9".parse().unwrap()));
    }

    #[test]
    fn behind_a_trusted_proxy_the_nearest_untrusted_hop_is_the_client() {
        // The visitor claims to be 1.1.1.1; nginx appended the address it really saw.
        let req = request(
            "127.0.0.1",
            &["1.1.1.1, 198.51.100.7", "10.0.0.2"],
            "127.0.0.1, 10.0.0.0/8",
        );
        assert_eq!(client_ip(&req), Some("198.51.100.7".parse().unwrap()));
    }

    #[test]
    fn a_malformed_hop_stops_the_walk_at_the_last_good_address() {
        let req = request("127.0.0.1", &["198.51.100.7, nonsense"], "127.0.0.1");
        assert_eq!(client_ip(&req), Some("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn a_request_id_is_kept_only_from_a_trusted_proxy_and_only_when_sane() {
        let trusted = TestRequest::default()
            .peer_addr("127.0.0.1:1".parse().unwrap())
            .app_data(web::Data::new(
                TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ))
            .insert_header(("X-Request-Id", "abc-123.x_y"))
            .to_http_request();
        assert_eq!(
            forwarded_request_id(&trusted).as_deref(),
            Some("abc-123.x_y")
        );
        let hostile = TestRequest::default()
            .peer_addr("127.0.0.1:1".parse().unwrap())
            .app_data(web::Data::new(
                TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ))
            .insert_header(("X-Request-Id", "a b\"c"))
            .to_http_request();
        assert_eq!(forwarded_request_id(&hostile), None);
        let stranger = TestRequest::default()
            .peer_addr("192.0.2.1:1".parse().unwrap())
            .app_data(web::Data::new(
                TrustedProxies::parse("127.0.0.0/8").unwrap(),
            ))
            .insert_header(("X-Request-Id", "abc"))
            .to_http_request();
        assert_eq!(forwarded_request_id(&stranger), None);
    }

    #[test]
    fn trusted_proxy_blocks_match_by_prefix() {
        let proxies = TrustedProxies::parse("10.1.0.0/16, ::1, 192.168.1.7").unwrap();
        assert!(proxies.contains("10.1.200.3".parse().unwrap()));
        assert!(!proxies.contains("10.2.0.1".parse().unwrap()));
        assert!(proxies.contains("::1".parse().unwrap()));
        assert!(proxies.contains("::ffff:192.168.1.7".parse().unwrap()));
        assert!(!proxies.contains("192.168.1.8".parse().unwrap()));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("example.com").is_err());
    }
}
