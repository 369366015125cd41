//! Peers prove the host before they send anything: the plugin's mutual pairing
//! (`pairing.rs`), between studio-bridge processes on `/v1/client`, keyed with the peer
//! token.
//!
//! Why: a process that finds the bridge port taken joins whatever holds it. `/v1/health`
//! answering with the right JSON proves nothing, and a peer that then sent
//! `Authorization: Bearer <token>` and its calls (scripts, sources, maybe secrets) to a
//! squatter would hand it the token and everything its agent does. So the token never
//! crosses the wire, and nothing is sent before the holder proves it has it:
//!
//! 1. peer → `hello {protocol, nonce}` (16 random bytes);
//! 2. host → `challenge {hostNonce, proof = HMAC(token, "studio-bridge peer host" ‖ nonce ‖
//!    hostNonce)}`; the peer checks it in constant time, and closes on a wrong one;
//! 3. peer → `auth {proof = HMAC(token, "studio-bridge peer" ‖ hostNonce ‖ nonce)}`;
//! 4. host → `welcome {}`, or `reject {code, message}` and close 4003.
//!
//! The host reads nothing else from a peer before `welcome`, and a peer's read budget is
//! lifted only then. Frames are binary msgpack maps, as every frame on `/v1/client`.

use std::time::Duration;

use rmpv::Value as Msgpack;

use super::pairing::{self, NONCE_BYTES};
use crate::protocol::PROTOCOL_VERSION;

/// How long each side waits for the other's next handshake message.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(5);

/// The close code of a refused handshake (as for an unpaired plugin).
pub const CLOSE_UNPROVEN: u16 = 4003;

/// Largest handshake frame read: a few dozen bytes are needed.
pub const MAX_STEP_BYTES: usize = 4096;

/// One handshake message.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Hello { protocol: u64, nonce: Vec<u8> },
    Challenge { host_nonce: Vec<u8>, proof: Vec<u8> },
    Auth { proof: Vec<u8> },
    Welcome,
    Reject { code: String, message: String },
}

impl Step {
    /// The message as a binary frame's payload.
    pub fn encode(&self) -> Vec<u8> {
        let text = |s: &str| Msgpack::from(s);
        let binary = |b: &[u8]| Msgpack::Binary(b.to_vec());
        let fields: Vec<(Msgpack, Msgpack)> = match self {
            Step::Hello { protocol, nonce } => vec![
                (text("t"), text("hello")),
                (text("protocol"), Msgpack::from(*protocol)),
                (text("nonce"), binary(nonce)),
            ],
            Step::Challenge { host_nonce, proof } => vec![
                (text("t"), text("challenge")),
                (text("hostNonce"), binary(host_nonce)),
                (text("proof"), binary(proof)),
            ],
            Step::Auth { proof } => vec![(text("t"), text("auth")), (text("proof"), binary(proof))],
            Step::Welcome => vec![(text("t"), text("welcome"))],
            Step::Reject { code, message } => vec![
                (text("t"), text("reject")),
                (text("code"), text(code)),
                (text("message"), text(message)),
            ],
        };
        let mut bytes = Vec::new();
        // Writing a value into a Vec cannot fail.
        let _ = rmpv::encode::write_value(&mut bytes, &Msgpack::Map(fields));
        bytes
    }

    /// A handshake message from a frame's payload, or why it is not one.
    pub fn decode(bytes: &[u8]) -> Result<Step, String> {
        if bytes.len() > MAX_STEP_BYTES {
            return Err(format!("a handshake message of {} bytes", bytes.len()));
        }
        let value = rmpv::decode::read_value(&mut &bytes[..]).map_err(|e| format!("not msgpack: {e}"))?;
        let field = |key: &str| {
            value
                .as_map()?
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v)
        };
        let binary = |key: &str| match field(key) {
            Some(Msgpack::Binary(bytes)) => Ok(bytes.clone()),
            _ => Err(format!("no binary `{key}`")),
        };
        let text = |key: &str| field(key).and_then(Msgpack::as_str).unwrap_or_default().to_owned();
        match field("t").and_then(Msgpack::as_str) {
            Some("hello") => Ok(Step::Hello {
                protocol: field("protocol").and_then(Msgpack::as_u64).unwrap_or(0),
                nonce: binary("nonce")?,
            }),
            Some("challenge") => Ok(Step::Challenge {
                host_nonce: binary("hostNonce")?,
                proof: binary("proof")?,
            }),
            Some("auth") => Ok(Step::Auth {
                proof: binary("proof")?,
            }),
            Some("welcome") => Ok(Step::Welcome),
            Some("reject") => Ok(Step::Reject {
                code: text("code"),
                message: text("message"),
            }),
            other => Err(format!("expected a handshake message, got t = {other:?}")),
        }
    }
}

/// The peer's side, before anything else is sent: its `hello` and the nonce to remember.
pub fn peer_hello() -> std::io::Result<(Step, [u8; NONCE_BYTES])> {
    let nonce = pairing::nonce()?;
    let hello = Step::Hello {
        protocol: PROTOCOL_VERSION,
        nonce: nonce.to_vec(),
    };
    Ok((hello, nonce))
}

/// The peer's answer to the host's `challenge`: its `auth`, or why the host is not proven
/// (then nothing more is sent to it).
pub fn peer_answer(token: &str, nonce: &[u8], challenge: Step) -> Result<Step, Unproven> {
    match challenge {
        Step::Challenge { host_nonce, proof }
            if pairing::peer_host_proof_matches(token, nonce, &host_nonce, &proof) =>
        {
            Ok(Step::Auth {
                proof: pairing::peer_proof(token, &host_nonce, nonce),
            })
        }
        Step::Challenge { .. } => Err(Unproven::WrongProof),
        Step::Reject { code, message } => Err(Unproven::Refused(format!("{code}: {message}"))),
        other => Err(Unproven::NoChallenge(format!("{other:?}"))),
    }
}

/// Why a peer did not take the port's holder for this user's studio-bridge.
#[derive(Debug, Clone, PartialEq)]
pub enum Unproven {
    /// Its proof did not match the token (a squatter, or a token replaced meanwhile).
    WrongProof,
    /// It answered something else than a challenge, or nothing in time.
    NoChallenge(String),
    /// It refused the peer (a token replaced meanwhile, or a host of another version).
    Refused(String),
}

/// The host's side: the `challenge` for a peer's `hello`, and the two nonces to check its
/// `auth` against (the peer's, the host's); or the refusal to send.
pub fn host_challenge(token: &str, hello: Step) -> Result<(Step, Vec<u8>, [u8; NONCE_BYTES]), Step> {
    let nonce = match hello {
        Step::Hello { protocol, nonce } if protocol == PROTOCOL_VERSION && nonce.len() == NONCE_BYTES => nonce,
        Step::Hello { protocol, .. } if protocol != PROTOCOL_VERSION => {
            return Err(reject(
                "protocol_mismatch",
                &format!(
                    "this host speaks protocol {PROTOCOL_VERSION}, the peer {protocol}: use one studio-bridge version"
                ),
            ));
        }
        _ => {
            return Err(reject(
                "bad_hello",
                "the first message on /v1/client must be a peer hello",
            ));
        }
    };
    let host_nonce = pairing::nonce().map_err(|e| reject("internal", &format!("no OS randomness: {e}")))?;
    let challenge = Step::Challenge {
        host_nonce: host_nonce.to_vec(),
        proof: pairing::peer_host_proof(token, &nonce, &host_nonce),
    };
    Ok((challenge, nonce, host_nonce))
}

/// Whether a peer's `auth` proves it holds the token.
pub fn host_admits(token: &str, nonce: &[u8], host_nonce: &[u8], auth: &Step) -> bool {
    matches!(auth, Step::Auth { proof } if pairing::peer_proof_matches(token, host_nonce, nonce, proof))
}

/// The refusal a host sends before closing with [`CLOSE_UNPROVEN`].
pub fn reject(code: &str, message: &str) -> Step {
    Step::Reject {
        code: code.to_owned(),
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_of_the_token_and_only_it_passes_both_ways() {
        let (hello, nonce) = peer_hello().unwrap();
        let hello = Step::decode(&hello.encode()).unwrap();
        let Step::Hello { nonce: sent, .. } = &hello else {
            panic!("{hello:?}")
        };
        assert_eq!(sent, &nonce.to_vec());
        let (challenge, _, host_nonce) = host_challenge("tok", hello.clone()).unwrap();
        let challenge = Step::decode(&challenge.encode()).unwrap();
        let auth = peer_answer("tok", &nonce, challenge.clone()).expect("the host is proven");
        assert!(host_admits(
            "tok",
            &nonce,
            &host_nonce,
            &Step::decode(&auth.encode()).unwrap()
        ));

        // A holder of another token proves nothing, and is told nothing either.
        assert_eq!(
            peer_answer("other", &nonce, challenge.clone()),
            Err(Unproven::WrongProof)
        );
        let forged = peer_answer("tok", &nonce, challenge).unwrap();
        assert!(!host_admits("other", &nonce, &host_nonce, &forged));
        // The host's proof is no peer proof (the labels differ): a reflection fails.
        let (reflected, ..) = host_challenge("tok", hello).unwrap();
        let Step::Challenge { proof, .. } = reflected else {
            unreachable!()
        };
        assert!(!host_admits("tok", &nonce, &host_nonce, &Step::Auth { proof }));
    }

    #[test]
    fn anything_but_a_challenge_leaves_the_host_unproven() {
        let (_, nonce) = peer_hello().unwrap();
        assert!(matches!(
            peer_answer("tok", &nonce, Step::Welcome),
            Err(Unproven::NoChallenge(_))
        ));
        assert!(matches!(
            peer_answer("tok", &nonce, reject("unpaired", "no")),
            Err(Unproven::Refused(_))
        ));
        let wrong_version = Step::Hello {
            protocol: PROTOCOL_VERSION + 1,
            nonce: nonce.to_vec(),
        };
        let Err(Step::Reject { code, .. }) = host_challenge("tok", wrong_version) else {
            panic!("a peer of another protocol is refused")
        };
        assert_eq!(code, "protocol_mismatch");
        assert!(Step::decode(&[0xc1]).is_err());
    }
}
