//! A small HTTP/1.1 keep-alive load generator over a Unix socket, for `benches/e2e.sh` when
//! `oha` is not installed. One current-thread runtime, so it takes as little CPU from the
//! proxy under test as possible on a small machine.
//!
//! `loadgen SOCKET PATH CONNECTIONS SECONDS` prints oha-shaped JSON:
//! `{"summary":{"requestsPerSec":..,"requests":..},"latencyPercentiles":{"p50":s,"p99":s},"statusCodeDistribution":{..}}`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Reads one response; returns its status code.
async fn read_response(r: &mut BufReader<UnixStream>, line: &mut String) -> Result<u16> {
    line.clear();
    r.read_line(line).await?;
    let status: u16 = line.split(' ').nth(1).ok_or("no status line")?.parse()?;
    let (mut len, mut chunked) = (0usize, false);
    loop {
        line.clear();
        if r.read_line(line).await? == 0 {
            return Err("eof in headers".into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').ok_or("bad header")?;
        if k.eq_ignore_ascii_case("content-length") {
            len = v.trim().parse()?;
        } else if k.eq_ignore_ascii_case("transfer-encoding")
            && v.trim().eq_ignore_ascii_case("chunked")
        {
            chunked = true;
        }
    }
    if chunked {
        loop {
            line.clear();
            r.read_line(line).await?;
            let n = usize::from_str_radix(line.trim_end().split(';').next().unwrap_or(""), 16)?;
            skip(r, n + 2).await?;
            if n == 0 {
                break;
            }
        }
    } else {
        skip(r, len).await?;
    }
    Ok(status)
}

/// Reads and drops `n` body bytes.
async fn skip(r: &mut BufReader<UnixStream>, mut n: usize) -> Result<()> {
    let mut sink = [0u8; 16 * 1024];
    while n > 0 {
        let k = r.read(&mut sink[..n.min(16 * 1024)]).await?;
        if k == 0 {
            return Err("eof in body".into());
        }
        n -= k;
    }
    Ok(())
}

async fn worker(
    sock: String,
    req: Vec<u8>,
    until: Instant,
) -> Result<(Vec<u32>, BTreeMap<u16, u64>)> {
    let mut r = BufReader::new(UnixStream::connect(&sock).await?);
    let (mut lat, mut codes, mut line) = (Vec::new(), BTreeMap::new(), String::new());
    while Instant::now() < until {
        let t0 = Instant::now();
        r.get_mut().write_all(&req).await?;
        let code = read_response(&mut r, &mut line).await?;
        lat.push(t0.elapsed().as_micros() as u32);
        *codes.entry(code).or_insert(0) += 1;
    }
    Ok((lat, codes))
}

fn main() -> Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let [_, sock, path, conns, secs] = a.as_slice() else {
        return Err("usage: loadgen SOCKET PATH CONNECTIONS SECONDS".into());
    };
    let (conns, secs): (usize, f64) = (conns.parse()?, secs.trim_end_matches('s').parse()?);
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: docker\r\nUser-Agent: dockwarden-loadgen\r\n\r\n")
            .into_bytes();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (lat, codes, wall) = rt.block_on(async {
        let t0 = Instant::now();
        let until = t0 + Duration::from_secs_f64(secs);
        let tasks: Vec<_> = (0..conns)
            .map(|_| tokio::spawn(worker(sock.clone(), req.clone(), until)))
            .collect();
        let (mut lat, mut codes) = (Vec::new(), BTreeMap::new());
        for t in tasks {
            let (l, c) = t.await?.map_err(|e| e.to_string())?;
            lat.extend(l);
            for (k, v) in c {
                *codes.entry(k).or_insert(0) += v;
            }
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((lat, codes, t0.elapsed()))
    })?;
    let mut lat = lat;
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1e6
    };
    let codes: Vec<String> = codes.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!(
        "{{\"summary\":{{\"requestsPerSec\":{},\"requests\":{}}},\"latencyPercentiles\":{{\"p50\":{},\"p99\":{}}},\"statusCodeDistribution\":{{{}}}}}",
        lat.len() as f64 / wall.as_secs_f64(),
        lat.len(),
        pct(0.50),
        pct(0.99),
        codes.join(",")
    );
    Ok(())
}
