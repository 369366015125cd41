//! The one WebSocket write loop, for every socket the bridge writes: a plugin's, a peer's
//! as the host serves it, and a peer's own link to its host.
//!
//! Whoever has something to send queues it ([`Outbound`]) and goes on; the socket's
//! writer task owns the sending half and feeds everything already queued before it
//! flushes once, so a burst of frames costs one write to the socket, not one each. The
//! host's sockets are axum's and the peer's is tokio-tungstenite's; [`WsMessage`] builds
//! either's messages, so both run this same loop.

use axum::extract::ws;
use futures_util::{Sink, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite;

use crate::protocol::messages::Frame;

/// What a socket's writer is told to send.
#[derive(Debug)]
pub enum Outbound {
    Frame(Frame),
    /// Close the WebSocket with this code and reason, then stop.
    Close(u16, &'static str),
    /// A WebSocket Ping (the liveness check, see `liveness.rs`).
    Ping,
}

/// Why [`write_frames`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum WriterEnd {
    /// Everyone who could queue has gone and all they queued was written.
    Drained,
    /// A Close was queued and sent.
    Closed,
    /// The socket refused a write.
    SocketFailed,
}

/// A WebSocket library's message type, as the writer builds it.
pub trait WsMessage: Sized {
    fn frame(frame: Frame) -> Self;
    fn ping() -> Self;
    fn close(code: u16, reason: &'static str) -> Self;
}

impl WsMessage for ws::Message {
    fn frame(frame: Frame) -> Self {
        match frame {
            Frame::Binary(bytes) => ws::Message::Binary(bytes.into()),
            Frame::Text(text) => ws::Message::Text(text.into()),
        }
    }
    fn ping() -> Self {
        ws::Message::Ping(Default::default())
    }
    fn close(code: u16, reason: &'static str) -> Self {
        ws::Message::Close(Some(ws::CloseFrame {
            code,
            reason: reason.into(),
        }))
    }
}

impl WsMessage for tungstenite::Message {
    fn frame(frame: Frame) -> Self {
        match frame {
            Frame::Binary(bytes) => tungstenite::Message::Binary(bytes.into()),
            Frame::Text(text) => tungstenite::Message::Text(text.into()),
        }
    }
    fn ping() -> Self {
        tungstenite::Message::Ping(Default::default())
    }
    fn close(code: u16, reason: &'static str) -> Self {
        tungstenite::Message::Close(Some(tungstenite::protocol::CloseFrame {
            code: code.into(),
            reason: reason.into(),
        }))
    }
}

/// Writes what is queued on `sink`, feeding all that is ready before each flush, until
/// the queue is drained and closed, a Close is sent, or the socket fails. `written` hears
/// the size of each frame once the socket has taken it. The sink is left open (but for a
/// Close sent): the caller closes it as its side requires.
pub async fn write_frames<S, M>(
    sink: &mut S,
    queue: &mut mpsc::UnboundedReceiver<Outbound>,
    mut written: impl FnMut(usize),
) -> WriterEnd
where
    S: Sink<M> + Unpin,
    M: WsMessage,
{
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outbound::Frame(frame) => {
                    let size = match &frame {
                        Frame::Binary(bytes) => bytes.len(),
                        Frame::Text(text) => text.len(),
                    };
                    if sink.feed(M::frame(frame)).await.is_err() {
                        return WriterEnd::SocketFailed;
                    }
                    written(size);
                }
                Outbound::Close(code, reason) => {
                    let _ = sink.send(M::close(code, reason)).await;
                    return WriterEnd::Closed;
                }
                Outbound::Ping => {
                    if sink.feed(M::ping()).await.is_err() {
                        return WriterEnd::SocketFailed;
                    }
                }
            }
            next = queue.try_recv().ok();
        }
        if sink.flush().await.is_err() {
            return WriterEnd::SocketFailed;
        }
    }
    WriterEnd::Drained
}

/// A socket's writer task: [`write_frames`], then the socket closed once the queue is
/// drained (a Close already sent, or a failed socket, needs no more).
pub async fn write_until_done<S, M>(
    mut sink: S,
    mut queue: mpsc::UnboundedReceiver<Outbound>,
    written: impl FnMut(usize),
) where
    S: Sink<M> + Unpin,
    M: WsMessage,
{
    if write_frames(&mut sink, &mut queue, written).await == WriterEnd::Drained {
        let _ = sink.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn writes_in_queue_order_and_stops_at_a_close() {
        let mut sink: Vec<tungstenite::Message> = Vec::new();
        let (tx, mut queue) = mpsc::unbounded_channel();
        tx.send(Outbound::Frame(Frame::Binary(vec![1]))).unwrap();
        tx.send(Outbound::Ping).unwrap();
        tx.send(Outbound::Frame(Frame::Text("two".into()))).unwrap();
        tx.send(Outbound::Close(4000, "bye")).unwrap();
        tx.send(Outbound::Frame(Frame::Binary(vec![3]))).unwrap();
        let mut sizes = Vec::new();
        let end = write_frames(&mut sink, &mut queue, |n| sizes.push(n)).await;
        assert_eq!(end, WriterEnd::Closed);
        assert_eq!(sizes, [1, 3]);
        assert!(matches!(&sink[0], tungstenite::Message::Binary(b) if b[..] == [1]));
        assert!(matches!(&sink[1], tungstenite::Message::Ping(_)));
        assert!(matches!(&sink[2], tungstenite::Message::Text(t) if t.as_str() == "two"));
        assert!(matches!(&sink[3], tungstenite::Message::Close(Some(f)) if u16::from(f.code) == 4000));
        assert_eq!(sink.len(), 4, "nothing after the close");
    }

    #[tokio::test]
    async fn a_closed_queue_is_drained_first() {
        let mut sink: Vec<ws::Message> = Vec::new();
        let (tx, mut queue) = mpsc::unbounded_channel();
        tx.send(Outbound::Frame(Frame::Binary(vec![9]))).unwrap();
        tx.send(Outbound::Frame(Frame::Binary(vec![8]))).unwrap();
        drop(tx);
        let end = write_frames(&mut sink, &mut queue, |_| {}).await;
        assert_eq!(end, WriterEnd::Drained);
        assert_eq!(sink.len(), 2);
    }
}
