//! A retrieval server on an ephemeral loopback port, shared by the server tests
//! (`tests/integration/retrieval_server.rs`) and load bench (`benches/retrieval_server.rs`),
//! which both include this file with `#[path]`.

use rulegym::retrieval::SearchIndex;
use rulegym::retrieval::server::{RetrievalServerConfig, serve};
use std::net::SocketAddr;
use std::sync::Arc;

/// Starts a server on an ephemeral loopback port in a background runtime (2 worker threads).
pub fn start(index: Arc<SearchIndex>, cfg: RetrievalServerConfig) -> SocketAddr {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    std_listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            serve(listener, index, cfg).await.unwrap();
        });
    });
    addr
}
