//! siftdb's counters and latency histograms served to Prometheus.
//!
//! The `metrics` feature's `MetricsPublisher` hands every counter, gauge
//! and histogram of a database to the `metrics` facade; here the recorder
//! is `metrics-exporter-prometheus`'s, whose text this example serves on
//! `/metrics` itself (plain `std::net`, so no HTTP stack is built).
//!
//! Run with: `cargo run --example prometheus --features metrics -- --serve 127.0.0.1:9187`
//! and scrape `http://127.0.0.1:9187/metrics`. Without `--serve` it
//! publishes once, fetches its own page over the loopback and prints the
//! get latency's lines (what the examples test runs).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use siftdb::{Db, MetricsPublisher};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve_at = std::env::args().skip_while(|a| a != "--serve").nth(1);
    // Summaries with these quantiles for every histogram.
    let prometheus = PrometheusBuilder::new()
        .set_quantiles(&[0.5, 0.9, 0.99, 0.999])?
        .install_recorder()?;

    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;
    let publisher = MetricsPublisher::new().with_label("db", "example");
    for i in 0..20_000 {
        db.put(format!("user:{i:05}"), format!("profile {i}"))?;
    }
    db.flush()?;
    for i in (0..20_000).step_by(7) {
        db.get(format!("user:{i:05}"))?;
    }
    let scanned = db.prefix("user:001").count();
    println!("scanned {scanned} entries");
    // A database's own view of the same histogram.
    let gets = db.histograms().get_nanos;
    println!(
        "gets: {} (timed {}), p99 {} ns",
        gets.ops(),
        gets.samples(),
        gets.value_at_quantile(0.99)
    );
    publisher.publish(&db);

    let listener = TcpListener::bind(serve_at.as_deref().unwrap_or("127.0.0.1:0"))?;
    let address = listener.local_addr()?;
    if serve_at.is_some() {
        println!("serving http://{address}/metrics");
        std::thread::scope(|s| {
            s.spawn(|| serve(&listener, &prometheus, None));
            loop {
                std::thread::sleep(Duration::from_secs(1));
                publisher.publish(&db);
            }
        });
        return Ok(());
    }
    let page = std::thread::scope(|s| {
        let server = s.spawn(|| serve(&listener, &prometheus, Some(1)));
        let page = fetch(&address.to_string());
        let _ = server.join();
        page
    })?;
    for line in page.lines().filter(|l| l.starts_with("siftdb_get_seconds")) {
        println!("{line}");
    }
    if !page.contains("siftdb_gets{db=\"example\"}") {
        return Err(format!("the page lacks the gets counter:\n{page}").into());
    }
    db.close()?;
    Ok(())
}

/// Answers requests with the exporter's text: `requests` of them, or for ever.
fn serve(listener: &TcpListener, prometheus: &PrometheusHandle, requests: Option<usize>) {
    for stream in listener.incoming().take(requests.unwrap_or(usize::MAX)) {
        let Ok(mut stream) = stream else { continue };
        // The request line and headers, up to the blank line.
        {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
        }
        let body = prometheus.render();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// The body of `GET /metrics` from `address`.
fn fetch(address: &str) -> Result<String, std::io::Error> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response)?;
    Ok(response
        .split_once("\r\n\r\n")
        .map_or(response.clone(), |(_, body)| body.to_string()))
}
