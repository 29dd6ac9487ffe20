//! STARTTLS exchanges read whatever a server says in the clear: SMTP, FTP,
//! NNTP and POP3 lines, IMAP tags, LDAP BER, PostgreSQL's one byte, MySQL
//! packets and XMPP stream features.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| moonscan::fuzz::starttls_reply(data));
