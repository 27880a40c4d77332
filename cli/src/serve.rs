//! `rulegym serve`: a Search-R1-compatible retrieval server over an index (feature `server`).

use rulegym::Result;
use std::path::PathBuf;

/// Flags of `rulegym serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index file written by `rulegym index`.
    #[arg(long)]
    index: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// TCP port (0 picks a free one, printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Passages per query when a request gives no `topk`.
    #[arg(long, default_value_t = 3)]
    topk: usize,
    /// Most queries encoded and searched together across concurrent requests.
    #[arg(long, default_value_t = 256)]
    max_batch: usize,
    /// Most characters of queries encoded together (at least one query): bounds how long a
    /// request arriving during a batch waits, with a dense encoder.
    #[arg(long, default_value_t = 16_384)]
    max_batch_chars: usize,
    /// Connection bounds (a connection is a session of this stateless server).
    #[command(flatten)]
    sessions: super::SessionArgs,
}

/// Runs `rulegym serve` until interrupted.
pub fn run(args: Args) -> Result<()> {
    use rulegym::retrieval::RetrievalError;
    use rulegym::retrieval::server::{RetrievalServerConfig, serve};
    let index = std::sync::Arc::new(rulegym::retrieval::SearchIndex::load(&args.index)?);
    let cfg = RetrievalServerConfig {
        default_topk: args.topk,
        max_batch: args.max_batch,
        max_batch_chars: args.max_batch_chars,
        sessions: args.sessions.limits()?,
        ..RetrievalServerConfig::default()
    };
    cfg.validate()?;
    let rt = rulegym::sessions::server_runtime()
        .map_err(|e| RetrievalError::Io("start tokio runtime".into(), e))?;
    rt.block_on(async move {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| RetrievalError::Io(format!("bind {addr}"), e))?;
        // The bound address (port 0 picks a free one).
        let addr = listener.local_addr().map_or(addr, |a| a.to_string());
        eprintln!(
            "serving {} documents ({}) on http://{addr} (POST /retrieve, GET /health)",
            index.len(),
            index.header().encoder_identity
        );
        serve(listener, index, cfg).await
    })?;
    Ok(())
}
