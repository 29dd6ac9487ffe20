use super::*;
use std::time::Duration;

/// One step of a scripted server: what it says, then what it expects.
type Step = (Vec<u8>, &'static [u8]);

/// A scripted server: for each step, what it sends, then how many bytes it
/// reads from the client (and checks they start with the prefix given).
/// After the script it sends "TLS!" (where a ServerHello would be).
async fn run(proto: Starttls, script: Vec<Step>) -> (Result<(), StarttlsError>, Vec<u8>) {
    let (mut client, mut server) = tokio::io::duplex(1 << 20);
    let srv = tokio::spawn(async move {
        for (say, expect) in script {
            server.write_all(&say).await.unwrap();
            if !expect.is_empty() {
                let mut got = vec![0u8; expect.len()];
                if server.read_exact(&mut got).await.is_err() {
                    return;
                }
                assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expect));
                // The rest of the client's line or packet.
                let mut more = [0u8; 256];
                let _ = tokio::time::timeout(Duration::from_millis(20), server.read(&mut more)).await;
            }
        }
        let _ = server.write_all(b"TLS!").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let until = Instant::now() + Duration::from_secs(5);
    let result = proto.upgrade(&mut client, "chat.example", until).await;
    let mut rest = vec![0u8; 4];
    if result.is_ok() {
        client.read_exact(&mut rest).await.unwrap();
    }
    srv.abort();
    (result, rest)
}

fn s(x: &str) -> Vec<u8> {
    x.as_bytes().to_vec()
}

#[tokio::test]
async fn each_protocol_stops_right_before_the_tls_bytes() {
    let cases: Vec<(Starttls, Vec<Step>)> = vec![
        (
            Starttls::Smtp,
            vec![
                (s("220-mail.example ESMTP\r\n220 ready\r\n"), b"EHLO "),
                (s("250-mail.example\r\n250-PIPELINING\r\n250 STARTTLS\r\n"), b"STARTTLS\r\n"),
                (s("220 2.0.0 go ahead\r\n"), b""),
            ],
        ),
        (
            Starttls::Lmtp,
            vec![
                (s("220 lmtp\r\n"), b"LHLO "),
                (s("250-x\r\n250 starttls\r\n"), b"STARTTLS\r\n"),
                (s("220 ok\r\n"), b""),
            ],
        ),
        (Starttls::Ftp, vec![(s("220-Welcome\r\n220 FTP\r\n"), b"AUTH TLS\r\n"), (s("234 AUTH TLS ok.\r\n"), b"")]),
        (Starttls::Nntp, vec![(s("200 news ready\r\n"), b"STARTTLS\r\n"), (s("382 Continue\r\n"), b"")]),
        (Starttls::Pop3, vec![(s("+OK Dovecot ready.\r\n"), b"STLS\r\n"), (s("+OK Begin TLS\r\n"), b"")]),
        (
            Starttls::Imap,
            vec![
                (s("* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n"), b"ms1 STARTTLS\r\n"),
                (s("* BYE not really\r\nms1 OK Begin TLS negotiation now.\r\n"), b""),
            ],
        ),
        (Starttls::Postgres, vec![(vec![], &[0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f]), (s("S"), b"")]),
        (
            Starttls::Ldap,
            vec![
                (vec![], b"\x30\x1d\x02\x01\x01\x77\x18\x80\x161.3.6.1.4.1.1466.20037"),
                (
                    [&[0x30, 0x24, 0x02, 0x01, 0x01, 0x78, 0x1f, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00, 0x8a, 0x16][..], b"1.3.6.1.4.1.1466.20037"]
                        .concat(),
                    b"",
                ),
            ],
        ),
        (Starttls::Mysql, vec![(mysql_greeting(0xffff), b"\x20\x00\x00\x01"), (vec![], b"")]),
        (
            Starttls::XmppClient,
            vec![
                (vec![], b"<?xml version='1.0'?><stream:stream xmlns='jabber:client'"),
                (
                    s("<stream:stream from='chat.example' version='1.0'><stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"),
                    b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
                ),
                (s("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"), b""),
            ],
        ),
    ];
    for (proto, script) in cases {
        let (result, rest) = run(proto, script).await;
        assert!(result.is_ok(), "{proto:?}: {}", result.unwrap_err());
        assert_eq!(rest, b"TLS!", "{proto:?} read past its last reply");
    }
}

fn mysql_greeting(caps: u16) -> Vec<u8> {
    let mut p = vec![10];
    p.extend_from_slice(b"10.11.6-MariaDB\0");
    p.extend_from_slice(&[1, 0, 0, 0]);
    p.extend_from_slice(b"abcdefgh\0");
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&[45, 2, 0, 0xff, 0x81]);
    p.extend_from_slice(&[0; 13]);
    let mut packet = vec![p.len() as u8, 0, 0, 0];
    packet.extend(p);
    packet
}

#[tokio::test]
async fn refusals_say_what_the_server_said() {
    let cases: Vec<(Starttls, Vec<Step>, &str)> = vec![
        (
            Starttls::Smtp,
            vec![(s("220 mail\r\n"), b"EHLO "), (s("250-mail\r\n250 PIPELINING\r\n"), b"")],
            "does not offer STARTTLS",
        ),
        (Starttls::Smtp, vec![(s("554 go away\r\n"), b"")], "554 go away"),
        (Starttls::Postgres, vec![(vec![], &[0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f]), (s("N"), b"")], "does not accept SSL"),
        (
            Starttls::Ldap,
            vec![
                (vec![], b"\x30"),
                (vec![0x30, 0x0c, 0x02, 0x01, 0x01, 0x78, 0x07, 0x0a, 0x01, 0x02, 0x04, 0x00, 0x04, 0x00], b""),
            ],
            "LDAP result code 2",
        ),
        (Starttls::Mysql, vec![(mysql_greeting(0xf7ff), b"")], "does not offer SSL"),
        (Starttls::Imap, vec![(s("* OK hi\r\n"), b"ms1 "), (s("ms1 BAD no\r\n"), b"")], "ms1 BAD no"),
        (
            Starttls::XmppClient,
            vec![(vec![], b"<?xml"), (s("<stream:features><mechanisms/></stream:features>"), b"")],
            "does not offer STARTTLS",
        ),
    ];
    for (proto, script, says) in cases {
        let (result, _) = run(proto, script).await;
        let e = result.expect_err("refused");
        assert!(e.to_string().contains(says), "{proto:?}: {e}");
    }
}

#[tokio::test]
async fn endless_and_silent_servers_are_bounded() {
    // A line that never ends: refused past REPLY_MAX.
    let (result, _) = run(Starttls::Pop3, vec![(vec![b'+'; REPLY_MAX + 10], b"")]).await;
    assert!(result.unwrap_err().to_string().contains("more than 65536 bytes"));
    // A MySQL packet claiming 16 MB.
    let (result, _) = run(Starttls::Mysql, vec![(vec![0xff, 0xff, 0xff, 0], b"")]).await;
    assert!(result.unwrap_err().to_string().contains("MySQL packet of 16777215 bytes"));
    // Silence: the deadline ends it.
    let (mut client, _server) = tokio::io::duplex(64);
    let until = Instant::now() + Duration::from_millis(100);
    let e = Starttls::Smtp.upgrade(&mut client, "x", until).await.unwrap_err();
    assert!(matches!(e, StarttlsError::Timeout));
}

#[test]
fn names_parse_to_protocols() {
    for name in Starttls::NAMES {
        assert!(Starttls::parse(name).is_some(), "{name}");
    }
    assert_eq!(Starttls::parse("SMTP"), Some(Starttls::Smtp));
    assert_eq!(Starttls::parse("submission").map(Starttls::name), Some("smtp"));
    assert_eq!(Starttls::parse("http"), None);
}

#[test]
fn any_reply_ends_in_a_result_within_the_read_limit() {
    let all = [
        Starttls::Smtp,
        Starttls::Lmtp,
        Starttls::Imap,
        Starttls::Pop3,
        Starttls::Ftp,
        Starttls::Ldap,
        Starttls::Postgres,
        Starttls::Mysql,
        Starttls::Nntp,
        Starttls::XmppClient,
        Starttls::XmppServer,
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for n in 0..3000usize {
        let mut input = match n % 4 {
            0 => b"220 x\r\n250 STARTTLS\r\n220 go\r\n".to_vec(),
            1 => b"* OK x\r\nms1 OK\r\n".to_vec(),
            2 => vec![0x30, 0x0c, 0x02, 0x01, 0x01, 0x78, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00],
            _ => b"<stream:features><starttls/></stream:features><proceed/>".to_vec(),
        };
        for _ in 0..(n % 5) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % input.len();
            input[at] = (seed >> 40) as u8;
        }
        for proto in all {
            // Ends (Replay never waits: an exchange that waited would be
            // reported as a time-out) within what it was given.
            let (result, read) = proto.replay(&input);
            assert!(!matches!(result, Err(StarttlsError::Timeout)), "{proto:?}");
            assert!(read <= input.len(), "{proto:?}");
        }
    }
    // An endless reply of 100 kB: every protocol stops at REPLY_MAX.
    let endless = vec![b'A'; 100_000];
    for proto in all {
        let (result, read) = proto.replay(&endless);
        assert!(result.is_err(), "{proto:?}");
        assert!(read <= REPLY_MAX + 1, "{proto:?} read {read}");
    }
    // The well-formed replies succeed.
    assert!(Starttls::Smtp.replay(b"220 x\r\n250 STARTTLS\r\n220 go\r\n").0.is_ok());
    assert!(Starttls::Postgres.replay(b"S").0.is_ok());
}
