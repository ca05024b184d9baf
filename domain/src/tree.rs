//! The log as an RFC 6962 Merkle tree, laid out in C2SP tlog-tiles.
//!
//! Leaf index `i` is the event at position `i + 1`; its entry is the event's
//! 32-byte chain hash, so every leaf has the same size whatever the event's.
//! Leaf hash `SHA-256(0x00 ‖ entry)`, interior nodes `SHA-256(0x01 ‖ l ‖ r)`
//! (the arithmetic is `tlog_tiles`, Cloudflare's port of Go's
//! `golang.org/x/mod/sumdb/tlog`).
//!
//! Tiles are 8 levels high: the hashes at tree level `8L` are "tile level
//! `L`". What the store keeps is, for every tile level `L ≥ 1`, the root of
//! each complete subtree of `256^L` leaves (a [`TreeRow`]); level 0 is the
//! leaf hashes, a function of each event's stored chain hash. Every other
//! node is the Merkle root of consecutive hashes of one tile, which is how
//! tlog-tiles clients compute it too.

use std::cell::RefCell;
use std::collections::BTreeMap;

pub use tlog_tiles::{
    check_record, check_tree, prove_record, prove_tree, stored_hashes, tree_hash,
    Error as TreeError, Hash, HashReader, RecordProof, TreeProof, EMPTY_HASH,
};
use tlog_tiles::{node_hash, record_hash, split_stored_hash_index};

/// A tile's height: 256 hashes wide.
pub const TILE_HEIGHT: u8 = 8;
/// The hashes of a full tile.
pub const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;

/// The leaf hash of an entry (an event's chain hash).
pub fn leaf_hash(entry: &[u8; 32]) -> [u8; 32] {
    record_hash(entry).0
}

/// The Merkle root of `2^k` consecutive hashes of one level.
fn subtree(hashes: &[[u8; 32]]) -> [u8; 32] {
    match hashes.len() {
        0 => EMPTY_HASH.0,
        1 => hashes[0],
        n => {
            node_hash(
                Hash(subtree(&hashes[..n / 2])),
                Hash(subtree(&hashes[n / 2..])),
            )
            .0
        }
    }
}

/// How many hashes tile level `level` has in a tree of `size` leaves: the
/// complete subtrees of `256^level` leaves.
pub fn level_len(size: u64, level: u8) -> u64 {
    size.checked_shr(u32::from(level) * u32::from(TILE_HEIGHT))
        .unwrap_or(0)
}

/// A hash the store keeps: the root of the `index`th complete subtree of
/// `256^level` leaves (`level ≥ 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeRow {
    pub level: u8,
    pub index: u64,
    pub hash: [u8; 32],
}

/// The right edge of the tree: at each tile level, the hashes after the
/// last complete tile (at most 255 each). With it, appending a leaf yields
/// the rows to keep and the root needs no reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    levels: Vec<Vec<[u8; 32]>>,
}

impl Frontier {
    /// The leaves it covers.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where the partial tile of `level` starts, in that level's indexes,
    /// in a tree of `size` leaves.
    pub fn partial_start(size: u64, level: u8) -> u64 {
        level_len(size, level) / TILE_WIDTH * TILE_WIDTH
    }

    /// The tile levels a tree of `size` leaves has hashes at.
    pub fn levels_of(size: u64) -> u8 {
        (0..=8u8).take_while(|l| level_len(size, *l) > 0).count() as u8
    }

    /// A frontier from each level's hashes after its last complete tile
    /// (level 0 first), as read back from the store.
    pub fn from_levels(size: u64, levels: Vec<Vec<[u8; 32]>>) -> Result<Self, String> {
        for (l, hashes) in levels.iter().enumerate() {
            let want = level_len(size, l as u8) % TILE_WIDTH;
            if hashes.len() as u64 != want {
                return Err(format!(
                    "tile level {l} of a tree of {size} has {} hashes after its last full tile, not {want}",
                    hashes.len()
                ));
            }
        }
        let mut levels = levels;
        while levels.last().is_some_and(Vec::is_empty) {
            levels.pop();
        }
        Ok(Self { size, levels })
    }

    /// Appends the leaf of `entry`; the subtrees it completes at tile
    /// levels ≥ 1 are pushed to `rows`.
    pub fn push(&mut self, entry: &[u8; 32], rows: &mut Vec<TreeRow>) {
        self.size += 1;
        self.carry(leaf_hash(entry), 0, rows);
    }

    /// Appends a whole tile of leaves by its root ([`row_over`] of their
    /// leaf hashes), computed apart (a verifier hashes tiles on several
    /// cores): what 256 [`push`](Self::push)es of them would do. The tree
    /// must end at a tile's edge.
    pub fn push_tile(&mut self, root: [u8; 32], rows: &mut Vec<TreeRow>) -> Result<(), String> {
        if !self.size.is_multiple_of(TILE_WIDTH) {
            return Err(format!(
                "a whole tile pushed onto a tree of {} leaves, not at a tile's edge",
                self.size
            ));
        }
        self.size += TILE_WIDTH;
        rows.push(TreeRow {
            level: 1,
            index: level_len(self.size, 1) - 1,
            hash: root,
        });
        self.carry(root, 1, rows);
        Ok(())
    }

    /// Adds `hash` at tile level `level`, completing the tiles it fills.
    fn carry(&mut self, mut hash: [u8; 32], mut level: usize, rows: &mut Vec<TreeRow>) {
        loop {
            while self.levels.len() <= level {
                self.levels.push(Vec::with_capacity(TILE_WIDTH as usize));
            }
            let at = &mut self.levels[level];
            at.push(hash);
            if at.len() as u64 != TILE_WIDTH {
                return;
            }
            hash = subtree(at);
            at.clear();
            level += 1;
            rows.push(TreeRow {
                level: level as u8,
                index: level_len(self.size, level as u8) - 1,
                hash,
            });
        }
    }

    /// The tree's root (RFC 6962): the complete subtrees the size's binary
    /// digits name, largest first, folded from the right.
    pub fn root(&self) -> [u8; 32] {
        let mut parts = Vec::new();
        for hashes in self.levels.iter().rev() {
            let mut at = 0;
            for bit in (0..TILE_HEIGHT).rev() {
                let n = 1usize << bit;
                if hashes.len() & n != 0 {
                    parts.push(subtree(&hashes[at..at + n]));
                    at += n;
                }
            }
        }
        let Some(mut root) = parts.pop() else {
            return EMPTY_HASH.0;
        };
        while let Some(left) = parts.pop() {
            root = node_hash(Hash(left), Hash(root)).0;
        }
        root
    }
}

/// Some tiles of a tree, by tile level and index, each as many hashes as
/// were loaded: a [`HashReader`] for `tlog_tiles`' proofs and roots.
#[derive(Debug, Default)]
pub struct Tiles {
    pub tiles: BTreeMap<(u8, u64), Vec<[u8; 32]>>,
}

/// Where a stored-hash index lies: tile level, tile index, and the range of
/// the tile's hashes whose Merkle root it is.
fn locate(index: u64) -> (u8, u64, std::ops::Range<usize>) {
    let (k, n) = split_stored_hash_index(index);
    let (level, r) = (k / TILE_HEIGHT, k % TILE_HEIGHT);
    let first = n << r;
    let at = (first % TILE_WIDTH) as usize;
    (level, first / TILE_WIDTH, at..at + (1usize << r))
}

impl HashReader for Tiles {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, TreeError> {
        indexes
            .iter()
            .map(|&i| {
                let (level, tile, range) = locate(i);
                self.tiles
                    .get(&(level, tile))
                    .and_then(|h| h.get(range))
                    .map(|h| Hash(subtree(h)))
                    .ok_or(TreeError::IndexesNotInTree)
            })
            .collect()
    }
}

/// A reader that answers zeros and remembers which tiles, and how many of
/// each one's hashes, a computation reads: the proofs and roots of
/// `tlog_tiles` ask for the same indexes whatever the hashes are, so a
/// first pass with this finds what to load.
#[derive(Debug, Default)]
pub struct TileNeeds(RefCell<BTreeMap<(u8, u64), usize>>);

impl TileNeeds {
    /// The tiles read, and how many hashes of each.
    pub fn into_needs(self) -> BTreeMap<(u8, u64), usize> {
        self.0.into_inner()
    }
}

impl HashReader for TileNeeds {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, TreeError> {
        let mut needs = self.0.borrow_mut();
        for &i in indexes {
            let (level, tile, range) = locate(i);
            let w = needs.entry((level, tile)).or_default();
            *w = (*w).max(range.end);
        }
        Ok(vec![Hash([0; 32]); indexes.len()])
    }
}

/// A tile as C2SP tlog-tiles names it: `tile/<L>/<N>[.p/<W>]`, or
/// `tile/entries/<N>[.p/<W>]` for an entry bundle (`level` `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TilePath {
    pub level: Option<u8>,
    pub index: u64,
    /// 1..=256; 256 is a full tile (no `.p/` suffix).
    pub width: u16,
}

impl TilePath {
    /// Parses the path after `tile/`; only the canonical form is one.
    pub fn parse(path: &str) -> Option<Self> {
        let (level, rest) = path.split_once('/')?;
        let level = match level {
            "entries" => None,
            l if l.len() <= 2 && l.bytes().all(|b| b.is_ascii_digit()) => {
                Some(l.parse::<u8>().ok().filter(|l| *l < 64)?)
            }
            _ => return None,
        };
        let (n, width) = match rest.split_once(".p/") {
            Some((n, w)) => (n, w.parse::<u16>().ok().filter(|w| (1..256).contains(w))?),
            None => (rest, TILE_WIDTH as u16),
        };
        let groups: Vec<&str> = n.split('/').collect();
        let mut index: u64 = 0;
        for (i, g) in groups.iter().enumerate() {
            let digits = if i + 1 < groups.len() {
                g.strip_prefix('x')?
            } else {
                g
            };
            if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            index = index.checked_mul(1000)?.checked_add(digits.parse().ok()?)?;
        }
        // A tile's leaves must be countable: no index whose range wraps.
        index.checked_mul(TILE_WIDTH)?.checked_add(TILE_WIDTH)?;
        let parsed = Self {
            level,
            index,
            width,
        };
        // One name per tile: no leading x000 groups.
        (parsed.to_string() == path).then_some(parsed)
    }

    /// The leaves (entries) or level hashes the tile covers, as a range of
    /// that level's indexes.
    pub fn range(&self) -> std::ops::Range<u64> {
        let start = self.index * TILE_WIDTH;
        start..start + u64::from(self.width)
    }
}

impl std::fmt::Display for TilePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.level {
            Some(l) => write!(f, "{l}/")?,
            None => f.write_str("entries/")?,
        }
        let mut n = self.index;
        let mut groups = vec![format!("{:03}", n % 1000)];
        while n >= 1000 {
            n /= 1000;
            groups.push(format!("x{:03}", n % 1000));
        }
        groups.reverse();
        f.write_str(&groups.join("/"))?;
        if u64::from(self.width) != TILE_WIDTH {
            write!(f, ".p/{}", self.width)?;
        }
        Ok(())
    }
}

/// The C2SP tlog-checkpoint text of a tree: origin, size, base64 root. No
/// timestamp: one size has one text.
pub fn checkpoint_text(origin: &str, size: u64, root: &[u8; 32]) -> Result<String, String> {
    let c = tlog_tiles::Checkpoint::new(origin, size, Hash(*root), "")
        .map_err(|_| format!("{origin:?} is not a checkpoint origin"))?;
    String::from_utf8(c.to_bytes()).map_err(|e| e.to_string())
}

/// A checkpoint's origin, size and root, from its text.
pub fn parse_checkpoint(text: &[u8]) -> Result<(String, u64, [u8; 32]), String> {
    let c = tlog_tiles::Checkpoint::from_bytes(text).map_err(|e| e.to_string())?;
    Ok((c.origin().to_owned(), c.size(), c.hash().0))
}

/// The reader of either pass of a computation over tiles: the first finds
/// what it reads, the second reads it.
#[derive(Debug)]
pub enum Pass<'a> {
    Find(&'a TileNeeds),
    Read(&'a Tiles),
}

impl HashReader for Pass<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, TreeError> {
        match self {
            Pass::Find(r) => r.read_hashes(indexes),
            Pass::Read(r) => r.read_hashes(indexes),
        }
    }
}

/// Which tiles a computation over a tree reads, found by a first pass.
pub fn needs<T>(
    compute: impl FnOnce(&TileNeeds) -> Result<T, TreeError>,
) -> Result<BTreeMap<(u8, u64), usize>, TreeError> {
    let needs = TileNeeds::default();
    compute(&needs)?;
    Ok(needs.into_needs())
}

/// The tiles of the level above a complete tile: checks in one place that
/// a stored row is the root of the 256 hashes below it.
pub fn row_over(hashes: &[[u8; 32]]) -> Option<[u8; 32]> {
    (hashes.len() as u64 == TILE_WIDTH).then(|| subtree(hashes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tile_pushed_by_its_root_is_its_leaves_pushed_one_by_one() {
        let n = 3 * TILE_WIDTH * TILE_WIDTH + 5 * TILE_WIDTH + 17;
        let (mut one, mut one_rows) = (Frontier::default(), Vec::new());
        let (mut tiles, mut tile_rows) = (Frontier::default(), Vec::new());
        let entries: Vec<[u8; 32]> = (0..n).map(entry).collect();
        for e in &entries {
            one.push(e, &mut one_rows);
        }
        let whole = entries.len() / TILE_WIDTH as usize * TILE_WIDTH as usize;
        for tile in entries[..whole].chunks(TILE_WIDTH as usize) {
            let leaves: Vec<[u8; 32]> = tile.iter().map(leaf_hash).collect();
            tiles
                .push_tile(row_over(&leaves).unwrap(), &mut tile_rows)
                .unwrap();
        }
        for e in &entries[whole..] {
            tiles.push(e, &mut tile_rows);
        }
        assert_eq!((tiles, tile_rows), (one, one_rows));
        // Only at a tile's edge.
        let mut f = Frontier::default();
        f.push(&entry(0), &mut Vec::new());
        assert!(f.push_tile([0; 32], &mut Vec::new()).is_err());
    }

    fn entry(i: u64) -> [u8; 32] {
        let mut e = [0u8; 32];
        e[..8].copy_from_slice(&i.to_be_bytes());
        e
    }

    /// Go's stored-hash layout, as `tlog_tiles` keeps it: the reference
    /// the frontier and the tiles are checked against.
    struct Stored(Vec<Hash>);
    impl HashReader for Stored {
        fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, TreeError> {
            Ok(indexes.iter().map(|&i| self.0[i as usize]).collect())
        }
    }

    fn reference(n: u64) -> Stored {
        let mut s = Stored(Vec::new());
        for i in 0..n {
            let new = tlog_tiles::stored_hashes(i, &entry(i), &s).unwrap();
            s.0.extend(new);
        }
        s
    }

    /// Tiles read from what a frontier emitted: level 0 from the leaves.
    fn tiles_from(n: u64, rows: &[TreeRow]) -> Tiles {
        let mut t = Tiles::default();
        for i in 0..n {
            t.tiles
                .entry((0, i / TILE_WIDTH))
                .or_default()
                .push(leaf_hash(&entry(i)));
        }
        for r in rows {
            t.tiles
                .entry((r.level, r.index / TILE_WIDTH))
                .or_default()
                .push(r.hash);
        }
        t
    }

    #[test]
    fn the_frontier_agrees_with_go_s_layout_at_every_size() {
        let n = 70_000;
        let s = reference(n);
        let mut f = Frontier::default();
        let mut rows = Vec::new();
        for i in 0..n {
            if i % 997 == 0 || i < 600 || (65_530..65_540).contains(&i) {
                assert_eq!(f.root(), tree_hash(i, &s).unwrap().0, "size {i}");
            }
            f.push(&entry(i), &mut rows);
        }
        assert_eq!(f.root(), tree_hash(n, &s).unwrap().0);
        assert_eq!(rows.iter().filter(|r| r.level == 1).count(), 273);
        assert_eq!(rows.iter().filter(|r| r.level == 2).count(), 1);
        // Every row is the stored hash Go keeps at that level.
        for r in &rows {
            let at = tlog_tiles::stored_hash_index(r.level * TILE_HEIGHT, r.index);
            assert_eq!(s.0[at as usize].0, r.hash);
        }
        // A frontier read back from the tiles' right edges is the same.
        let t = tiles_from(n, &rows);
        let levels = (0..Frontier::levels_of(n))
            .map(|l| {
                let start = Frontier::partial_start(n, l);
                t.tiles
                    .get(&(l, start / TILE_WIDTH))
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .take((level_len(n, l) - start) as usize)
                    .collect()
            })
            .collect();
        assert_eq!(Frontier::from_levels(n, levels).unwrap(), f);
        assert!(Frontier::from_levels(n, vec![vec![]]).is_err());
    }

    #[test]
    fn proofs_over_tiles_check_with_go_s_arithmetic() {
        for n in [1u64, 2, 255, 256, 257, 1000, 65_536, 65_537] {
            let mut f = Frontier::default();
            let mut rows = Vec::new();
            for i in 0..n {
                f.push(&entry(i), &mut rows);
            }
            let t = tiles_from(n, &rows);
            let root = Hash(f.root());
            assert_eq!(tree_hash(n, &t).unwrap(), root);
            for i in [0, n / 3, n - 1] {
                let p = prove_record(n, i, &t).unwrap();
                check_record(&p, n, root, i, Hash(leaf_hash(&entry(i)))).unwrap();
                assert!(check_record(&p, n, root, i, Hash(leaf_hash(&entry(i + 1)))).is_err());
            }
            for m in [1, n / 2, n - 1].into_iter().filter(|m| *m > 0) {
                let old = tree_hash(m, &t).unwrap();
                let p = prove_tree(n, m, &t).unwrap();
                check_tree(&p, n, root, m, old).unwrap();
            }
            // The first pass finds every tile the second one reads.
            let want = needs(|r| prove_record(n, n - 1, r)).unwrap();
            let mut loaded = Tiles::default();
            for ((l, i), w) in want {
                loaded.tiles.insert((l, i), t.tiles[&(l, i)][..w].to_vec());
            }
            prove_record(n, n - 1, &loaded).unwrap();
        }
    }

    #[test]
    fn tile_paths_are_c2sp_s_and_only_canonical_ones_parse() {
        let cases = [
            (Some(0), 0, 256, "0/000"),
            (Some(1), 1234067, 256, "1/x001/x234/067"),
            (None, 5, 17, "entries/005.p/17"),
            (Some(2), 1000, 1, "2/x001/000.p/1"),
        ];
        for (level, index, width, s) in cases {
            let p = TilePath {
                level,
                index,
                width,
            };
            assert_eq!(p.to_string(), s);
            assert_eq!(TilePath::parse(s), Some(p));
        }
        for bad in [
            "0/0",
            "0/x000/001",
            "0/001.p/256",
            "0/001.p/0",
            "64/000",
            "entries/1234",
            "-1/000",
            "0/001/",
            "0/00a",
            // 2^56: its first leaf would wrap to 0.
            "0/x072/x057/x594/x037/x927/936",
        ] {
            assert_eq!(TilePath::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn checkpoints_are_deterministic_text() {
        let t = checkpoint_text("stratum.example/log", 3, &[7; 32]).unwrap();
        assert_eq!(
            t,
            "stratum.example/log\n3\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"
        );
        assert_eq!(
            parse_checkpoint(t.as_bytes()).unwrap(),
            ("stratum.example/log".into(), 3, [7; 32])
        );
    }
}
