use super::flight::{bits, MESSAGE_MAX, RECORD_MAX};
use super::*;

fn record(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![kind, 3, 3];
    r.extend_from_slice(&(body.len() as u16).to_be_bytes());
    r.extend_from_slice(body);
    r
}

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    m.extend_from_slice(body);
    m
}

/// A ServerHello body: version, suite and raw extensions.
fn server_hello(version: u16, suite: u16, ext: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut b = version.to_be_bytes().to_vec();
    b.extend_from_slice(&[7; 32]);
    b.push(0);
    b.extend_from_slice(&suite.to_be_bytes());
    b.push(0);
    let mut e = Vec::new();
    for (kind, data) in ext {
        e.extend_from_slice(&kind.to_be_bytes());
        e.extend_from_slice(&(data.len() as u16).to_be_bytes());
        e.extend_from_slice(data);
    }
    b.extend_from_slice(&(e.len() as u16).to_be_bytes());
    b.extend_from_slice(&e);
    b
}

fn lab_der() -> Vec<u8> {
    let pem = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/lab-cert.pem")).unwrap();
    crate::wire::cert::tests::pem_to_der(&pem)
}

fn certificate(chain: &[&[u8]]) -> Vec<u8> {
    let mut list = Vec::new();
    for c in chain {
        list.extend_from_slice(&(c.len() as u32).to_be_bytes()[1..]);
        list.extend_from_slice(c);
    }
    let mut b = (list.len() as u32).to_be_bytes()[1..].to_vec();
    b.extend_from_slice(&list);
    b
}

/// TLS 1.0, TLS_DHE_RSA_WITH_AES_128_CBC_SHA, a 1024-bit prime, the lab chain.
fn dhe_flight() -> Vec<u8> {
    let der = lab_der();
    let mut ske = Vec::new();
    for (len, fill) in [(128usize, 0xc3u8), (1, 2), (128, 0x55)] {
        ske.extend_from_slice(&(len as u16).to_be_bytes());
        ske.extend(std::iter::repeat_n(fill, len));
    }
    ske.extend_from_slice(&[0, 4, 1, 2, 3, 4]);
    let mut hs = message(2, &server_hello(TLS10, 0x0033, &[(0xff01, vec![0]), (0x0017, vec![])]));
    hs.extend(message(11, &certificate(&[&der])));
    hs.extend(message(12, &ske));
    hs.extend(message(14, &[]));
    record(22, &hs)
}

#[test]
fn a_flight_reads_the_same_in_any_split() {
    let bytes = dhe_flight();
    let whole = FlightReader::new().push(&bytes).unwrap().unwrap();
    assert_eq!((whole.version, whole.suite), (TLS10, 0x0033));
    assert_eq!(whole.extensions, [0xff01, 0x0017]);
    assert_eq!(whole.chain, [lab_der()]);
    assert_eq!(whole.kx, Some(KeyExchange::Dh(1024)));
    let mut r = FlightReader::new();
    let mut got = None;
    for b in &bytes {
        if let Some(f) = r.push(std::slice::from_ref(b)).unwrap() {
            got = Some(f);
        }
    }
    assert_eq!(got, Some(whole));
}

#[test]
fn messages_split_over_records_are_joined() {
    let mut hs = message(2, &server_hello(TLS12, 0xc02f, &[]));
    hs.extend(message(11, &certificate(&[&lab_der()])));
    hs.extend(message(14, &[]));
    let bytes: Vec<u8> = hs.chunks(100).flat_map(|c| record(22, c)).collect();
    let f = FlightReader::new().push(&bytes).unwrap().unwrap();
    assert_eq!(f.chain.len(), 1);
}

#[test]
fn the_flight_gives_the_tls_object() {
    let f = FlightReader::new().push(&dhe_flight()).unwrap().unwrap();
    let t = info(&f, "hello");
    assert_eq!(t.path, "hello");
    assert_eq!((t.version.as_str(), t.cipher.as_str()), ("TLSv1.0", "TLS_DHE_RSA_WITH_AES_128_CBC_SHA"));
    assert_eq!((t.kx.as_str(), t.group.as_deref(), t.kx_bits), ("dhe", None, 1024));
    assert_eq!(t.chain[0].subject, "CN=lab.moonscan.test, O=moonscan lab");
    assert_eq!(t.der, [lab_der()]);
    assert!(t.ja4s.starts_with("t100200_0033_"), "{}", t.ja4s);
}

#[test]
fn rsa_key_exchange_takes_the_certificate_key_size() {
    let mut hs = message(2, &server_hello(TLS11, 0x000a, &[]));
    hs.extend(message(11, &certificate(&[&lab_der()])));
    hs.extend(message(14, &[]));
    let t = info(&FlightReader::new().push(&record(22, &hs)).unwrap().unwrap(), "hello");
    assert_eq!((t.version.as_str(), t.cipher.as_str()), ("TLSv1.1", "TLS_RSA_WITH_3DES_EDE_CBC_SHA"));
    assert_eq!((t.kx.as_str(), t.kx_bits), ("rsa", 2048));
}

#[test]
fn ecdhe_names_its_group() {
    let mut ske = vec![3, 0, 23, 65, 4];
    ske.extend([9; 64]);
    ske.extend_from_slice(&[0, 0]);
    let mut hs = message(2, &server_hello(TLS12, 0xc02f, &[]));
    hs.extend(message(11, &certificate(&[&lab_der()])));
    hs.extend(message(12, &ske));
    hs.extend(message(14, &[]));
    let t = info(&FlightReader::new().push(&record(22, &hs)).unwrap().unwrap(), "hello");
    assert_eq!((t.kx.as_str(), t.group.as_deref(), t.kx_bits), ("ecdhe", Some("secp256r1"), 256));
}

#[test]
fn tls13_ends_at_the_server_hello() {
    let ext = [(43, vec![3, 4]), (51, vec![0, 29, 0, 32].into_iter().chain([1; 32]).collect())];
    let bytes = record(22, &message(2, &server_hello(TLS12, 0x1301, &ext)));
    let f = FlightReader::new().push(&bytes).unwrap().unwrap();
    assert_eq!((f.legacy_version, f.version, f.kx), (TLS12, TLS13, Some(KeyExchange::Group(29))));
    let t = info(&f, "hello");
    assert_eq!(
        (t.version.as_str(), t.kx.as_str(), t.group.as_deref(), t.kx_bits),
        ("TLSv1.3", "ecdhe", Some("x25519"), 253)
    );
    assert!(t.chain.is_empty());
}

#[test]
fn fingerprints_follow_their_specifications() {
    // JA4S's own example: TLS 1.2, c030, extensions 0005,0017,ff01,0000.
    let f = Flight {
        legacy_version: TLS12,
        version: TLS12,
        suite: 0xc030,
        extensions: vec![0x0005, 0x0017, 0xff01, 0x0000],
        ..Flight::default()
    };
    assert_eq!(ja4s(&f), "t120400_c030_4e8089b08790");
    assert_eq!(ja3s(&f), "7d8fd34fdb13a7fff30d5a52846b6c4c");
    // GREASE is left out; ALPN gives its first and last characters.
    let g = Flight { extensions: vec![0x0a0a, 0x0005, 0x0017, 0xff01, 0x0000], alpn: Some("h2".into()), ..f.clone() };
    assert_eq!(ja4s(&g), "t1204h2_c030_4e8089b08790");
    assert_eq!(ja3s(&g), ja3s(&f));
    // Not alphanumeric: the first hex digit of the first byte (0x01) and
    // the last of the last (0xbf, the end of U+00FF in UTF-8).
    let odd = Flight { alpn: Some("\u{1}x\u{ff}".into()), extensions: vec![], ..f };
    assert_eq!(&ja4s(&odd)[..7], "t12000f");
    assert!(ja4s(&odd).ends_with("_000000000000"));
}

#[test]
fn hostile_lengths_are_refused_from_their_headers() {
    // A Certificate message claiming 16 MB: refused before any of its body.
    let mut hs = message(2, &server_hello(TLS12, 0xc02f, &[]));
    hs.extend_from_slice(&[11, 0xff, 0xff, 0xff]);
    let e = FlightReader::new().push(&record(22, &hs)).unwrap_err();
    assert!(matches!(e, HelloError::TooLarge { claimed: 0xff_ffff, limit: MESSAGE_MAX, .. }), "{e}");
    assert!(e.to_string().contains("Certificate message claims 16777215 bytes"), "{e}");
    // A record longer than TLS allows.
    let e = FlightReader::new().push(&[22, 3, 1, 0xff, 0xff]).unwrap_err();
    assert!(matches!(e, HelloError::TooLarge { limit: RECORD_MAX, .. }), "{e}");
}

#[test]
fn a_chain_of_thousands_of_empty_certificates_keeps_sixteen_and_counts_the_rest() {
    let lab = lab_der();
    let mut chain: Vec<&[u8]> = vec![&lab];
    chain.extend(std::iter::repeat_n(&[][..], 80_000));
    let mut hs = message(2, &server_hello(TLS12, 0xc02f, &[]));
    hs.extend(message(11, &certificate(&chain)));
    hs.extend(message(14, &[]));
    let bytes: Vec<u8> = hs.chunks(16384).flat_map(|c| record(22, c)).collect();
    let f = FlightReader::new().push(&bytes).unwrap().unwrap();
    assert_eq!((f.chain.len(), f.chain_sent), (crate::wire::cert::MAX_CHAIN, 80_001));
    let t = info(&f, "hello");
    assert_eq!((t.chain.len(), t.der.len(), t.chain_cut), (16, 16, 79_985));
    assert_eq!(t.chain[0].subject, "CN=lab.moonscan.test, O=moonscan lab");
    assert!(t.chain[1].error.is_some());
    // A list whose entries overrun it is refused.
    let mut body = certificate(&[&lab]);
    body[2] -= 1;
    let mut hs = message(2, &server_hello(TLS12, 0xc02f, &[]));
    hs.extend(message(11, &body));
    assert!(matches!(FlightReader::new().push(&record(22, &hs)), Err(HelloError::Malformed(_))));
}

#[test]
fn a_huge_extension_block_is_read_or_refused_within_bounds() {
    // 60 KB of extensions, over four records.
    let ext: Vec<(u16, Vec<u8>)> = (0..60).map(|i| (0x1000 + i, vec![0x41; 1000])).collect();
    let hs = message(2, &server_hello(TLS12, 0xc02f, &ext));
    let bytes: Vec<u8> = hs.chunks(16000).flat_map(|c| record(22, c)).collect();
    let mut r = FlightReader::new();
    assert_eq!(r.push(&bytes).unwrap(), None);
    let mut end = message(11, &certificate(&[&lab_der()]));
    end.extend(message(14, &[]));
    let f = r.push(&record(22, &end)).unwrap().unwrap();
    assert_eq!(f.extensions.len(), 60);
    // Past MESSAGE_MAX it is refused.
    let mut head = vec![2];
    head.extend_from_slice(&((MESSAGE_MAX + 1) as u32).to_be_bytes()[1..]);
    assert!(matches!(FlightReader::new().push(&record(22, &head)), Err(HelloError::TooLarge { .. })));
}

#[test]
fn replies_that_are_not_a_flight_say_why() {
    let mut r = FlightReader::new();
    assert!(matches!(r.push(b"HTTP/1.1 400 Bad Request\r\n"), Err(HelloError::NotTls)));
    let alert = record(21, &[2, 70]);
    let e = FlightReader::new().push(&alert).unwrap_err();
    assert_eq!(e.to_string(), "the server refused the ClientHello: fatal alert protocol_version (70)");
    assert!(e.refused());
    // A warning (unrecognized_name) before the hello is not a refusal.
    let mut warned = record(21, &[1, 112]);
    warned.extend(dhe_flight());
    assert!(FlightReader::new().push(&warned).unwrap().is_some());
    // SSLv2: a two-byte header and SERVER-HELLO.
    assert!(matches!(FlightReader::new().push(&[0x80, 0x40, 4, 0, 1]), Err(HelloError::Sslv2)));
    // A Certificate before any ServerHello, and a second ServerHello.
    let e = FlightReader::new().push(&record(22, &message(11, &certificate(&[])))).unwrap_err();
    assert!(e.to_string().contains("Certificate message before the ServerHello"), "{e}");
    let mut two = message(2, &server_hello(TLS12, 0xc02f, &[]));
    two.extend(message(2, &server_hello(TLS12, 0xc02f, &[])));
    assert!(FlightReader::new().push(&record(22, &two)).unwrap_err().to_string().contains("second ServerHello"));
    // No Certificate for a suite that authenticates with one; anonymous is fine.
    let mut bare = message(2, &server_hello(TLS12, 0x002f, &[]));
    bare.extend(message(14, &[]));
    let e = FlightReader::new().push(&record(22, &bare)).unwrap_err();
    assert!(e.to_string().contains("no Certificate for TLS_RSA_WITH_AES_128_CBC_SHA"), "{e}");
    let mut anon = message(2, &server_hello(TLS12, 0x0034, &[]));
    anon.extend(message(14, &[]));
    assert!(FlightReader::new().push(&record(22, &anon)).unwrap().unwrap().chain.is_empty());
    // Closing early.
    assert!(matches!(FlightReader::new().closed(), HelloError::Closed));
    let mut part = FlightReader::new();
    assert_eq!(part.push(&dhe_flight()[..40]).unwrap(), None);
    assert!(part.closed().to_string().contains("in the middle of its ServerHello"));
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for n in 0..2000 {
        let mut bytes = dhe_flight();
        for _ in 0..(n % 8 + 1) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % bytes.len();
            bytes[at] = (seed >> 32) as u8;
        }
        let _ = FlightReader::new().push(&bytes);
    }
}

#[test]
fn client_hellos_parse_as_what_they_offer() {
    use tls_parser::{parse_tls_plaintext, TlsMessage, TlsMessageHandshake};
    for version in [SSL3, TLS10, TLS11, TLS12, TLS13] {
        let hello = ClientHello {
            version,
            suites: suites_for(version),
            server_name: Some("lab.moonscan.test".into()),
            alpn: vec!["h2".into(), "http/1.1".into()],
        };
        let bytes = hello.to_bytes();
        let (rest, rec) = parse_tls_plaintext(&bytes).unwrap();
        assert!(rest.is_empty());
        let TlsMessage::Handshake(TlsMessageHandshake::ClientHello(ch)) = &rec.msg[0] else { panic!("not a hello") };
        assert_eq!(ch.version.0, version.min(TLS12));
        let offered: Vec<u16> = ch.ciphers.iter().map(|c| c.0).filter(|&c| c != 0x00ff).collect();
        assert_eq!(offered, hello.suites);
        let ext = ch.ext.unwrap_or_default();
        assert_eq!(ext.is_empty(), version == SSL3, "{version:x}");
        if version == TLS13 {
            // supported_versions and a key share.
            assert!(ext.windows(2).any(|w| w == [0, 43]) && ext.windows(2).any(|w| w == [0, 51]));
        }
    }
}

#[test]
fn suites_are_those_of_the_version_strongest_first() {
    let tls10 = suites_for(TLS10);
    assert!(tls10.contains(&0x0004) && tls10.contains(&0x000a) && tls10.contains(&0x0003));
    assert!(!tls10.contains(&0xc02f) && !tls10.contains(&0x1301) && !tls10.contains(&0x00ff));
    let tls12 = suites_for(TLS12);
    assert!(tls12.len() > 250, "{}", tls12.len());
    assert_eq!(tls12[0] >> 8, 0xc0, "{:04x}", tls12[0]);
    let pos = |id| tls12.iter().position(|&s| s == id).unwrap();
    // Anonymous and NULL suites after every authenticated one.
    assert!(pos(0xc02f) < pos(0x009e) && pos(0x009e) < pos(0x002f) && pos(0x002f) < pos(0x000a));
    assert!(pos(0x000a) < pos(0x0034) && pos(0x0034) < pos(0x0002));
    let tls13 = suites_for(TLS13);
    assert!(tls13.contains(&0x1301) && tls13.contains(&0x00c6) && !tls13.contains(&0xc02f));
}

#[test]
fn bits_ignore_leading_zeros() {
    assert_eq!(bits(&[]), 0);
    assert_eq!(bits(&[0, 0]), 0);
    assert_eq!(bits(&[0, 1]), 1);
    assert_eq!(bits(&[0x80, 0]), 16);
    assert_eq!(bits(&[0, 0x7f, 0xff]), 15);
}

#[test]
fn hellos_of_256_to_511_bytes_are_padded_to_512() {
    for n in 0..120 {
        let hello =
            ClientHello { version: TLS12, suites: suites_for(TLS12)[..n].to_vec(), server_name: None, alpn: vec![] };
        let bytes = hello.to_bytes();
        let message = bytes.len() - 5;
        assert!(!(256..512).contains(&message), "{n} suites: a {message}-byte ClientHello");
    }
}

#[test]
fn an_sslv3_server_hello_keeps_its_extensions() {
    // tls-parser reads none after an SSLv3 hello: they are read here.
    let mut body = server_hello(SSL3, 0x0005, &[(0xff01, vec![0])]);
    let f = super::flight::server_hello(&body).unwrap();
    assert_eq!((f.version, f.extensions.clone()), (SSL3, vec![0xff01]));
    assert!(ja4s(&f).starts_with("ts3"), "{}", ja4s(&f));
    // A truncated block is no extension, not a panic.
    body.truncate(body.len() - 3);
    assert!(super::flight::server_hello(&body).unwrap().extensions.is_empty());
}

/// A duplex stream whose drop is counted (connections still open).
struct Counted(tokio::io::DuplexStream, std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A server on the other end of a duplex stream: with `answer`, it takes
/// every suite (the first offered, at the version offered, TLS 1.2 at
/// most) and sends the lab chain; without, it never says a word.
async fn fake_server(mut io: tokio::io::DuplexStream, answer: bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 20_000];
    let Ok(n) = io.read(&mut buf).await else { return };
    if !answer {
        let _ = io.read(&mut buf).await;
        return;
    }
    // Not a TLS record (an SSLv2 hello): hang up.
    if n < 5 || buf[0] != 22 {
        return;
    }
    let Ok((_, rec)) = tls_parser::parse_tls_plaintext(&buf[..n]) else { return };
    let tls_parser::TlsMessage::Handshake(tls_parser::TlsMessageHandshake::ClientHello(ch)) = &rec.msg[0] else {
        return;
    };
    let mut hs = message(2, &server_hello(ch.version.0.min(TLS12), ch.ciphers[0].0, &[]));
    hs.extend(message(11, &certificate(&[&lab_der()])));
    hs.extend(message(14, &[]));
    let _ = io.write_all(&record(22, &hs)).await;
    let _ = io.read(&mut buf).await;
}

/// Runs an enumeration against fake servers; returns it, the most
/// connections open at once, and how long it took.
async fn enumerate_fake(
    answer: bool,
    limits: enumerate::Limits,
) -> (enumerate::Enumeration, usize, std::time::Duration) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let connect = || {
        let (open, most) = (open.clone(), most.clone());
        async move {
            let (client, server) = tokio::io::duplex(1 << 16);
            tokio::spawn(fake_server(server, answer));
            let now = open.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            Ok::<_, HelloError>(Counted(client, open))
        }
    };
    let started = tokio::time::Instant::now();
    let until = started + std::time::Duration::from_secs(30);
    let e = enumerate::enumerate(connect, None, &enumerate::VERSIONS, until, limits).await;
    (e, most.load(Ordering::SeqCst), started.elapsed())
}

#[tokio::test]
async fn enumeration_stays_within_its_hello_cap_and_parallelism() {
    let limits = enumerate::Limits { hellos: 40, parallel: 3, ..Default::default() };
    let (e, most, _) = enumerate_fake(true, limits).await;
    assert!(e.capped, "a server that takes every suite needs more than 40 hellos");
    assert_eq!(e.hellos, 40);
    assert!(most <= 3, "{most} connections at once");
    assert!(!e.versions.is_empty());
    // One chain kept, whatever the number of suites.
    let chains = e.versions.iter().flat_map(|v| &v.accepted).filter(|a| !a.info.der.is_empty()).count();
    assert_eq!(chains, 1);
}

#[tokio::test]
async fn enumeration_stops_at_its_read_limit() {
    let limits = enumerate::Limits { read_bytes: 5_000, parallel: 1, ..Default::default() };
    let (e, _, _) = enumerate_fake(true, limits).await;
    // Each flight is about 1 kB: no hello starts once 5 kB are read.
    assert!(e.capped);
    assert!(e.read > 5_000 && e.read < 5_000 + 2_000, "{} bytes read", e.read);
    assert!(e.hellos < 10, "{} hellos", e.hellos);
}

#[tokio::test]
async fn a_silent_server_costs_each_hello_its_timeout_at_most() {
    let limits = enumerate::Limits { each: std::time::Duration::from_millis(100), ..Default::default() };
    let (e, _, took) = enumerate_fake(false, limits).await;
    assert!(e.versions.is_empty() && !e.sslv2);
    // Five versions and SSLv2, 6 at a time: one round of time-outs.
    assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
}

#[test]
fn a_hello_offers_at_most_suites_max() {
    let many: Vec<u16> = (0..6000u16).collect();
    let hello = ClientHello { version: TLS12, suites: many, server_name: None, alpn: vec![] };
    let bytes = hello.to_bytes();
    let (_, rec) = tls_parser::parse_tls_plaintext(&bytes).unwrap();
    let tls_parser::TlsMessage::Handshake(tls_parser::TlsMessageHandshake::ClientHello(ch)) = &rec.msg[0] else {
        panic!("not a hello")
    };
    // SUITES_MAX and the renegotiation SCSV.
    assert_eq!(ch.ciphers.len(), client::SUITES_MAX + 1);
}

/// How a picky server chooses among the suites it accepts.
#[derive(Clone, Copy, Debug)]
enum Choice {
    /// Its own order (that of `accepts`).
    Server,
    /// The client's first.
    Client,
    /// The client's last: neither order, answering the reversed list with a
    /// suite of its own as a client-order server would.
    ClientsLast,
}

/// A server that accepts `accepts` at TLS 1.2 only, choosing as `choice`
/// says, and refuses anything else with a handshake_failure alert.
async fn picky_server(mut io: tokio::io::DuplexStream, accepts: Vec<u16>, choice: Choice) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 20_000];
    let Ok(n) = io.read(&mut buf).await else { return };
    let Ok((_, rec)) = tls_parser::parse_tls_plaintext(&buf[..n]) else { return };
    let tls_parser::TlsMessage::Handshake(tls_parser::TlsMessageHandshake::ClientHello(ch)) = &rec.msg[0] else {
        return;
    };
    let offered: Vec<u16> = ch.ciphers.iter().map(|c| c.0).collect();
    let chosen = match choice {
        _ if ch.version.0 != TLS12 => None,
        Choice::Server => accepts.iter().find(|s| offered.contains(s)).copied(),
        Choice::Client => offered.iter().find(|s| accepts.contains(s)).copied(),
        Choice::ClientsLast => offered.iter().rev().find(|s| accepts.contains(s)).copied(),
    };
    let reply = match chosen {
        Some(suite) => {
            let mut hs = message(2, &server_hello(TLS12, suite, &[]));
            hs.extend(message(11, &certificate(&[&lab_der()])));
            hs.extend(message(14, &[]));
            record(22, &hs)
        }
        None => record(21, &[2, 40]),
    };
    let _ = io.write_all(&reply).await;
    let _ = io.read(&mut buf).await;
}

async fn enumerate_picky(accepts: &[u16], choice: Choice) -> enumerate::Enumeration {
    let connect = || {
        let accepts = accepts.to_vec();
        async move {
            let (client, server) = tokio::io::duplex(1 << 16);
            tokio::spawn(picky_server(server, accepts, choice));
            Ok::<_, HelloError>(client)
        }
    };
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    enumerate::enumerate(connect, None, &enumerate::VERSIONS, until, enumerate::Limits::default()).await
}

#[tokio::test]
async fn suites_come_in_the_order_of_whoever_chooses() {
    let ours = client::suites_for(TLS12);
    let accepts = vec![ours[40], ours[3], ours[17], ours[25], ours[9]];
    let by_client = vec![ours[3], ours[9], ours[17], ours[25], ours[40]];
    let backwards: Vec<u16> = by_client.iter().rev().copied().collect();
    for (choice, want, preference) in [
        (Choice::Server, &accepts, enumerate::Preference::Server),
        (Choice::Client, &by_client, enumerate::Preference::Client),
        // Two different answers, but not the client's order: found one by one.
        (Choice::ClientsLast, &backwards, enumerate::Preference::Server),
    ] {
        let server_order = !matches!(choice, Choice::Client);
        let e = enumerate_picky(&accepts, choice).await;
        assert_eq!(e.versions.len(), 1, "TLS 1.2 only");
        let v = &e.versions[0];
        let got: Vec<u16> = v.accepted.iter().map(|a| a.suite).collect();
        assert_eq!(&got, want, "server order: {server_order}");
        assert_eq!(v.preference, preference);
        assert!(v.error.is_none() && !e.capped);
        // SSLv2, two first hellos for each of the five versions, the
        // check of the client's order, one per suite found after the first
        // two, one refusal per part drained.
        assert!(e.hellos <= 1 + 10 + 1 + 3 + 6, "{} hellos", e.hellos);
    }
    // One suite: nobody's order.
    let e = enumerate_picky(&[ours[7]], Choice::Server).await;
    assert_eq!(e.versions[0].accepted.len(), 1);
    assert_eq!(e.versions[0].preference, enumerate::Preference::Indeterminate);
}
