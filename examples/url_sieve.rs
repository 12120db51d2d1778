//! url_sieve: a web crawler's frontier that drops URLs it has already queued.
//!
//! The frontier is a FIFO queue (`VecDeque<String>`) of URLs to crawl. Every
//! link found on a crawled page is offered to it, and a Bloom filter decides
//! whether the URL was seen before: "no" is certain (queue it), "yes" may be
//! a false positive (the URL is dropped although new — a *false drop*). That
//! is the trade: a few false drops per hundred for a filter ~60× smaller than
//! the `HashSet<String>` of every URL ever seen.
//!
//! Two frontiers run over the same deterministic stream of URLs:
//! - a plain `BloomFilter::with_rate(planned_capacity, fp)`, which warns when
//!   its estimated item count passes the planned capacity (from then on its
//!   false-positive rate climbs past the configured one);
//! - a `ScalableBloomFilter::new(planned_capacity, fp)`, which opens a larger,
//!   stricter stage whenever one fills, so it needs no plan at all.
//!
//! An exact `HashSet<String>` runs beside them to count what the filters got
//! wrong and to show what exact de-duplication would cost in memory.
//!
//! ```sh
//! cargo run --release --example url_sieve
//! cargo run --release --example url_sieve -- --urls 2000000 --capacity 2000000 --fp 0.001
//! ```

use siftdb_testkit::SplitMix64;
use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use clap::Parser;
use siftdb::filter::{BloomFilter, ScalableBloomFilter};

/// Runs two crawler frontiers over one generated URL stream and compares them.
#[derive(Parser, Debug)]
#[command(about = "A crawler frontier that drops duplicate URLs with a Bloom filter")]
struct Args {
    /// URLs to generate (links found on crawled pages).
    #[arg(long, default_value_t = 1_000_000)]
    urls: u64,
    /// Unique URLs the plain filter is sized for (and the scalable filter's
    /// first stage). The default is deliberately below the ~800,000 unique
    /// URLs of the default stream, to show the warning.
    #[arg(long, default_value_t = 500_000)]
    capacity: usize,
    /// Configured false-positive rate.
    #[arg(long, default_value_t = 0.01)]
    fp: f64,
    /// Share of generated links that point to an already generated URL.
    #[arg(long, default_value_t = 0.2)]
    repeats: f64,
    /// Links found on each crawled page.
    #[arg(long, default_value_t = 4)]
    links_per_page: u64,
    /// Seed of the URL generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const SITES: [&str; 16] = [
    "news", "shop", "blog", "wiki", "forum", "docs", "video", "maps", "mail", "photos", "music",
    "jobs", "travel", "food", "sport", "games",
];
const TLDS: [&str; 6] = ["com", "org", "net", "io", "de", "fr"];
const SECTIONS: [&str; 8] = [
    "article", "item", "post", "page", "topic", "user", "tag", "archive",
];

/// The URL stream: a fresh URL (unique by construction: its path carries its
/// id) or, with probability `repeats`, a URL generated before.
struct UrlStream {
    rng: SplitMix64,
    seed: u64,
    fresh: u64,
    repeats: f64,
}

impl UrlStream {
    fn new(seed: u64, repeats: f64) -> Self {
        UrlStream {
            rng: SplitMix64::new(seed),
            seed,
            fresh: 0,
            repeats,
        }
    }

    fn next_url(&mut self) -> String {
        let id = if self.fresh > 0 && self.rng.next_unit() < self.repeats {
            self.rng.next() % self.fresh
        } else {
            self.fresh += 1;
            self.fresh - 1
        };
        url_of(id, self.seed)
    }
}

/// One of `options`, chosen by `bits` modulo their count.
fn pick<'a>(options: &[&'a str], bits: u64) -> &'a str {
    let index = usize::try_from(bits % options.len() as u64).unwrap_or_default();
    options.get(index).copied().unwrap_or_default()
}

/// URL number `id`: about 12,000 hosts, varied paths, ~60 bytes.
fn url_of(id: u64, seed: u64) -> String {
    let h = mix(id ^ seed.rotate_left(32));
    let site = pick(&SITES, h);
    let tld = pick(&TLDS, h >> 4);
    let section = pick(&SECTIONS, h >> 8);
    let host_number = (h >> 12) % 128;
    let year = 2010 + (h >> 20) % 16;
    format!(
        "https://{site}{host_number}.example.{tld}/{section}/{year}/{id:x}-{:04x}",
        (h >> 32) & 0xffff
    )
}

/// What a frontier remembers about the URLs it has seen.
trait SeenSet {
    /// Records `url`; `true` when it was (as far as the set can tell) new.
    fn admit(&mut self, url: &str) -> bool;
    /// Bytes the set occupies.
    fn memory_bytes(&self) -> u64;
    /// The set's own estimate of how many URLs it holds.
    fn estimated_items(&self) -> f64;
    /// The false-positive rate the next new URL meets.
    fn current_fp_rate(&self) -> f64;
}

/// A plain Bloom filter sized for a planned number of URLs.
struct PlannedBloom {
    filter: BloomFilter,
    planned: usize,
    admitted: u64,
    warned_at: Option<(u64, f64)>,
}

impl SeenSet for PlannedBloom {
    fn admit(&mut self, url: &str) -> bool {
        let hash = self.filter.hash(url.as_bytes());
        if self.filter.contains_hash(hash) {
            return false;
        }
        self.filter.insert_hash(hash);
        self.admitted += 1;
        // The estimate walks every line: ask it now and then, not per URL.
        let interval = (self.planned as u64 / 16).clamp(1, 4096);
        if self.warned_at.is_none() && self.admitted.is_multiple_of(interval) {
            let estimate = self.filter.estimated_items();
            if estimate > self.planned as f64 {
                let rate = self.filter.current_fp_rate();
                eprintln!(
                    "warning: the plain filter holds an estimated {} URLs, past its planned \
                     capacity of {}; its false-positive rate is now {:.3}% and climbing. \
                     Size it for more URLs or use ScalableBloomFilter.",
                    thousands(whole(estimate)),
                    thousands(self.planned as u64),
                    rate * 100.0
                );
                self.warned_at = Some((self.admitted, rate));
            }
        }
        true
    }

    fn memory_bytes(&self) -> u64 {
        self.filter.bits() / 8
    }

    fn estimated_items(&self) -> f64 {
        self.filter.estimated_items()
    }

    fn current_fp_rate(&self) -> f64 {
        self.filter.current_fp_rate()
    }
}

impl SeenSet for ScalableBloomFilter {
    fn admit(&mut self, url: &str) -> bool {
        self.insert(url.as_bytes())
    }

    fn memory_bytes(&self) -> u64 {
        ScalableBloomFilter::memory_bytes(self)
    }

    fn estimated_items(&self) -> f64 {
        self.stage_filters().map(BloomFilter::estimated_items).sum()
    }

    fn current_fp_rate(&self) -> f64 {
        self.estimated_fp_rate()
    }
}

/// A FIFO of URLs to crawl that refuses URLs its seen-set has seen.
struct Frontier<S: SeenSet> {
    queue: VecDeque<String>,
    seen: S,
    admitted: u64,
    duplicates_dropped: u64,
    false_drops: u64,
    crawled: u64,
}

impl<S: SeenSet> Frontier<S> {
    fn new(seen: S) -> Self {
        Frontier {
            queue: VecDeque::new(),
            seen,
            admitted: 0,
            duplicates_dropped: 0,
            false_drops: 0,
            crawled: 0,
        }
    }

    /// Offers a found link; `really_new` is the exact answer, for scoring only.
    fn offer(&mut self, url: &str, really_new: bool) {
        if self.seen.admit(url) {
            self.queue.push_back(url.to_owned());
            self.admitted += 1;
        } else if really_new {
            self.false_drops += 1;
        } else {
            self.duplicates_dropped += 1;
        }
    }

    /// The next URL to crawl, oldest first.
    fn next_to_crawl(&mut self) -> Option<String> {
        let url = self.queue.pop_front();
        self.crawled += url.is_some() as u64;
        url
    }
}

/// Bytes of a `HashSet<String>`: hashbrown keeps `buckets` slots of one
/// `String` (24 bytes) plus one control byte each, with 16 more control
/// bytes, and `capacity() = buckets · 7/8`; each string's heap buffer is
/// counted at its capacity. Allocator overhead is left out (it would add more).
fn hash_set_bytes(set: &HashSet<String>) -> u64 {
    let buckets = (set.capacity() as u64 * 8 / 7).next_power_of_two();
    let table = buckets * (std::mem::size_of::<String>() as u64 + 1) + 16;
    let heap: u64 = set.iter().map(|s| s.capacity() as u64).sum();
    table + heap
}

/// An estimate rounded to a whole count.
#[expect(
    clippy::cast_possible_truncation,
    reason = "float-to-int casts saturate"
)]
fn whole(estimate: f64) -> u64 {
    estimate.round() as u64
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mib(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0)),
    }
}

fn main() {
    if let Err(error) = run(Args::parse()) {
        eprintln!("url_sieve: {error}");
        std::process::exit(2);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if !(0.0..1.0).contains(&args.repeats) || args.links_per_page == 0 {
        return Err("--repeats must be within [0, 1) and --links-per-page at least 1".into());
    }
    let started = Instant::now();
    let mut plain = Frontier::new(PlannedBloom {
        filter: BloomFilter::with_rate(args.capacity, args.fp)?,
        planned: args.capacity,
        admitted: 0,
        warned_at: None,
    });
    let mut scalable = Frontier::new(ScalableBloomFilter::new(args.capacity, args.fp)?);
    let mut exact: HashSet<String> = HashSet::new();
    let mut stream = UrlStream::new(args.seed, args.repeats);

    // Crawl: take the oldest queued page, offer the links found on it.
    let mut seen = 0u64;
    while seen < args.urls {
        plain.next_to_crawl();
        scalable.next_to_crawl();
        for _ in 0..args.links_per_page.min(args.urls - seen) {
            let url = stream.next_url();
            let really_new = exact.insert(url.clone());
            plain.offer(&url, really_new);
            scalable.offer(&url, really_new);
            seen += 1;
        }
    }
    let elapsed = started.elapsed();
    for (admitted, duplicates, false_drops) in [
        (plain.admitted, plain.duplicates_dropped, plain.false_drops),
        (
            scalable.admitted,
            scalable.duplicates_dropped,
            scalable.false_drops,
        ),
    ] {
        // Every URL is admitted or dropped, and only the filter's mistakes are lost.
        assert_eq!(admitted + duplicates + false_drops, args.urls);
        assert_eq!(admitted + false_drops, exact.len() as u64);
    }

    let unique = exact.len() as u64;
    let set_bytes = hash_set_bytes(&exact);
    println!(
        "url_sieve: {} URLs seen ({:.0}% repeats requested, seed {}), {} unique; \
         planned capacity {}, configured FP rate {:.3}%",
        thousands(args.urls),
        args.repeats * 100.0,
        args.seed,
        thousands(unique),
        thousands(args.capacity as u64),
        args.fp * 100.0
    );
    println!();
    println!(
        "{:<40}{:>20}{:>22}",
        "", "plain BloomFilter", "ScalableBloomFilter"
    );
    let row = |name: &str, a: String, b: String| println!("{name:<40}{a:>20}{b:>22}");
    let both = |f: &dyn Fn(u64) -> String, a: u64, b: u64| (f(a), f(b));
    let (a, b) = both(&thousands, args.urls, args.urls);
    row("URLs seen", a, b);
    let (a, b) = both(&thousands, plain.admitted, scalable.admitted);
    row("unique admitted to the frontier", a, b);
    let (a, b) = both(
        &thousands,
        plain.duplicates_dropped,
        scalable.duplicates_dropped,
    );
    row("duplicates dropped", a, b);
    let (a, b) = both(&thousands, plain.false_drops, scalable.false_drops);
    row("false drops (new URLs dropped)", a, b);
    let rate = |drops: u64| format!("{:.3}%", drops as f64 / unique as f64 * 100.0);
    row(
        "measured FP rate (false drops / unique)",
        rate(plain.false_drops),
        rate(scalable.false_drops),
    );
    row(
        "configured FP rate",
        format!("{:.3}%", args.fp * 100.0),
        format!("{:.3}% (bound)", args.fp * 100.0),
    );
    row(
        "FP rate for the next new URL",
        format!("{:.3}%", plain.seen.current_fp_rate() * 100.0),
        format!("{:.3}%", scalable.seen.current_fp_rate() * 100.0),
    );
    let bits_per_url = |bytes: u64| format!("{:.2}", bytes as f64 * 8.0 / unique as f64);
    row(
        "filter bits per unique URL",
        bits_per_url(plain.seen.memory_bytes()),
        bits_per_url(scalable.seen.memory_bytes()),
    );
    row(
        "filter memory",
        mib(plain.seen.memory_bytes()),
        format!(
            "{} ({} stages)",
            mib(scalable.seen.memory_bytes()),
            scalable.seen.stages()
        ),
    );
    row(
        "HashSet<String> memory (exact)",
        mib(set_bytes),
        mib(set_bytes),
    );
    row(
        "HashSet / filter memory",
        format!(
            "{:.0}x",
            set_bytes as f64 / plain.seen.memory_bytes() as f64
        ),
        format!(
            "{:.0}x",
            set_bytes as f64 / scalable.seen.memory_bytes() as f64
        ),
    );
    row(
        "estimated items in the filter",
        thousands(whole(plain.seen.estimated_items())),
        thousands(whole(scalable.seen.estimated_items())),
    );
    let (a, b) = both(&thousands, plain.admitted, scalable.admitted);
    row("true items in the filter (admitted)", a, b);
    let (a, b) = both(&thousands, plain.crawled, scalable.crawled);
    row("pages crawled (FIFO)", a, b);
    let (a, b) = both(
        &thousands,
        plain.queue.len() as u64,
        scalable.queue.len() as u64,
    );
    row("still queued", a, b);
    row(
        "capacity warning",
        match plain.seen.warned_at {
            Some((at, _)) => format!("at {} admitted", thousands(at)),
            None => "none".to_owned(),
        },
        "n/a (grows)".to_owned(),
    );
    println!();
    println!(
        "HashSet memory = buckets x (size_of::<String>() = {} + 1 control byte) + 16 + heap bytes \
         of the strings, buckets = capacity x 8/7 = {} (allocator overhead not counted).",
        std::mem::size_of::<String>(),
        thousands((exact.capacity() as u64 * 8 / 7).next_power_of_two())
    );
    println!(
        "The measured rate averages over the filling (an early URL meets an emptier filter); \
         the next-URL rate is the filter's rate now, from its fill."
    );
    println!("{} URLs in {:.2?}.", thousands(args.urls), elapsed);
    Ok(())
}
