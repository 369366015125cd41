//! Messages between studio-bridge processes on `/v1/client` (PROTOCOL.md, Peer ⇄ host).
//! Binary msgpack frames only. Payloads (`args`, `result`) stay msgpack end to end: the
//! peer converts them to JSON itself, exactly as a host would.

use bytes::Bytes;
use rmpv::Value as Msgpack;
use serde::Serialize;

use super::frame::{Fields, FrameError, as_f64, as_u64, into_string};
use super::messages::{Framing, decode_frame};
use super::raw::{self, RawValue};
use super::{Context, ErrorCode, Ran, Target, ToolError, value};

/// Peer → host.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerRequest {
    Call {
        id: u64,
        target: Target,
        action: String,
        args: Msgpack,
        /// The whole call's deadline, as the host applies it.
        timeout_ms: u64,
        /// **As built:** the `timeoutMs` to give the plugin when it differs from the
        /// deadline (`exec` gives the plugin `timeoutMs` and waits 5 s longer).
        plugin_timeout_ms: Option<u64>,
        /// **As built:** the action's default context from the peer's own command
        /// table, so the host needs no command table of its own (`edit` when absent).
        default_context: Context,
        /// A write's `operationId`, passed on to the plugin's request.
        operation_id: Option<String>,
        /// The caller's own internal request (`quiet` on the plugin's request).
        quiet: bool,
    },
    Cancel {
        id: u64,
    },
    Sessions {
        id: u64,
    },
    Subscribe {
        id: u64,
        target: Target,
        events: Vec<String>,
    },
    Unknown(String),
}

/// Host → peer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostReply {
    Result {
        id: u64,
        outcome: Result<RawValue, ToolError>,
        /// The session that ran the call (absent for `sessions` and `subscribe`).
        ran: Option<Ran>,
    },
    Progress {
        id: u64,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Event {
        id: u64,
        session_id: String,
        event: String,
        data: Msgpack,
    },
    Unknown(String),
}

fn kind(fields: &mut Fields) -> Result<String, FrameError> {
    fields.take("t").and_then(into_string).ok_or(FrameError::NotAMessage)
}

fn target(value: Option<Msgpack>) -> Target {
    let mut fields = match value {
        Some(Msgpack::Map(entries)) => Fields(entries),
        _ => return Target::default(),
    };
    Target {
        session_id: fields.take("sessionId").and_then(into_string),
        instance_id: fields.take("instanceId").and_then(into_string),
        context: fields
            .take("context")
            .and_then(into_string)
            .and_then(|c| Context::parse(&c)),
    }
}

impl PeerRequest {
    /// Decodes one binary frame from a peer (within `limit` bytes and the nesting limit of
    /// [`decode_frame`]) and takes it apart.
    pub fn decode(frame: &[u8], limit: usize) -> Result<PeerRequest, FrameError> {
        decode_frame(frame, Framing::Binary, limit).and_then(PeerRequest::parse)
    }

    pub fn parse(value: Msgpack) -> Result<PeerRequest, FrameError> {
        let Msgpack::Map(entries) = value else {
            return Err(FrameError::NotAMessage);
        };
        let mut fields = Fields(entries);
        let t = kind(&mut fields)?;
        Ok(match t.as_str() {
            "call" => PeerRequest::Call {
                id: fields.uint("call", "id")?,
                target: target(fields.take("target")),
                action: fields
                    .take("action")
                    .and_then(into_string)
                    .ok_or(FrameError::BadField {
                        kind: "call",
                        field: "action",
                    })?,
                args: match fields.take("args") {
                    None | Some(Msgpack::Nil) => Msgpack::Map(Vec::new()),
                    Some(args) => args,
                },
                timeout_ms: fields.uint("call", "timeoutMs")?,
                plugin_timeout_ms: fields.take("pluginTimeoutMs").as_ref().and_then(as_u64),
                default_context: fields
                    .take("defaultContext")
                    .and_then(into_string)
                    .and_then(|c| Context::parse(&c))
                    .unwrap_or(Context::Edit),
                operation_id: fields.take("operationId").and_then(into_string),
                quiet: fields.take("quiet").is_some_and(|q| q.as_bool() == Some(true)),
            },
            "cancel" => PeerRequest::Cancel {
                id: fields.uint("cancel", "id")?,
            },
            "sessions" => PeerRequest::Sessions {
                id: fields.uint("sessions", "id")?,
            },
            "subscribe" => PeerRequest::Subscribe {
                id: fields.uint("subscribe", "id")?,
                target: target(fields.take("target")),
                events: match fields.take("events") {
                    Some(Msgpack::Array(items)) => items.into_iter().filter_map(into_string).collect(),
                    _ => Vec::new(),
                },
            },
            _ => PeerRequest::Unknown(t),
        })
    }
}

impl HostReply {
    /// Decodes one binary frame from the host, as [`PeerRequest::decode`] does the other
    /// way: the same size and nesting limits, so a hostile host cannot overflow a peer's
    /// stack either.
    pub fn decode(frame: &[u8], limit: usize) -> Result<HostReply, FrameError> {
        Self::decode_bytes(Bytes::copy_from_slice(frame), limit)
    }

    pub fn parse(value: Msgpack) -> Result<HostReply, FrameError> {
        let Msgpack::Map(entries) = value else {
            return Err(FrameError::NotAMessage);
        };
        let mut fields = Fields(entries);
        let result = fields.take("result").map(|result| RawValue::encode(&result));
        Self::from_fields(fields, result)
    }

    /// [`HostReply::decode`] without a copy, keeping a call's `result` as the bytes it
    /// came in (see [`super::raw`]): a large result crosses to the peer without being
    /// decoded.
    pub fn decode_bytes(frame: Bytes, limit: usize) -> Result<HostReply, FrameError> {
        let (fields, result) = raw::split_message(&frame, "result", limit)?;
        Self::from_fields(fields, result)
    }

    fn from_fields(mut fields: Fields, result: Option<RawValue>) -> Result<HostReply, FrameError> {
        let t = kind(&mut fields)?;
        Ok(match t.as_str() {
            "result" => {
                let id = fields.uint("result", "id")?;
                let ok = matches!(fields.take("ok"), Some(Msgpack::Boolean(true)));
                let outcome = if ok {
                    Ok(result.unwrap_or_else(RawValue::nil))
                } else {
                    Err(error(fields.take("error")))
                };
                let session_id = fields.take("sessionId").and_then(into_string);
                let context = fields
                    .take("context")
                    .and_then(into_string)
                    .and_then(|c| Context::parse(&c));
                let ran = session_id
                    .zip(context)
                    .map(|(session_id, context)| Ran { session_id, context });
                HostReply::Result { id, outcome, ran }
            }
            "progress" => HostReply::Progress {
                id: fields.uint("progress", "id")?,
                progress: fields.take("progress").as_ref().and_then(as_f64).unwrap_or(0.0),
                total: fields.take("total").as_ref().and_then(as_f64),
                message: fields.take("message").and_then(into_string),
            },
            "event" => HostReply::Event {
                id: fields.uint("event", "id")?,
                session_id: fields.take("sessionId").and_then(into_string).unwrap_or_default(),
                event: fields.take("event").and_then(into_string).unwrap_or_default(),
                data: fields.take("data").unwrap_or(Msgpack::Nil),
            },
            _ => HostReply::Unknown(t),
        })
    }
}

fn error(value: Option<Msgpack>) -> ToolError {
    let mut fields = match value {
        Some(Msgpack::Map(entries)) => Fields(entries),
        _ => Fields(Vec::new()),
    };
    let code = fields
        .take("code")
        .and_then(into_string)
        .and_then(|c| ErrorCode::parse(&c))
        .unwrap_or(ErrorCode::PluginError);
    let message = fields
        .take("message")
        .and_then(into_string)
        .unwrap_or_else(|| "the bridge host reported an error".into());
    let error = ToolError::new(code, message);
    match fields.take("details") {
        None | Some(Msgpack::Nil) => error,
        Some(details) => error.with_details(value::to_json(&details)),
    }
}

/// Encodable forms of both directions.
#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum PeerOut<'a> {
    Call {
        id: u64,
        target: &'a Target,
        action: &'a str,
        args: &'a Msgpack,
        timeout_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        plugin_timeout_ms: Option<u64>,
        default_context: Context,
        #[serde(skip_serializing_if = "Option::is_none")]
        operation_id: Option<&'a str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        quiet: bool,
    },
    Cancel {
        id: u64,
    },
    Sessions {
        id: u64,
    },
    Subscribe {
        id: u64,
        target: &'a Target,
        events: &'a [String],
    },
}

#[derive(Debug, Serialize)]
#[serde(tag = "t", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum HostOut<'a> {
    Result {
        id: u64,
        ok: bool,
        /// The `result` is not a field here: [`encode_result`] appends it as the bytes it
        /// is kept in.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a ToolError>,
        /// **As built:** where the call ran, for a `call` that reached a session.
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        context: Option<Context>,
    },
    Progress {
        id: u64,
        progress: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<&'a str>,
    },
    Event {
        id: u64,
        session_id: &'a str,
        event: &'a str,
        data: &'a serde_json::Value,
    },
}

/// Encodes one frame (binary msgpack with named fields).
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(message).unwrap_or_default()
}

/// Encodes a [`HostOut::Result`] with its `result` appended as raw msgpack: the map
/// rmp_serde writes (a fixmap: the message has at most six fields) gets one more entry,
/// so a result of megabytes is copied once, never decoded or re-encoded.
pub fn encode_result(message: &HostOut<'_>, result: Option<&RawValue>) -> Vec<u8> {
    let mut bytes = encode(message);
    let Some(result) = result else {
        return bytes;
    };
    match bytes.first_mut() {
        Some(header) if *header & 0xf0 == 0x80 && *header & 0x0f < 0x0f => *header += 1,
        // Unreachable for the messages of this module; say so rather than send garbage.
        _ => {
            tracing::error!("a host result could not be encoded");
            return Vec::new();
        }
    }
    bytes.reserve(7 + result.len());
    bytes.push(0xa6);
    bytes.extend_from_slice(b"result");
    bytes.extend_from_slice(result.as_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Msgpack {
        rmpv::decode::read_value(&mut &bytes[..]).unwrap()
    }

    #[test]
    fn calls_round_trip() {
        let target = Target {
            session_id: None,
            instance_id: Some("A".into()),
            context: Some(Context::Server),
        };
        let args = Msgpack::Map(vec![("script".into(), "return 1".into())]);
        let bytes = encode(&PeerOut::Call {
            id: 9,
            target: &target,
            action: "exec",
            args: &args,
            timeout_ms: 6000,
            plugin_timeout_ms: Some(1000),
            default_context: Context::Server,
            operation_id: Some("op-1"),
            quiet: true,
        });
        assert_eq!(
            PeerRequest::parse(decode(&bytes)).unwrap(),
            PeerRequest::Call {
                id: 9,
                target,
                action: "exec".into(),
                args,
                timeout_ms: 6000,
                plugin_timeout_ms: Some(1000),
                default_context: Context::Server,
                operation_id: Some("op-1".into()),
                quiet: true,
            }
        );
    }

    #[test]
    fn results_round_trip_with_errors_and_binary() {
        let payload = RawValue::encode(&Msgpack::Binary(vec![1, 2, 3]));
        let message = HostOut::Result {
            id: 1,
            ok: true,
            error: None,
            session_id: Some("S1"),
            context: Some(Context::Server),
        };
        let bytes = encode_result(&message, Some(&payload));
        assert_eq!(
            HostReply::parse(decode(&bytes)).unwrap(),
            HostReply::decode(&bytes, usize::MAX).unwrap(),
            "the tree and the raw decoders agree"
        );
        assert_eq!(
            HostReply::decode(&bytes, usize::MAX).unwrap(),
            HostReply::Result {
                id: 1,
                outcome: Ok(payload),
                ran: Some(Ran {
                    session_id: "S1".into(),
                    context: Context::Server
                }),
            }
        );
        let failure = ToolError::new(ErrorCode::AmbiguousInstance, "pick one")
            .with_details(serde_json::json!({"sessions": [{"sessionId": "a"}]}));
        let bytes = encode(&HostOut::Result {
            id: 2,
            ok: false,
            error: Some(&failure),
            session_id: None,
            context: None,
        });
        assert_eq!(
            HostReply::parse(decode(&bytes)).unwrap(),
            HostReply::Result {
                id: 2,
                outcome: Err(failure),
                ran: None,
            }
        );
    }

    #[test]
    fn subscribe_and_events_parse() {
        let target = Target::default();
        let events = vec!["log".to_string()];
        let bytes = encode(&PeerOut::Subscribe {
            id: 3,
            target: &target,
            events: &events,
        });
        assert_eq!(
            PeerRequest::parse(decode(&bytes)).unwrap(),
            PeerRequest::Subscribe { id: 3, target, events }
        );
        let data = serde_json::json!({"seq": 1, "body": "hi"});
        let bytes = encode(&HostOut::Event {
            id: 3,
            session_id: "s",
            event: "log",
            data: &data,
        });
        let HostReply::Event {
            id: 3,
            session_id,
            event,
            data: wire,
        } = HostReply::parse(decode(&bytes)).unwrap()
        else {
            panic!("not an event");
        };
        assert_eq!((session_id.as_str(), event.as_str()), ("s", "log"));
        assert_eq!(value::to_json(&wire), data);
    }
}
