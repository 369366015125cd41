//! Wire messages on `/v1/plugin` (PROTOCOL.md, Frames / Plugin → host / Host → plugin).
//!
//! Inbound frames are decoded once into an `rmpv::Value` and then taken apart by hand,
//! moving payloads out rather than copying them: a `response` may carry tens of megabytes
//! and is touched exactly once more, when it becomes JSON. Hand-parsing also lets us be
//! tolerant in the ways a Luau encoder needs (ids sent as floats, unknown keys ignored)
//! and strict where it matters (a `hello` missing a field is rejected with its name).
//!
//! Outbound messages are serde structs encoded with `rmp_serde::to_vec_named`, so they
//! are msgpack maps with camelCase keys, never positional arrays.

use base64_simd::STANDARD as BASE64;
use bytes::{Bytes, BytesMut};
use rmpv::Value as Msgpack;
use serde::Serialize;

use super::Context;
use super::frame::{Fields, FrameError, as_f64, into_string};
use super::raw::{self, RawValue};

/// The nesting budget [`decode_frame`] enforces (it lives with the errors both decoders share).
pub use super::frame::MAX_DEPTH;

/// How a plugin frames its messages; the host answers each plugin in the framing of
/// its `hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A binary WebSocket message holding the msgpack bytes.
    Binary,
    /// A text WebSocket message holding standard padded base64 of the msgpack bytes
    /// (what Studio's `WebStreamClient:Send(string)` can produce).
    Base64Text,
}

/// The length of each side's pairing nonce, in bytes (PROTOCOL.md, "Pairing is mutual").
pub const NONCE_BYTES: usize = 16;

/// The first message of every plugin connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Hello {
    pub protocol: u64,
    pub plugin_version: String,
    pub session_id: String,
    pub instance_id: String,
    pub context: Context,
    pub place_name: String,
    pub place_id: i64,
    pub game_id: i64,
    pub state: String,
    pub actions: Vec<String>,
    /// The plugin's nonce (PROTOCOL.md, "Pairing is mutual"): a paired plugin asks the
    /// host to prove itself for it. Absent from a plugin built without a secret, and from
    /// a carried playtest session's hello. A `pairing` field (the secret itself, sent by
    /// plugins before mutual pairing) is never read.
    pub nonce: Option<Vec<u8>>,
    /// A Play client's player (its LocalPlayer's Name); absent from other sessions, and from
    /// a plugin older than this field.
    pub player: Option<String>,
    /// What the plugin found of this Studio (issue #40): the engine's `version()`, and the
    /// engine members its probes found missing (`Class.Member`). Absent from older plugins.
    pub studio_version: Option<String>,
    pub missing: Vec<String>,
    /// A person paused studio-bridge in Studio's panel: every call is answered `paused`.
    pub paused: bool,
}

/// The error half of a plugin `response`.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginFailure {
    pub code: String,
    pub message: String,
    pub details: Option<Msgpack>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PluginMessage {
    Hello(Hello),
    /// A paired plugin's first `hello`, before the host proved itself: only its protocol
    /// and nonce (issue #38: nothing of the place reaches a host that may be a squatter).
    /// Its full `hello` follows the host's `proven`.
    PairingHello {
        protocol: u64,
        nonce: Vec<u8>,
    },
    Response {
        id: u64,
        outcome: Result<RawValue, PluginFailure>,
    },
    Progress {
        id: u64,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Event {
        event: String,
        data: Msgpack,
    },
    Pong {
        n: u64,
    },
    /// A multiplexed session's DataModel closed (the playtest ended): it is gone for
    /// good, not reconnecting.
    Bye,
    /// The plugin's answer to a `challenge` (PROTOCOL.md, "Pairing is mutual"): its proof,
    /// decoded from base64 (empty when it was not base64).
    Auth {
        proof: Vec<u8>,
    },
    /// A message type this host does not know; ignored (logged at debug).
    Unknown(String),
}

/// A plugin message and the multiplexed session it belongs to: `None` for the
/// connection's own session (the one whose `hello` opened the socket).
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    pub session: Option<String>,
    pub message: PluginMessage,
}

/// Decodes the payload of one WebSocket message, enforcing `limit` on the decoded size.
pub fn decode_frame(payload: &[u8], framing: Framing, limit: usize) -> Result<Msgpack, FrameError> {
    let decoded;
    let bytes = match framing {
        Framing::Binary => payload,
        Framing::Base64Text => {
            check_base64_size(payload, limit)?;
            decoded = BASE64.decode_to_vec(payload)?;
            &decoded[..]
        }
    };
    if bytes.len() > limit {
        return Err(FrameError::TooLarge {
            size: bytes.len(),
            limit,
        });
    }
    let mut reader = bytes;
    Ok(rmpv::decode::read_value_with_max_depth(&mut reader, MAX_DEPTH)?)
}

/// base64 is 4/3 of its content: a text frame too large is refused before anything is
/// allocated for its decoded copy.
fn check_base64_size(payload: &[u8], limit: usize) -> Result<(), FrameError> {
    let estimated = payload.len() / 4 * 3;
    if estimated > limit + 3 {
        return Err(FrameError::TooLarge { size: estimated, limit });
    }
    Ok(())
}

/// Where one socket's large text frames are decoded, kept from one frame to the next.
///
/// A plugin sends base64 text, and its decoded bytes are the frame that the message and its
/// `result` are sliced from. A fresh allocation for each frame of megabytes (a screenshot's
/// 8 MB of pixels, a large `query`) faults in every 4 KiB page on first touch, which on a
/// virtual machine costs more than the decoding. So the socket's reader keeps this buffer:
/// once everything sliced from the last large frame has been dropped (its call was
/// answered), the next is decoded into the same memory; while some of it is still held (a
/// result kept for paging), a new buffer is allocated, as before. Like the WebSocket's own
/// read buffer, it keeps the capacity of the largest frame the socket has carried.
///
/// Small frames (events, short results) get an allocation of their own: slices of a shared
/// buffer that a kept event held would pin all of it. For the same reason a buffer more
/// than twice the size a frame needs is not used for it.
#[derive(Debug, Default)]
pub struct DecodeBuffer {
    buffer: BytesMut,
}

impl DecodeBuffer {
    /// Text frames at least this large are decoded into the kept buffer.
    const REUSE_FROM: usize = 256 * 1024;

    fn decode(&mut self, payload: &[u8]) -> Result<Bytes, FrameError> {
        if payload.len() < Self::REUSE_FROM {
            return Ok(Bytes::from(BASE64.decode_to_vec(payload)?));
        }
        let room = BASE64.decoded_length(payload)?;
        // `reserve` takes the whole allocation back when no slice of it is left.
        self.buffer.clear();
        self.buffer.reserve(room);
        if self.buffer.capacity() > room.saturating_mul(2) {
            self.buffer = BytesMut::with_capacity(room);
        }
        self.buffer.resize(room, 0);
        match BASE64.decode(payload, base64_simd::Out::from_slice(&mut self.buffer[..])) {
            Ok(_) => Ok(self.buffer.split().freeze()),
            Err(error) => {
                self.buffer.clear();
                Err(error.into())
            }
        }
    }
}

/// Encodes an outbound message in the given framing.
pub fn encode_frame<T: Serialize>(message: &T, framing: Framing) -> Frame {
    // Serializing our own plain structs to a Vec cannot fail.
    let bytes = rmp_serde::to_vec_named(message).unwrap_or_default();
    match framing {
        Framing::Binary => Frame::Binary(bytes),
        Framing::Base64Text => Frame::Text(BASE64.encode_to_string(bytes)),
    }
}

/// An encoded outbound WebSocket message.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Binary(Vec<u8>),
    Text(String),
}

impl PluginMessage {
    /// Takes a decoded frame apart, keeping the `session` a multiplexed message carries
    /// (PROTOCOL.md, Sessions). A `hello`'s own `sessionId` names its session instead.
    /// Consumes the value so that large payloads move. The host decodes with
    /// [`PluginMessage::decode_routed`]; this tree decoder is what the fuzz targets check
    /// it against.
    pub fn parse_routed(value: Msgpack) -> Result<Routed, FrameError> {
        let Msgpack::Map(entries) = value else {
            return Err(FrameError::NotAMessage);
        };
        let mut fields = Fields(entries);
        let result = fields.take("result").map(|result| RawValue::encode(&result));
        Self::routed(fields, result)
    }

    /// Decodes one WebSocket message's payload into a message, keeping a response's
    /// `result` as the bytes it came in (see [`super::raw`]): the hot path.
    pub fn decode_routed(
        payload: Bytes,
        framing: Framing,
        limit: usize,
        buffer: &mut DecodeBuffer,
    ) -> Result<Routed, FrameError> {
        let frame = match framing {
            Framing::Binary => payload,
            Framing::Base64Text => {
                check_base64_size(&payload, limit)?;
                buffer.decode(&payload)?
            }
        };
        let (fields, result) = raw::split_message(&frame, "result", limit)?;
        Self::routed(fields, result)
    }

    fn routed(mut fields: Fields, result: Option<RawValue>) -> Result<Routed, FrameError> {
        let session = match fields.take("session") {
            None | Some(Msgpack::Nil) => None,
            Some(Msgpack::String(s)) => Some(s.into_str().ok_or(FrameError::BadField {
                kind: "message",
                field: "session",
            })?),
            Some(_) => {
                return Err(FrameError::BadField {
                    kind: "message",
                    field: "session",
                });
            }
        };
        let message = Self::parse_fields(&mut fields, result)?;
        if matches!(message, PluginMessage::Bye) && session.is_none() {
            return Err(FrameError::BadField {
                kind: "bye",
                field: "session",
            });
        }
        Ok(Routed { session, message })
    }

    fn parse_fields(fields: &mut Fields, result: Option<RawValue>) -> Result<PluginMessage, FrameError> {
        let kind = match fields.take("t") {
            Some(Msgpack::String(s)) => s.into_str().ok_or(FrameError::NotAMessage)?,
            _ => return Err(FrameError::NotAMessage),
        };
        match kind.as_str() {
            "hello" if fields.0.iter().all(|(key, _)| key.as_str() != Some("sessionId")) => parse_pairing_hello(fields),
            "hello" => parse_hello(fields).map(PluginMessage::Hello),
            "bye" => Ok(PluginMessage::Bye),
            "auth" => Ok(PluginMessage::Auth {
                proof: fields
                    .take("proof")
                    .and_then(into_string)
                    .and_then(|text| BASE64.decode_to_vec(text).ok())
                    .unwrap_or_default(),
            }),
            "response" => {
                let id = fields.uint("response", "id")?;
                let ok = matches!(fields.take("ok"), Some(Msgpack::Boolean(true)));
                let outcome = if ok {
                    Ok(result.unwrap_or_else(RawValue::nil))
                } else {
                    Err(parse_failure(fields.take("error")))
                };
                Ok(PluginMessage::Response { id, outcome })
            }
            "progress" => Ok(PluginMessage::Progress {
                id: fields.uint("progress", "id")?,
                progress: fields
                    .take("progress")
                    .as_ref()
                    .and_then(as_f64)
                    .ok_or(FrameError::BadField {
                        kind: "progress",
                        field: "progress",
                    })?,
                total: fields.take("total").as_ref().and_then(as_f64),
                message: fields.take("message").and_then(into_string),
            }),
            "event" => Ok(PluginMessage::Event {
                event: fields.take("event").and_then(into_string).ok_or(FrameError::BadField {
                    kind: "event",
                    field: "event",
                })?,
                data: fields.take("data").unwrap_or(Msgpack::Nil),
            }),
            "pong" => Ok(PluginMessage::Pong {
                n: fields.uint("pong", "n")?,
            }),
            _ => Ok(PluginMessage::Unknown(kind)),
        }
    }
}

/// A `hello` without a `sessionId`: a paired plugin's first, `{protocol, nonce}` alone.
fn parse_pairing_hello(fields: &mut Fields) -> Result<PluginMessage, FrameError> {
    const K: &str = "hello";
    let protocol = fields.uint(K, "protocol")?;
    let nonce = fields
        .take("nonce")
        .and_then(into_string)
        .and_then(|text| BASE64.decode_to_vec(text).ok())
        .filter(|bytes| bytes.len() == NONCE_BYTES)
        // A hello with neither names no session: the field it lacks is sessionId.
        .ok_or(FrameError::BadField {
            kind: K,
            field: "sessionId",
        })?;
    Ok(PluginMessage::PairingHello { protocol, nonce })
}

fn parse_hello(fields: &mut Fields) -> Result<Hello, FrameError> {
    const K: &str = "hello";
    let string = |fields: &mut Fields, field: &'static str| {
        fields
            .take(field)
            .and_then(into_string)
            .ok_or(FrameError::BadField { kind: K, field })
    };
    let protocol = fields.uint(K, "protocol")?;
    let plugin_version = string(fields, "pluginVersion")?;
    let session_id = string(fields, "sessionId")?;
    let instance_id = string(fields, "instanceId")?;
    let context = string(fields, "context")
        .ok()
        .and_then(|c| Context::parse(&c))
        .ok_or(FrameError::BadField {
            kind: K,
            field: "context",
        })?;
    let place_name = fields.take("placeName").and_then(into_string).unwrap_or_default();
    let place_id = fields.take("placeId").as_ref().and_then(as_i64).unwrap_or(0);
    let game_id = fields.take("gameId").as_ref().and_then(as_i64).unwrap_or(0);
    let state = string(fields, "state")?;
    let actions = match fields.take("actions") {
        Some(Msgpack::Array(items)) => items.into_iter().filter_map(into_string).collect(),
        // An empty Luau table may arrive as an empty map.
        Some(Msgpack::Map(items)) if items.is_empty() => Vec::new(),
        _ => {
            return Err(FrameError::BadField {
                kind: K,
                field: "actions",
            });
        }
    };
    if session_id.is_empty() {
        return Err(FrameError::BadField {
            kind: K,
            field: "sessionId",
        });
    }
    // A nonce that is not base64 of 16 bytes asks for nothing the host can answer.
    let nonce = match fields.take("nonce") {
        None | Some(Msgpack::Nil) => None,
        Some(value) => Some(
            into_string(value)
                .and_then(|text| BASE64.decode_to_vec(text).ok())
                .filter(|bytes| bytes.len() == NONCE_BYTES)
                .ok_or(FrameError::BadField {
                    kind: K,
                    field: "nonce",
                })?,
        ),
    };
    // A player name that is not a string names nobody.
    let player = fields
        .take("player")
        .and_then(into_string)
        .filter(|name| !name.is_empty());
    let studio_version = fields
        .take("studioVersion")
        .and_then(into_string)
        .filter(|v| !v.is_empty());
    // Not an array of strings: nothing is known missing (the tools still answer for
    // themselves, `unsupported` included).
    let missing = match fields.take("missing") {
        Some(Msgpack::Array(items)) => items.into_iter().filter_map(into_string).collect(),
        _ => Vec::new(),
    };
    // Anything but `true` is not paused (older plugins say nothing).
    let paused = matches!(fields.take("paused"), Some(Msgpack::Boolean(true)));
    Ok(Hello {
        protocol,
        plugin_version,
        session_id,
        instance_id,
        context,
        place_name,
        place_id,
        game_id,
        state,
        actions,
        nonce,
        player,
        studio_version,
        missing,
        paused,
    })
}

fn parse_failure(error: Option<Msgpack>) -> PluginFailure {
    let mut fields = match error {
        Some(Msgpack::Map(entries)) => Fields(entries),
        Some(other) => {
            return PluginFailure {
                code: "plugin_error".into(),
                message: super::value::to_json(&other).to_string(),
                details: None,
            };
        }
        None => Fields(Vec::new()),
    };
    PluginFailure {
        code: fields
            .take("code")
            .and_then(into_string)
            .unwrap_or_else(|| "plugin_error".into()),
        message: fields
            .take("message")
            .and_then(into_string)
            .unwrap_or_else(|| "the plugin reported an error without a message".into()),
        details: fields.take("details"),
    }
}

fn as_i64(value: &Msgpack) -> Option<i64> {
    match value {
        Msgpack::Integer(i) => i.as_i64(),
        Msgpack::F64(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(*f as i64),
        _ => None,
    }
}

/// Host → plugin messages.
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum HostMessage<'a> {
    /// The host proves itself to a paired plugin (PROTOCOL.md, "Pairing is mutual"); both
    /// fields are base64.
    Challenge {
        host_nonce: &'a str,
        proof: &'a str,
    },
    /// To a plugin whose first `hello` was a pairing one: both sides proved themselves;
    /// now its full `hello`.
    Proven,
    Welcome {
        protocol: u64,
        server_version: &'a str,
        session_id: &'a str,
        /// This host accepts more `hello`s on the connection, one per playtest DataModel
        /// the plugin carries (PROTOCOL.md, Sessions).
        multiplex: bool,
    },
    Reject {
        code: &'a str,
        message: &'a str,
        /// Set when only that multiplexed session is refused (the connection stays).
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<&'a str>,
    },
    Request {
        id: u64,
        action: &'a str,
        args: &'a Msgpack,
        timeout_ms: u64,
        /// The multiplexed session the request is for; absent for the connection's own.
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<&'a str>,
        /// The host chose this (edit) session only because the caller named no context and
        /// no playtest was known: an edit plugin that sees a test starting answers
        /// `context_changed` without running it, and the host resolves the call again
        /// (PROTOCOL.md, Sessions). Absent when false.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        defaulted: bool,
        /// A write's `operationId` (its caller chose it): the plugin keeps the request's
        /// outcome under it for `state {operationId}`. Absent for reads.
        #[serde(skip_serializing_if = "Option::is_none")]
        operation_id: Option<&'a str>,
        /// The host's own request, not one a caller made: the Studio Bridge panel does not
        /// list it. Absent when false.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        quiet: bool,
    },
    Cancel {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<&'a str>,
    },
    Ping {
        n: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(&str, Msgpack)>) -> Msgpack {
        Msgpack::Map(entries.into_iter().map(|(k, v)| (Msgpack::from(k), v)).collect())
    }

    fn bytes_of(value: &Msgpack) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, value).unwrap();
        out
    }

    fn parse(value: Msgpack) -> Result<PluginMessage, FrameError> {
        PluginMessage::parse_routed(value).map(|routed| routed.message)
    }

    fn hello() -> Msgpack {
        map(vec![
            ("t", "hello".into()),
            ("protocol", 1.into()),
            ("pluginVersion", "0.1.0".into()),
            ("sessionId", "s1".into()),
            ("instanceId", "i1".into()),
            ("context", "edit".into()),
            ("placeName", "Place1".into()),
            ("placeId", Msgpack::F64(123.0)),
            ("gameId", 0.into()),
            ("state", "Edit".into()),
            ("actions", Msgpack::Array(vec!["exec".into()])),
            ("somethingNew", true.into()),
        ])
    }

    #[test]
    fn a_message_names_the_carried_session_it_belongs_to() {
        let response = map(vec![
            ("t", "response".into()),
            ("id", 7.into()),
            ("ok", true.into()),
            ("session", "s-server".into()),
            ("result", 1.into()),
        ]);
        let routed = PluginMessage::parse_routed(response).unwrap();
        assert_eq!(routed.session.as_deref(), Some("s-server"));
        assert!(matches!(routed.message, PluginMessage::Response { id: 7, .. }));
        let own = PluginMessage::parse_routed(map(vec![("t", "pong".into()), ("n", 1.into())])).unwrap();
        assert_eq!(own.session, None);
        let bye = PluginMessage::parse_routed(map(vec![("t", "bye".into()), ("session", "s".into())])).unwrap();
        assert_eq!(bye.message, PluginMessage::Bye);
        assert!(
            PluginMessage::parse_routed(map(vec![("t", "bye".into())])).is_err(),
            "a bye names its session"
        );
        assert!(
            PluginMessage::parse_routed(map(vec![("t", "pong".into()), ("n", 1.into()), ("session", 5.into())]))
                .is_err()
        );
    }

    #[test]
    fn requests_for_a_carried_session_say_so_and_others_do_not() {
        let args = Msgpack::Nil;
        let tagged = encode_frame(
            &HostMessage::Request {
                id: 1,
                action: "exec",
                args: &args,
                timeout_ms: 5,
                session: Some("s-client"),
                defaulted: false,
                operation_id: None,
                quiet: true,
            },
            Framing::Binary,
        );
        let Frame::Binary(bytes) = tagged else { unreachable!() };
        let value = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        assert_eq!(value["session"].as_str(), Some("s-client"));
        assert_eq!(value["quiet"].as_bool(), Some(true));
        let untagged = encode_frame(&HostMessage::Cancel { id: 1, session: None }, Framing::Binary);
        let Frame::Binary(bytes) = untagged else { unreachable!() };
        let value = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        let Msgpack::Map(entries) = value else { unreachable!() };
        assert!(entries.iter().all(|(k, _)| k.as_str() != Some("session")));
    }

    #[test]
    fn hello_parses_in_both_framings() {
        let bytes = bytes_of(&hello());
        for (payload, framing) in [
            (bytes.clone(), Framing::Binary),
            (BASE64.encode_to_string(&bytes).into_bytes(), Framing::Base64Text),
        ] {
            let value = decode_frame(&payload, framing, 1 << 20).unwrap();
            let PluginMessage::Hello(h) = parse(value).unwrap() else {
                panic!("not a hello");
            };
            assert_eq!(h.session_id, "s1");
            assert_eq!(h.context, Context::Edit);
            assert_eq!(h.place_id, 123);
            assert_eq!(h.actions, vec!["exec".to_string()]);
        }
    }

    /// A response of `size` bytes of binary `result`, as a base64 text frame.
    fn large_text_response(id: u64, size: usize) -> Bytes {
        let frame = bytes_of(&map(vec![
            ("t", "response".into()),
            ("id", id.into()),
            ("ok", true.into()),
            (
                "result",
                Msgpack::Binary((0..size).map(|i| (i * 31 + id as usize) as u8).collect()),
            ),
        ]));
        Bytes::from(BASE64.encode_to_string(frame))
    }

    fn decode_large(buffer: &mut DecodeBuffer, id: u64) -> RawValue {
        let frame = large_text_response(id, 400_000);
        let routed = PluginMessage::decode_routed(frame, Framing::Base64Text, 1 << 20, buffer).unwrap();
        let PluginMessage::Response {
            id: got,
            outcome: Ok(result),
        } = routed.message
        else {
            panic!("not a response");
        };
        assert_eq!(got, id);
        result
    }

    fn result_bytes(id: u64) -> Vec<u8> {
        (0..400_000).map(|i| (i * 31 + id as usize) as u8).collect()
    }

    #[test]
    fn a_large_text_frame_reuses_the_last_ones_memory_only_once_it_was_let_go() {
        let mut buffer = DecodeBuffer::default();
        let first = decode_large(&mut buffer, 1);
        let first_at = first.as_bytes().as_ptr();
        drop(first);
        // Nothing of the first is held: the second lands in the same memory.
        let second = decode_large(&mut buffer, 2);
        assert_eq!(second.as_bytes().as_ptr(), first_at);
        // The second is still held: the third gets memory of its own, and neither changes.
        let third = decode_large(&mut buffer, 3);
        assert_ne!(third.as_bytes().as_ptr(), second.as_bytes().as_ptr());
        assert_eq!(second.decode().unwrap(), Msgpack::Binary(result_bytes(2)));
        assert_eq!(third.decode().unwrap(), Msgpack::Binary(result_bytes(3)));
        // Bad base64 is an error, and the buffer still works after it.
        let bad = Bytes::from(vec![b'!'; 400_000]);
        assert!(PluginMessage::decode_routed(bad, Framing::Base64Text, 1 << 20, &mut buffer).is_err());
        assert_eq!(
            decode_large(&mut buffer, 4).decode().unwrap(),
            Msgpack::Binary(result_bytes(4))
        );
    }

    #[test]
    fn a_client_hello_names_its_player_and_other_hellos_name_none() {
        let PluginMessage::Hello(edit) = parse(hello()).unwrap() else {
            panic!("not a hello");
        };
        assert_eq!(edit.player, None);
        let Msgpack::Map(mut entries) = hello() else {
            unreachable!()
        };
        entries.push(("player".into(), "Player2".into()));
        let PluginMessage::Hello(client) = parse(Msgpack::Map(entries.clone())).unwrap() else {
            panic!("not a hello");
        };
        assert_eq!(client.player.as_deref(), Some("Player2"));
        // A name that is not a string, or is empty, names nobody.
        for bad in [Msgpack::from(7), Msgpack::from("")] {
            let mut entries = entries.clone();
            entries.last_mut().unwrap().1 = bad;
            let PluginMessage::Hello(h) = parse(Msgpack::Map(entries)).unwrap() else {
                panic!("not a hello");
            };
            assert_eq!(h.player, None);
        }
    }

    #[test]
    fn a_hello_says_its_studios_version_and_what_it_lacks() {
        let PluginMessage::Hello(older) = parse(hello()).unwrap() else {
            panic!("not a hello");
        };
        assert_eq!(
            (older.studio_version, older.missing.len()),
            (None, 0),
            "an older plugin says neither"
        );
        let Msgpack::Map(mut entries) = hello() else {
            unreachable!()
        };
        entries.push(("studioVersion".into(), "0.700.0.7000123".into()));
        let missing = vec![
            Msgpack::from("StudioTestService.ExecuteMultiplayerTestAsync"),
            Msgpack::from(3),
        ];
        entries.push(("missing".into(), Msgpack::Array(missing)));
        let PluginMessage::Hello(hello) = parse(Msgpack::Map(entries)).unwrap() else {
            panic!("not a hello");
        };
        assert_eq!(hello.studio_version.as_deref(), Some("0.700.0.7000123"));
        assert!(!hello.paused, "not paused unless it says so");
        assert_eq!(
            hello.missing,
            ["StudioTestService.ExecuteMultiplayerTestAsync"],
            "names only"
        );
    }

    #[test]
    fn a_hello_without_a_session_is_a_pairing_hello_of_protocol_and_nonce() {
        let pairing = map(vec![
            ("t", "hello".into()),
            ("protocol", 1.into()),
            ("nonce", "AAECAwQFBgcICQoLDA0ODw==".into()),
            ("sha256", "luau".into()),
        ]);
        assert_eq!(
            parse(pairing).unwrap(),
            PluginMessage::PairingHello {
                protocol: 1,
                nonce: (0..16).collect()
            }
        );
        let nothing = map(vec![("t", "hello".into()), ("protocol", 1.into())]);
        let error = parse(nothing).unwrap_err().to_string();
        assert!(
            error.contains("sessionId"),
            "a hello of neither names the field it lacks: {error}"
        );
    }

    #[test]
    fn hello_missing_a_field_names_it() {
        let Msgpack::Map(mut entries) = hello() else {
            unreachable!()
        };
        entries.retain(|(k, _)| k.as_str() != Some("sessionId"));
        let err = parse(Msgpack::Map(entries)).unwrap_err();
        assert!(err.to_string().contains("sessionId"), "{err}");
    }

    #[test]
    fn responses_parse_ok_and_error() {
        let ok = map(vec![
            ("t", "response".into()),
            ("id", Msgpack::F64(7.0)),
            ("ok", true.into()),
            ("result", 5.into()),
        ]);
        let expected = PluginMessage::Response {
            id: 7,
            outcome: Ok(RawValue::encode(&5.into())),
        };
        let frame = Bytes::from(bytes_of(&ok));
        assert_eq!(parse(ok).unwrap(), expected);
        assert_eq!(
            PluginMessage::decode_routed(frame, Framing::Binary, 1024, &mut DecodeBuffer::default())
                .unwrap()
                .message,
            expected,
            "the raw decoder agrees with the tree one"
        );
        let err = map(vec![
            ("t", "response".into()),
            ("id", 8.into()),
            ("ok", false.into()),
            (
                "error",
                map(vec![("code", "not_found".into()), ("message", "no such path".into())]),
            ),
        ]);
        let PluginMessage::Response {
            id: 8,
            outcome: Err(failure),
        } = parse(err).unwrap()
        else {
            panic!("not an error response");
        };
        assert_eq!(failure.code, "not_found");
        assert_eq!(failure.message, "no such path");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(
            decode_frame(&[0x81, 0xa1], Framing::Binary, 1024).is_err(),
            "truncated map"
        );
        assert!(decode_frame(b"!!notbase64", Framing::Base64Text, 1024).is_err());
        assert!(parse(Msgpack::from(3)).is_err());
        assert!(parse(map(vec![("x", 1.into())])).is_err());
        let unknown = map(vec![("t", "teleport".into())]);
        assert_eq!(parse(unknown).unwrap(), PluginMessage::Unknown("teleport".into()));
    }

    #[test]
    fn deeply_nested_frames_are_rejected_not_fatal() {
        // 100,000 nested one-element arrays, then nil: a tiny frame that would overflow
        // a naive recursive decoder's stack.
        let mut frame = vec![0x91u8; 100_000];
        frame.push(0xc0);
        // Run where a tokio worker would: on a 2 MiB stack, here unoptimized.
        let (too_deep, deepest_allowed) = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                let mut deepest = vec![0x91u8; MAX_DEPTH / 2 - 1];
                deepest.push(0xc0);
                (
                    decode_frame(&frame, Framing::Binary, 1 << 20).is_err(),
                    decode_frame(&deepest, Framing::Binary, 1 << 20).is_ok(),
                )
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert!(too_deep, "a frame nested past MAX_DEPTH is an error");
        assert!(deepest_allowed, "a frame nested just within MAX_DEPTH decodes");
    }

    #[test]
    fn oversized_frames_are_refused_before_decoding() {
        let payload = vec![0u8; 2048];
        assert!(matches!(
            decode_frame(&payload, Framing::Binary, 1024),
            Err(FrameError::TooLarge { .. })
        ));
        let text = BASE64.encode_to_string(&payload).into_bytes();
        assert!(matches!(
            decode_frame(&text, Framing::Base64Text, 1024),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn outbound_messages_are_named_maps() {
        let args = map(vec![("script", "return 1".into())]);
        let Frame::Binary(bytes) = encode_frame(
            &HostMessage::Request {
                id: 3,
                action: "exec",
                args: &args,
                timeout_ms: 1000,
                session: None,
                defaulted: false,
                operation_id: None,
                quiet: false,
            },
            Framing::Binary,
        ) else {
            panic!("asked for binary");
        };
        let value = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        assert_eq!(
            value,
            map(vec![
                ("t", "request".into()),
                ("id", 3.into()),
                ("action", "exec".into()),
                ("args", args.clone()),
                ("timeoutMs", 1000.into()),
            ])
        );
        let Frame::Text(text) = encode_frame(&HostMessage::Ping { n: 2 }, Framing::Base64Text) else {
            panic!("asked for text");
        };
        let bytes = BASE64.decode_to_vec(text).unwrap();
        let value = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        assert_eq!(value, map(vec![("t", "ping".into()), ("n", 2.into())]));
    }
}
