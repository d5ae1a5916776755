//! The `bridge` host: the reference intermediary ([`Bridge`]) between the client and the
//! server, stdio on both hops (NDJSON over TCP, as a stdio↔stdio gateway is).
//!
//! Each connection the client opens gets a connection of its own to the server and a fresh
//! bridge, as a gateway that starts one upstream per client does. When either side ends its
//! connection the bridge ends the other: a server crash reaches the client as its pipe
//! breaking, and the client's reconnect brings a new upstream. The bridge records nothing
//! itself: as with a real intermediary, the trace holds what the client and the server saw,
//! each on its hop.

use std::cell::RefCell;
use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{spawn_guarded, SharedRef, SERVER_STDIO_PORT};
use crate::framing::ndjson::{LineDecoder, LineOptions};
use crate::model::{Bridge, BridgeOut, MutantSet};

/// What reaches the bridge's loop.
enum Input {
    Front(Vec<u8>),
    Back(Vec<u8>),
    /// One side ended its connection.
    Closed,
}

pub(crate) fn host(sim: &mut turmoil::Sim<'_>, shared: &SharedRef, mutants: MutantSet) {
    let shared = shared.clone();
    sim.host("bridge", move || {
        let shared = shared.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", SERVER_STDIO_PORT)).await?;
            // The bridge of the last pair of connections, which the next one goes on from.
            let last = Rc::new(RefCell::new(Bridge::new(mutants)));
            while let Ok((front, _)) = listener.accept().await {
                let back = loop {
                    match turmoil::net::TcpStream::connect(("server", SERVER_STDIO_PORT)).await {
                        Ok(s) => break s,
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                    }
                };
                spawn_guarded(&shared, relay(shared.clone(), front, back, last.clone()));
            }
            Ok(())
        }
    });
}

/// Relays one client connection and its upstream connection through a fresh [`Bridge`].
async fn relay(
    shared: SharedRef,
    front: turmoil::net::TcpStream,
    back: turmoil::net::TcpStream,
    last: Rc<RefCell<Bridge>>,
) {
    let (front_read, mut front_write) = front.into_split();
    let (back_read, mut back_write) = back.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let readers = [
        spawn_guarded(&shared, read_into(front_read, tx.clone(), Input::Front)),
        spawn_guarded(&shared, read_into(back_read, tx, Input::Back)),
    ];
    let mut bridge = Bridge::after(&last.borrow());
    let lenient = LineOptions {
        allow_crlf: true,
        allow_blank_lines: true,
        ..LineOptions::default()
    };
    let (mut from_front, mut from_back) = (LineDecoder::new(lenient), LineDecoder::new(lenient));
    while let Some(input) = rx.recv().await {
        let (decoder, front_side, bytes) = match input {
            Input::Front(b) => (&mut from_front, true, b),
            Input::Back(b) => (&mut from_back, false, b),
            Input::Closed => break,
        };
        decoder.push(&bytes);
        while let Some(line) = decoder.next_line() {
            let Ok(line) = line else { continue };
            let text = String::from_utf8_lossy(&line.bytes).into_owned();
            // Lines for the client (`true`) or the upstream, as written.
            let outs: Vec<(bool, String)> = match crate::wire::json::value_from_str(&text) {
                Ok(msg) => {
                    let outs = if front_side {
                        bridge.from_front(msg)
                    } else {
                        bridge.from_back(msg)
                    };
                    outs.into_iter()
                        .map(|o| match o {
                            BridgeOut::Front(m) => (true, m.to_string()),
                            BridgeOut::Back(m) => (false, m.to_string()),
                        })
                        .collect()
                }
                // What is not JSON is passed on as it is: the peer's own fault to judge.
                Err(_) => vec![(!front_side, text)],
            };
            for (to_front, mut text) in outs {
                let writer = if to_front {
                    &mut front_write
                } else {
                    &mut back_write
                };
                text.push('\n');
                let _ = writer.write_all(text.as_bytes()).await;
            }
        }
    }
    *last.borrow_mut() = Bridge::after(&bridge);
    for r in readers {
        r.abort();
    }
    let _ = front_write.shutdown().await;
    let _ = back_write.shutdown().await;
}

/// Reads a connection into the loop until it ends.
async fn read_into(
    mut read: turmoil::net::tcp::OwnedReadHalf,
    tx: mpsc::UnboundedSender<Input>,
    wrap: fn(Vec<u8>) -> Input,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let _ = tx.send(wrap(buf[..n].to_vec()));
            }
        }
    }
    let _ = tx.send(Input::Closed);
}
