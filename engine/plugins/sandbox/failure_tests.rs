//! Error values at the plugin boundary ([`super::failure`]): the kind each
//! engine error gets, and how a plugin prints, joins and compares them,
//! on loopback sockets and offline.

use std::time::Duration;

use super::failure::{Failure, Kind};
use super::run::Budgets;
use super::tests::{guard_for, run_with, with_run};
use crate::error::{Error, ErrorKind};

#[test]
fn engine_errors_get_their_kind_from_kinds_and_causes_not_text() {
    let io = |k: std::io::ErrorKind| Error::from(std::io::Error::new(k, "x"));
    assert_eq!(Kind::of(&io(std::io::ErrorKind::TimedOut)), Kind::Timeout);
    assert_eq!(Kind::of(&io(std::io::ErrorKind::ConnectionRefused)), Kind::Refused);
    assert_eq!(Kind::of(&io(std::io::ErrorKind::UnexpectedEof)), Kind::Closed);
    assert_eq!(Kind::of(&io(std::io::ErrorKind::ConnectionReset)), Kind::Network);
    assert_eq!(Kind::of(&super::failure::closed()), Kind::Closed);
    assert_eq!(Kind::of(&super::failure::timed_out("timeout")), Kind::Timeout);
    // A connect refused, and a TLS handshake that failed, as plugin sockets open them.
    use crate::wire::conn::OpenError;
    let refused = Error::from(OpenError::Connect(std::io::ErrorKind::ConnectionRefused.into()));
    assert_eq!((Kind::of(&refused), refused.to_string().starts_with("connect: ")), (Kind::Refused, true));
    let tls = Error::from(OpenError::Handshake(std::io::Error::new(std::io::ErrorKind::InvalidData, "bad")));
    assert_eq!(Kind::of(&tls), Kind::Tls);
    assert_eq!(Kind::of(&Error::from(OpenError::HandshakeTimeout)), Kind::Timeout);
    // The text does not decide: a protocol error that says "closed" is a protocol error.
    assert_eq!(Kind::of(&Error::new(ErrorKind::Protocol, "closed")), Kind::Protocol);
    assert_eq!(Kind::of(&Error::new(ErrorKind::Budget, "timeout")), Kind::Budget);
    assert_eq!(Kind::of(&Error::new(ErrorKind::Sandbox, "x")), Kind::Sandbox);
    assert_eq!(Kind::of(&Error::new(ErrorKind::Config, "x")), Kind::Invalid);
    // Every kind has one name, and the name gives the kind back.
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
    assert_eq!(Failure::of(&refused).message, refused.to_string());
}

/// A loopback server that closes each connection at once, and a free port
/// (nothing listens on it: a connect there is refused).
async fn closing_server_and_free_port() -> (u16, u16) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            drop(s);
        }
    });
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    (port, free)
}

#[tokio::test]
async fn socket_errors_have_kinds_and_print_as_their_message() {
    let (port, free) = closing_server_and_free_port().await;
    let body = format!(
        r#"
        local s = assert(ctx:connect{{}})
        local data, err = s:recv(10)
        local d = {{}}
        d.kind, d.message, d.type = err.kind, err.message, type(err)
        d.tostring = tostring(err)
        d.format = string.format("%s|%s", err, "x")
        d.left = "recv: " .. err
        d.right = err .. "!"
        d.number = err .. 1
        d.joined_type = type("" .. err)
        d.method = err:sub(1, 3) .. "/" .. err:upper()
        d.find = err:find("los", 1, true)
        d.length = #err
        d.eq_string = err == "closed"
        d.eq_tostring = tostring(err) == "closed"
        d.as_data = err
        d.missing = err.nothing == nil
        local again = select(2, s:recv(10))
        d.eq_same = err == again
        d.eq_new = err == errors.new("closed", "closed")
        d.ne_kind = err ~= errors.new("network", "closed")
        s:close()
        local gone = select(2, s:recv(10))
        d.after_close = gone.kind .. ": " .. gone
        local s2 = assert(ctx:connect{{}})
        local _, exact = s2:recv_exact(4)
        d.exact = exact.kind .. ": " .. exact
        local _, refused = ctx:connect{{ port = {free} }}
        d.refused = refused.kind
        d.refused_text = string.sub(tostring(refused), 1, 8)
        local _, sandbox = ctx:connect{{ port = 1 }}
        d.sandbox = sandbox.kind
        local wrapped = errors.wrap(err, "connect: ")
        d.wrapped = wrapped.kind .. "|" .. wrapped
        d.wrapped_string = errors.wrap("no greeting", "connect: ")
        d.bad_kind = tostring(select(2, pcall(errors.new, "nope", "x")))
        d.kinds = table.concat(errors.KINDS, ",")
        ctx:log(err, "and", refused.kind)
        print("printed:", err)
        ctx:finding{{ title = "t", data = d }}
        return nil, err
    "#
    );
    let guard = guard_for_ports(&[port, free]);
    let (out, _) = run_with(with_run(&body), Budgets::default(), guard, port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    let s = |k: &str| d[k].as_str().unwrap_or_else(|| panic!("{k}: {d}")).to_string();
    assert_eq!((s("kind"), s("message"), s("type")), ("closed".into(), "closed".into(), "userdata".into()));
    assert_eq!((s("tostring"), s("format")), ("closed".into(), "closed|x".into()));
    assert_eq!((s("left"), s("right"), s("number")), ("recv: closed".into(), "closed!".into(), "closed1".into()));
    assert_eq!((s("joined_type"), s("method")), ("string".into(), "clo/CLOSED".into()));
    assert_eq!((d["find"].as_i64(), d["length"].as_i64()), (Some(2), Some(6)));
    // An error value is not a string: == "closed" is false, as Lua compares
    // two types; tostring(err) == "closed" and err.kind are what compare.
    assert_eq!((d["eq_string"].as_bool(), d["eq_tostring"].as_bool()), (Some(false), Some(true)));
    assert_eq!(
        (d["eq_same"].as_bool(), d["eq_new"].as_bool(), d["ne_kind"].as_bool()),
        (Some(true), Some(true), Some(true))
    );
    assert_eq!(s("as_data"), "closed", "in data an error value is its message");
    assert_eq!(d["missing"].as_bool(), Some(true));
    assert_eq!(s("after_close"), "closed: socket is closed");
    assert_eq!(s("exact"), "closed: closed after 0 of 4 bytes");
    assert_eq!((s("refused"), s("refused_text")), ("refused".into(), "connect:".into()));
    assert_eq!(s("sandbox"), "sandbox");
    assert_eq!((s("wrapped"), s("wrapped_string")), ("closed|connect: closed".into(), "connect: no greeting".into()));
    assert!(s("bad_kind").contains("\"nope\" is not a kind"), "{d}");
    assert_eq!(s("kinds"), "timeout,closed,refused,network,tls,protocol,budget,sandbox,invalid");
    // Log lines and the reason a run gives show the message.
    assert_eq!(out.logs[..2], ["closed and refused", "printed: closed"]);
    assert_eq!(out.logs[2], "t: closed");
}

#[tokio::test]
async fn a_silent_server_is_a_timeout_and_too_many_bytes_without_a_match_protocol() {
    let port = super::tests::server(b"no line end here").await;
    let body = r#"
        local s = assert(ctx:connect{})
        s:set_timeout(50)
        local _, slow = s:recv(10)
        local t = assert(ctx:connect{})
        t:send("x")
        local _, nomatch = t:recv_until("\r\n", 8)
        local u = assert(ctx:connect{})
        u:send("x")
        local _, noline = u:recv_line(8)
        local _, bad = u:starttls("gopher")
        ctx:finding{ title = "t", data = {
            slow = slow.kind .. ": " .. slow,
            nomatch = nomatch.kind .. ": " .. nomatch,
            noline = noline.kind .. ": " .. noline,
            bad = bad.kind,
        } }
    "#;
    let budgets = Budgets { wall: Duration::from_secs(5), ..Budgets::default() };
    let (out, _) = run_with(with_run(body), budgets, guard_for(port), port).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!(d["slow"], "timeout: timeout");
    assert_eq!(d["nomatch"], "protocol: no match in the first 8 bytes");
    assert_eq!(d["noline"], "protocol: no line end in the first 8 bytes");
    assert_eq!(d["bad"], "invalid");
}

#[tokio::test]
async fn an_error_value_raised_reads_as_its_message() {
    let (_, free) = closing_server_and_free_port().await;
    let budgets = Budgets { wall: Duration::from_secs(2), ..Budgets::default() };
    // assert(nil, err) raises "file:line: message", as with the message itself.
    let body = "\nlocal s = assert(ctx:connect{})";
    let (out, _) = run_with(with_run(body), budgets.clone(), guard_for(free), free).await;
    let why = out.error.expect("raised").message;
    assert!(why.starts_with("t:4: connect: "), "{why}");
    // string.format's errors still name the plugin's line.
    let body = "\nlocal s = string.format('%d', 'x')";
    let (out, _) = run_with(with_run(body), budgets.clone(), guard_for(free), free).await;
    let why = out.error.expect("raised").message;
    assert_eq!(why, "t:4: invalid argument #2 to 'format' (number expected, got string)");
    // assert keeps its own behaviour otherwise.
    for (body, why) in [
        ("local a, b = assert(1, 2) assert(a == 1 and b == 2) assert(false, 'plain')", "t:3: plain"),
        ("assert(nil)", "t:3: assertion failed!"),
        ("assert(false, nil)", "t:3: assertion failed!"),
        ("assert(false, 42)", "t:3: 42"),
    ] {
        let (out, _) = run_with(with_run(body), budgets.clone(), guard_for(free), free).await;
        assert_eq!(out.error.as_ref().expect("raised").message, why, "{body}");
    }
    // error(err) raises the error value: pcall gives it back with its kind;
    // a run it ends shows its message.
    let body = r#"
        local _, err = ctx:connect{}
        local ok, caught = pcall(error, err)
        ctx:log(caught.kind)
        error(err)
    "#;
    let (out, _) = run_with(with_run(body), budgets, guard_for(free), free).await;
    assert_eq!(out.logs, ["refused"]);
    assert!(out.error.as_ref().expect("raised").message.starts_with("connect: "), "{out:?}");
}

fn guard_for_ports(ports: &[u16]) -> super::guard::Guard {
    let mut ports = ports.to_vec();
    ports.sort_unstable();
    super::guard::Guard::scan(Some(super::guard::tests::space("127.0.0.1", "", ports)), None)
}

#[tokio::test]
async fn connect_speaks_tls_by_default_on_a_port_found_inside_tls() {
    use super::host::Vm;
    use super::run::OutputAllowance;
    // A plain server: a TLS handshake with it fails, a plain connection works.
    let port = super::tests::server(b"plain").await;
    let (other, _) = closing_server_and_free_port().await;
    let body = format!(
        r#"
        local d = {{}}
        local s, err = ctx:connect{{}}
        d.default = s and "plain" or err.kind
        s = assert(ctx:connect{{ tls = false }})
        s:send("x")
        d.explicit = s:recv(5)
        local _, terr = ctx:connect{{ tls = true }}
        d.asked = terr.kind
        s = ctx:connect{{ port = {other} }}
        d.other_port = s and "plain" or "tls"
        ctx:finding{{ title = "t", data = d }}
    "#
    );
    let budgets = Budgets { wall: Duration::from_secs(5), ..Budgets::default() };
    let vm = Vm::new(
        &[with_run(&body)],
        &budgets,
        guard_for_ports(&[port, other]),
        &Default::default(),
        OutputAllowance::new(1 << 20),
    )
    .unwrap();
    let mut info = (*super::tests::info(port)).clone();
    info.tunnel = Some(crate::findings::Tunnel::Ssl);
    let out = vm.run(0, std::sync::Arc::new(info)).await;
    assert_eq!(out.error, None, "{out:?}");
    let d = &out.findings[0].data;
    assert_eq!(d["default"], "tls", "{d}");
    assert_eq!(d["explicit"], "plain", "{d}");
    assert_eq!(d["asked"], "tls", "{d}");
    assert_eq!(d["other_port"], "plain", "{d}");
}
