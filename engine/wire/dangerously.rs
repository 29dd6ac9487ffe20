//! DANGER: a TLS certificate verifier that accepts every certificate.
//!
//! A scanner has to complete the handshake with whatever a server presents
//! (self-signed, expired, for another name, a 100-certificate chain) so it
//! can report that certificate. Nothing here may ever be used to trust a
//! peer: the only thing moonscan does with these sessions is read what the
//! server says. The module's name is the warning.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// Accepts any certificate chain; still checks handshake signatures, so a
/// session is at least consistent with the certificate it shows.
#[derive(Debug)]
pub struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration for scanning: TLS 1.2 and 1.3 with the ring
/// provider, any certificate accepted, no session resumption (every
/// handshake shows the full chain), ALPN offering `http/1.1`, SNI when the
/// server is named by a DNS name.
pub fn scanning_client_config() -> Result<Arc<ClientConfig>, rustls::Error> {
    client_config(&[12, 13], &[b"http/1.1".to_vec()])
}

/// As [`scanning_client_config`], offering only the given versions (12 for
/// TLS 1.2, 13 for TLS 1.3) and ALPN protocols (none: no ALPN extension).
pub fn client_config(versions: &[u8], alpn: &[Vec<u8>]) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AcceptAnyCertificate { provider: provider.clone() });
    let mut list: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if versions.contains(&13) {
        list.push(&rustls::version::TLS13);
    }
    if versions.contains(&12) {
        list.push(&rustls::version::TLS12);
    }
    if list.is_empty() {
        return Err(rustls::Error::General("no TLS version to offer (moonscan speaks TLS 1.2 and 1.3)".into()));
    }
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&list)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    // SNI for a host the user named (rustls never sends an address).
    config.enable_sni = true;
    config.alpn_protocols = alpn.to_vec();
    Ok(Arc::new(config))
}
