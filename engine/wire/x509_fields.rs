//! A certificate as nmap's ssl-cert shows it: subject and issuer keyed by
//! OpenSSL's long attribute names, the public key, the extensions with
//! OpenSSL's names and printed values, the signature algorithm, and the MD5
//! and SHA-1 digests of the DER. Plugins get these on each `ctx.tls.chain`
//! entry, so a plugin under nmap's id can return nmap's table.

use md5::Md5;
use serde_json::{json, Map, Value};
use sha1::Sha1;
use sha2::Digest;
use x509_parser::der_parser::oid::Oid;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::*;
use x509_parser::public_key::PublicKey;

use crate::text::{hex, hex_upper_sep, one_line};
use crate::wire::cert::ip_text;

/// The fields of `der`, or None when it does not parse.
pub fn fields(der: &[u8]) -> Option<Value> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut out = Map::new();
    out.insert("subject_fields".into(), name(cert.subject()));
    out.insert("issuer_fields".into(), name(cert.issuer()));
    out.insert("pubkey".into(), pubkey(&cert));
    out.insert("extensions".into(), Value::Array(cert.extensions().iter().map(extension).collect()));
    out.insert("sig_algo".into(), Value::String(long_name(&cert.signature_algorithm.algorithm)));
    out.insert("md5".into(), Value::String(hex(&Md5::digest(der))));
    out.insert("sha1".into(), Value::String(hex(&Sha1::digest(der))));
    Some(Value::Object(out))
}

/// OpenSSL's long name of an attribute or algorithm, else the registry's
/// short name, else the dotted OID.
fn long_name(oid: &Oid) -> String {
    let dotted = oid.to_id_string();
    let known = match dotted.as_str() {
        "2.5.4.3" => "commonName",
        "2.5.4.4" => "surname",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "countryName",
        "2.5.4.7" => "localityName",
        "2.5.4.8" => "stateOrProvinceName",
        "2.5.4.9" => "streetAddress",
        "2.5.4.10" => "organizationName",
        "2.5.4.11" => "organizationalUnitName",
        "2.5.4.12" => "title",
        "2.5.4.42" => "givenName",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.25" => "domainComponent",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionCountryName",
        "2.5.4.15" => "businessCategory",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    x509_parser::objects::oid2sn(oid, x509_parser::objects::oid_registry()).map_or(dotted, str::to_string)
}

/// A distinguished name as a table of attribute -> value (the last of a
/// repeated attribute wins, as in nmap's).
fn name(n: &X509Name) -> Value {
    let mut m = Map::new();
    for attr in n.iter_attributes() {
        let value = attr.as_str().map_or_else(|_| hex(attr.attr_value().data), str::to_string);
        // The server's text, one line (see tls::summarise).
        let value = one_line(&value).into_owned();
        m.insert(long_name(attr.attr_type()), Value::String(value));
    }
    Value::Object(m)
}

fn pubkey(cert: &X509Certificate) -> Value {
    let spki = cert.public_key();
    let parsed = spki.parsed();
    let bits = parsed.as_ref().map_or(0, PublicKey::key_size);
    match &parsed {
        Ok(PublicKey::RSA(rsa)) => {
            let modulus: Vec<u8> = rsa.modulus.iter().copied().skip_while(|&b| b == 0).collect();
            let exponent = rsa.exponent.iter().fold(0u128, |acc, &b| acc.saturating_mul(256).saturating_add(b.into()));
            json!({"type": "rsa", "bits": bits, "modulus": hex_upper_sep(&modulus, ""), "exponent": exponent.to_string()})
        }
        Ok(PublicKey::EC(_)) => {
            let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| long_name(&o));
            let curve = match curve.as_deref() {
                Some("secp256r1") => "prime256v1".to_string(),
                Some(c) => c.to_string(),
                None => "unknown".into(),
            };
            json!({"type": "ec", "bits": bits, "ecdhparams": {"curve_params": {"ec_curve_type": "namedcurve", "curve": curve}}})
        }
        Ok(PublicKey::DSA(_)) => json!({"type": "dsa", "bits": bits}),
        _ => {
            let kind = long_name(&spki.algorithm.algorithm).to_ascii_lowercase();
            let bits = match kind.as_str() {
                "ed25519" => 256,
                "ed448" => 456,
                _ => 0,
            };
            json!({"type": kind, "bits": bits})
        }
    }
}

/// One extension as OpenSSL prints it: its name, its value, and
/// `critical = true` when it is critical.
fn extension(ext: &X509Extension) -> Value {
    let oid = ext.oid.to_id_string();
    let name = match oid.as_str() {
        "1.3.6.1.5.5.7.1.1" => "Authority Information Access".to_string(),
        "1.3.6.1.4.1.11129.2.4.2" => "CT Precertificate SCTs".to_string(),
        _ => x509_parser::objects::oid_registry()
            .get(&ext.oid)
            .map(|e| e.description().to_string())
            .filter(|d| d.starts_with("X509v3 "))
            .unwrap_or_else(|| long_name(&ext.oid)),
    };
    let colons = |b: &[u8]| hex_upper_sep(b, ":");
    let value = match ext.parsed_extension() {
        ParsedExtension::SubjectKeyIdentifier(k) => colons(k.0),
        ParsedExtension::AuthorityKeyIdentifier(a) => {
            a.key_identifier.as_ref().map(|k| colons(k.0)).unwrap_or_default()
        }
        ParsedExtension::BasicConstraints(b) => {
            let ca = if b.ca { "CA:TRUE" } else { "CA:FALSE" };
            match b.path_len_constraint {
                Some(n) => format!("{ca}, pathlen:{n}"),
                None => ca.to_string(),
            }
        }
        ParsedExtension::SubjectAlternativeName(san) => general_names(&san.general_names),
        ParsedExtension::IssuerAlternativeName(ian) => general_names(&ian.general_names),
        ParsedExtension::KeyUsage(ku) => {
            let names = [
                (ku.digital_signature(), "Digital Signature"),
                (ku.non_repudiation(), "Non Repudiation"),
                (ku.key_encipherment(), "Key Encipherment"),
                (ku.data_encipherment(), "Data Encipherment"),
                (ku.key_agreement(), "Key Agreement"),
                (ku.key_cert_sign(), "Certificate Sign"),
                (ku.crl_sign(), "CRL Sign"),
                (ku.encipher_only(), "Encipher Only"),
                (ku.decipher_only(), "Decipher Only"),
            ];
            names.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
        }
        ParsedExtension::ExtendedKeyUsage(eku) => {
            let mut v = Vec::new();
            for (on, n) in [
                (eku.server_auth, "TLS Web Server Authentication"),
                (eku.client_auth, "TLS Web Client Authentication"),
                (eku.code_signing, "Code Signing"),
                (eku.email_protection, "E-mail Protection"),
                (eku.time_stamping, "Time Stamping"),
                (eku.ocsp_signing, "OCSP Signing"),
                (eku.any, "Any Extended Key Usage"),
            ] {
                if on {
                    v.push(n.to_string());
                }
            }
            v.extend(eku.other.iter().map(|o| o.to_id_string()));
            v.join(", ")
        }
        // Printed by OpenSSL in ways of its own: the raw value, in hex.
        _ => colons(ext.value),
    };
    let mut m = Map::new();
    m.insert("name".into(), Value::String(name));
    m.insert("value".into(), Value::String(value));
    if ext.critical {
        m.insert("critical".into(), Value::Bool(true));
    }
    Value::Object(m)
}

fn general_names(names: &[GeneralName]) -> String {
    names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(s) => format!("DNS:{s}"),
            GeneralName::RFC822Name(s) => format!("email:{s}"),
            GeneralName::URI(s) => format!("URI:{s}"),
            GeneralName::IPAddress(b) => format!("IP Address:{}", ip_text(b)),
            GeneralName::DirectoryName(d) => format!("DirName:{d}"),
            other => format!("othername:{other:?}").chars().take(200).collect(),
        })
        .map(|n| one_line(&n).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
