// Command tlog-verify independently verifies the transparency log that a
// stratum server publishes (C2SP tlog-checkpoint, signed-note, tlog-tiles).
//
//	tlog-verify -server URL [-token TOKEN] -vkey FILE [-witness FILE]... [-old FILE] [-save FILE] [-samples K] [-cacert PEM]
//
// It opens the signed checkpoint, fetches every hash tile and entry bundle
// for the checkpoint's size, authenticates each of them, recomputes the root
// from the tiles and from the entries alone, checks inclusion proofs for
// sampled events (its own and the server's), and, given an earlier
// checkpoint, checks that the log only grew (its own consistency proof and the
// server's). On success it prints one JSON line and exits 0; on any failure it
// prints one line to stderr and exits 1 (2 for a bad command line).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	tileHeight = 8               // C2SP tlog-tiles: tiles are 8 levels high
	tileWidth  = 1 << tileHeight // hashes (or entries) in a full tile
	entrySize  = 32              // each entry is an event's chain hash
	maxBody    = 32 << 20        // cap on any response body
	workers    = 8               // concurrent tile fetches
	reqTimeout = 60 * time.Second
)

// emptyRoot is the RFC 6962 hash of the empty tree, SHA-256 of nothing.
// (tlog.TreeHash(0, r) returns the all-zero hash instead, so it is not used
// for size 0.)
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	server, token, vkey, old, save, cacert string
	samples                                int
	witnesses                              multi
}

// multi is a flag that may be given more than once.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("tlog-verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.server, "server", "", "base `URL` of the stratum server (required)")
	fs.StringVar(&cfg.token, "token", "", "bearer `TOKEN` sent with every request")
	fs.StringVar(&cfg.vkey, "vkey", "", "`FILE` holding the log's note verifier key name+hash+base64 (required)")
	fs.StringVar(&cfg.old, "old", "", "`FILE` holding an earlier signed checkpoint to prove consistency with")
	fs.StringVar(&cfg.save, "save", "", "write the verified checkpoint to `FILE`")
	fs.IntVar(&cfg.samples, "samples", 8, "check inclusion proofs for `K` leaves (at least 2; the first and last always among them)")
	fs.StringVar(&cfg.cacert, "cacert", "", "`PEM` file of CA certificates to trust for https")
	fs.Var(&cfg.witnesses, "witness", "`FILE` holding a witness's cosignature/v1 verifier key: the checkpoint must carry its valid cosignature (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tlog-verify -server URL [-token TOKEN] -vkey FILE [-witness FILE]... [-old FILE] [-save FILE] [-samples K] [-cacert PEM]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "tlog-verify: unexpected argument %q\n", fs.Arg(0))
		return 2
	case cfg.server == "" || cfg.vkey == "":
		fmt.Fprintln(stderr, "tlog-verify: -server and -vkey are required")
		return 2
	case cfg.samples < 2:
		fmt.Fprintln(stderr, "tlog-verify: -samples must be at least 2")
		return 2
	}

	sum, err := verify(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tlog-verify: FAIL: %s\n", oneLine(err.Error()))
		return 1
	}
	line, _ := json.Marshal(sum)
	fmt.Fprintf(stdout, "%s\n", line)
	return 0
}

// summary is the JSON line printed on success.
type summary struct {
	Origin         string   `json:"origin"`
	Size           int64    `json:"size"`
	Root           string   `json:"root"`                     // base64, as in the checkpoint
	Tiles          int      `json:"tiles"`                    // hash tiles fetched and checked (all levels)
	Bundles        int      `json:"bundles"`                  // entry bundles fetched
	Entries        int64    `json:"entries"`                  // entries checked (the size)
	Inclusion      int      `json:"inclusion"`                // leaves whose inclusion proofs were checked
	ConsistentFrom *int64   `json:"consistentFrom,omitempty"` // size of the -old checkpoint
	CosignedBy     []string `json:"cosignedBy,omitempty"`     // the -witness keys' names
}

func verify(cfg config) (*summary, error) {
	verifiers, err := loadVerifier(cfg.vkey)
	if err != nil {
		return nil, err
	}
	c, err := newClient(cfg.server, cfg.token, cfg.cacert)
	if err != nil {
		return nil, err
	}

	// 1. The checkpoint, and the earlier one if any.
	raw, err := c.get("/v1/log/checkpoint")
	if err != nil {
		return nil, err
	}
	cp, err := openCheckpoint(raw, verifiers)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %v", err)
	}
	var old *checkpoint
	if cfg.old != "" {
		b, err := os.ReadFile(cfg.old)
		if err != nil {
			return nil, fmt.Errorf("old checkpoint: %v", err)
		}
		if old, err = openCheckpoint(b, verifiers); err != nil {
			return nil, fmt.Errorf("old checkpoint %s: %v", cfg.old, err)
		}
		if err := compareSizes(old, cp); err != nil {
			return nil, err
		}
	}
	sum := &summary{Origin: cp.Origin, Size: cp.Size, Entries: cp.Size,
		Root: base64.StdEncoding.EncodeToString(cp.Root[:])}
	if sum.CosignedBy, err = checkCosigned(raw, cfg.witnesses); err != nil {
		return nil, fmt.Errorf("checkpoint: %v", err)
	}

	// 2. Every entry bundle and tile, authenticated bottom-up: level-0
	// tiles against the entries, then each level against the one below.
	leaves, bundles, err := fetchEntryBundles(c, cp.Size)
	if err != nil {
		return nil, err
	}
	sum.Bundles = bundles
	var levels [][]tlog.Hash
	for L := 0; cp.Size>>(uint(L)*tileHeight) > 0; L++ {
		count := cp.Size >> (uint(L) * tileHeight)
		hashes, tiles, err := fetchLevel(c, L, count)
		if err != nil {
			return nil, err
		}
		sum.Tiles += tiles
		for j := range hashes {
			n := int64(j) / tileWidth
			here := tilePath(L, n, tileWidthAt(count, n))
			if L == 0 && hashes[j] != leaves[j] {
				return nil, fmt.Errorf("%s: hash %d is not the record hash of entry %d in %s",
					here, j%tileWidth, j, entriesPath(n, tileWidthAt(count, n)))
			}
			if L > 0 && hashes[j] != subtreeRoot(levels[L-1][j*tileWidth:(j+1)*tileWidth]) {
				return nil, fmt.Errorf("%s: hash %d is not the root of %s",
					here, j%tileWidth, tilePath(L-1, int64(j), tileWidth))
			}
		}
		levels = append(levels, hashes)
	}

	// 3. The root, from the tiles and from the entries alone.
	reader := tileReader(levels)
	root, err := treeHash(cp.Size, reader)
	if err != nil {
		return nil, fmt.Errorf("root from tiles: %v", err)
	}
	if root != cp.Root {
		return nil, fmt.Errorf("root from tiles %s does not match the checkpoint's %s", b64(root), b64(cp.Root))
	}
	if root := rootFromLeaves(leaves); root != cp.Root {
		return nil, fmt.Errorf("root from entries %s does not match the checkpoint's %s", b64(root), b64(cp.Root))
	}

	// 4. Inclusion of sampled events.
	for _, p := range samplePositions(cp.Size, cfg.samples) {
		if err := checkInclusion(c, cp, reader, leaves, p); err != nil {
			return nil, fmt.Errorf("event %d: %v", p, err)
		}
		sum.Inclusion++
	}

	// 5. Consistency with the earlier checkpoint.
	if old != nil {
		if err := checkConsistency(c, old, cp, reader); err != nil {
			return nil, fmt.Errorf("consistency %d -> %d: %v", old.Size, cp.Size, err)
		}
		sum.ConsistentFrom = &old.Size
	}

	// 6. Keep the verified checkpoint for next time.
	if cfg.save != "" {
		if err := writeFileAtomic(cfg.save, cp.Note); err != nil {
			return nil, fmt.Errorf("save: %v", err)
		}
	}
	return sum, nil
}

// ---- checkpoints ----

type checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	Note   []byte // the signed note as received
}

func loadVerifier(file string) (note.Verifiers, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("verifier key: %v", err)
	}
	v, err := note.NewVerifier(strings.TrimRight(string(b), " \t\r\n"))
	if err != nil {
		return nil, fmt.Errorf("verifier key %s: %v", file, err)
	}
	return note.VerifierList(v), nil
}

// openCheckpoint checks the note's signature and parses its text, which must
// be exactly "<origin>\n<size>\n<base64 root>\n".
func openCheckpoint(msg []byte, verifiers note.Verifiers) (*checkpoint, error) {
	n, err := note.Open(msg, verifiers)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		if errors.As(err, &unverified) {
			var by []string
			for _, s := range unverified.Note.UnverifiedSigs {
				by = append(by, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
			}
			return nil, fmt.Errorf("not signed by the verifier key (signed only by %s)", strings.Join(by, ", "))
		}
		return nil, err
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return nil, fmt.Errorf("text has %d lines, want exactly 3 (origin, size, root)", strings.Count(n.Text, "\n"))
	}
	cp := &checkpoint{Origin: lines[0], Note: msg}
	if cp.Origin == "" {
		return nil, errors.New("empty origin line")
	}
	s := lines[1]
	if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return nil, fmt.Errorf("malformed size %q", s)
	}
	if cp.Size, err = strconv.ParseInt(s, 10, 64); err != nil {
		return nil, fmt.Errorf("malformed size %q", s)
	}
	r, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(r) != tlog.HashSize || base64.StdEncoding.EncodeToString(r) != lines[2] {
		return nil, fmt.Errorf("malformed root hash %q", lines[2])
	}
	copy(cp.Root[:], r)
	if cp.Size == 0 && cp.Root != emptyRoot {
		return nil, fmt.Errorf("size 0 but root %s is not the empty tree's %s", lines[2], b64(emptyRoot))
	}
	return cp, nil
}

// compareSizes does the cheap checks between an old and a new checkpoint.
func compareSizes(old, cp *checkpoint) error {
	switch {
	case old.Origin != cp.Origin:
		return fmt.Errorf("old checkpoint is for origin %q, the server's for %q", old.Origin, cp.Origin)
	case old.Size > cp.Size:
		return fmt.Errorf("the log shrank: old checkpoint has size %d, the server's %d", old.Size, cp.Size)
	case old.Size == cp.Size && old.Root != cp.Root:
		return fmt.Errorf("same size, other root: the log was rewritten (size %d, old root %s, new root %s)",
			cp.Size, b64(old.Root), b64(cp.Root))
	}
	return nil
}

// ---- HTTP ----

type client struct {
	base, token string
	hc          *http.Client
}

type statusError struct {
	path string
	code int
	body string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("GET %s: %d %s", e.path, e.code, http.StatusText(e.code))
	if e.body != "" {
		s += ": " + e.body
	}
	return s
}

func newClient(server, token, cacert string) (*client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-server %q is not an http(s) URL", server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = workers
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, fmt.Errorf("cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cacert %s: no PEM certificates found", cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{
		base:  strings.TrimRight(server, "/"),
		token: token,
		hc:    &http.Client{Transport: tr, Timeout: reqTimeout},
	}, nil
}

// get fetches base+path and returns the body of a 200 response.
func (c *client) get(path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), reqTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "tlog-verify")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := oneLine(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		return nil, &statusError{path: path, code: resp.StatusCode, body: snippet}
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("GET %s: response larger than %d bytes", path, maxBody)
	}
	return body, nil
}

func (c *client) getJSON(path string, v interface{}) error {
	body, err := c.get(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: bad JSON: %v", path, err)
	}
	return nil
}

// getTile fetches a tile or bundle of width w at path. If a partial tile is
// gone (404), C2SP lets clients use the full tile instead: it is then
// returned whole and the caller uses its first w elements.
func (c *client) getTile(path, fullPath string, w int) (body []byte, full bool, err error) {
	body, err = c.get(path)
	var se *statusError
	if w < tileWidth && errors.As(err, &se) && se.code == http.StatusNotFound {
		body, err = c.get(fullPath)
		return body, true, err
	}
	return body, false, err
}

// ---- tiles ----

// encodeN encodes a tile index as C2SP does: groups of three digits, all but
// the last prefixed with "x" (1234067 -> x001/x234/067).
func encodeN(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

func partial(w int) string {
	if w == tileWidth {
		return ""
	}
	return fmt.Sprintf(".p/%d", w)
}

// tilePath is the C2SP path of hash tile N at tile level L with w hashes.
// (tlog.Tile.Path includes the height, tile/H/L/N, which is not C2SP.)
func tilePath(L int, n int64, w int) string {
	return fmt.Sprintf("tile/%d/%s%s", L, encodeN(n), partial(w))
}

// entriesPath is the C2SP path of entry bundle N with w entries.
func entriesPath(n int64, w int) string {
	return fmt.Sprintf("tile/entries/%s%s", encodeN(n), partial(w))
}

// tileWidthAt is the width of tile n in a level of count hashes.
func tileWidthAt(count, n int64) int {
	if rest := count - n*tileWidth; rest < tileWidth {
		return int(rest)
	}
	return tileWidth
}

// fetchLevel fetches the tiles of tile level L, which hold the count hashes
// at tree level 8L, and returns those hashes and the number of tiles.
func fetchLevel(c *client, L int, count int64) ([]tlog.Hash, int, error) {
	hashes := make([]tlog.Hash, count)
	ntiles := (count + tileWidth - 1) / tileWidth
	err := forEach(ntiles, func(n int64) error {
		w := tileWidthAt(count, n)
		path := tilePath(L, n, w)
		body, full, err := c.getTile("/v1/log/"+path, "/v1/log/"+tilePath(L, n, tileWidth), w)
		if err != nil {
			return err
		}
		want := w
		if full {
			want = tileWidth
		}
		if len(body) != want*tlog.HashSize {
			return fmt.Errorf("%s: %d bytes, want %d", path, len(body), want*tlog.HashSize)
		}
		for i := 0; i < w; i++ {
			copy(hashes[n*tileWidth+int64(i)][:], body[i*tlog.HashSize:])
		}
		return nil
	})
	return hashes, int(ntiles), err
}

// fetchEntryBundles fetches every entry bundle for the size and returns the
// record hashes of the entries.
func fetchEntryBundles(c *client, size int64) (leaves []tlog.Hash, bundles int, err error) {
	leaves = make([]tlog.Hash, size)
	nb := (size + tileWidth - 1) / tileWidth
	err = forEach(nb, func(n int64) error {
		w := tileWidthAt(size, n)
		path := entriesPath(n, w)
		body, full, err := c.getTile("/v1/log/"+path, "/v1/log/"+entriesPath(n, tileWidth), w)
		if err != nil {
			return err
		}
		want := w
		if full {
			want = tileWidth
		}
		entries, err := parseBundle(body, want)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		for i := 0; i < w; i++ {
			leaves[n*tileWidth+int64(i)] = tlog.RecordHash(entries[i])
		}
		return nil
	})
	return leaves, int(nb), err
}

// parseBundle splits a bundle into exactly w entries, each a big-endian
// uint16 length followed by that many bytes.
func parseBundle(b []byte, w int) ([][]byte, error) {
	var entries [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errors.New("truncated length prefix")
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l {
			return nil, fmt.Errorf("entry %d truncated", len(entries))
		}
		if l != entrySize {
			return nil, fmt.Errorf("entry %d has %d bytes, want %d", len(entries), l, entrySize)
		}
		entries = append(entries, b[2:2+l])
		b = b[2+l:]
	}
	if len(entries) != w {
		return nil, fmt.Errorf("%d entries, want %d", len(entries), w)
	}
	return entries, nil
}

// forEach calls fn(0..n-1) on a few goroutines and returns the error of the
// lowest index that failed; it stops handing out work after a failure.
func forEach(n int64, fn func(i int64) error) error {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		next   int64
		errIdx int64 = -1
		first  error
	)
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil || i < errIdx {
						first, errIdx = err, i
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ---- hashing ----

// subtreeRoot is the Merkle root of a power-of-two number of hashes.
func subtreeRoot(h []tlog.Hash) tlog.Hash {
	if len(h) == 1 {
		return h[0]
	}
	m := len(h) / 2
	return tlog.NodeHash(subtreeRoot(h[:m]), subtreeRoot(h[m:]))
}

// tileReader answers stored-hash indexes from the fetched tile levels: the
// hash at tree level k = 8L+r, index n, is the Merkle root of hashes
// n*2^r .. (n+1)*2^r-1 of tile level L.
type tileReader [][]tlog.Hash

func (t tileReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		k, n := tlog.SplitStoredHashIndex(idx)
		L, r := k/tileHeight, uint(k%tileHeight)
		if L >= len(t) || n >= int64(len(t[L]))>>r {
			return nil, fmt.Errorf("hash (level %d, index %d) is not covered by the tiles", k, n)
		}
		out[i] = subtreeRoot(t[L][n<<r : (n+1)<<r])
	}
	return out, nil
}

// treeHash is tlog.TreeHash with RFC 6962's root for the empty tree.
func treeHash(size int64, r tlog.HashReader) (tlog.Hash, error) {
	if size == 0 {
		return emptyRoot, nil
	}
	return tlog.TreeHash(size, r)
}

// rootFromLeaves computes the RFC 6962 root of the leaf hashes directly,
// independent of tiles and of tlog's stored-hash indexing: keep a stack of
// the roots of complete subtrees (sizes strictly decreasing), merging equal
// neighbours, then fold it from the right.
func rootFromLeaves(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 0 {
		return emptyRoot
	}
	type sub struct {
		h    tlog.Hash
		size int64
	}
	var stack []sub
	for _, h := range leaves {
		stack = append(stack, sub{h, 1})
		for len(stack) >= 2 && stack[len(stack)-2].size == stack[len(stack)-1].size {
			l, r := stack[len(stack)-2], stack[len(stack)-1]
			stack = append(stack[:len(stack)-2], sub{tlog.NodeHash(l.h, r.h), 2 * l.size})
		}
	}
	h := stack[len(stack)-1].h
	for i := len(stack) - 2; i >= 0; i-- {
		h = tlog.NodeHash(stack[i].h, h)
	}
	return h
}

// ---- proofs ----

// samplePositions picks up to k positions (1-based) spread evenly over
// 1..size, always including the first and the last.
func samplePositions(size int64, k int) []int64 {
	if size == 0 {
		return nil
	}
	var out []int64
	d, m := (size-1)/int64(k-1), (size-1)%int64(k-1)
	for i := int64(0); i < int64(k); i++ {
		p := 1 + d*i + m*i/int64(k-1) // 1 + i*(size-1)/(k-1) without overflow
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

type eventJSON struct {
	Position *int64 `json:"position"`
	Hash     string `json:"hash"`
}

type inclusionJSON struct {
	Position int64    `json:"position"`
	Size     int64    `json:"size"`
	Root     string   `json:"root"`
	Hash     string   `json:"hash"`
	Proof    []string `json:"proof"`
}

type consistencyJSON struct {
	From     int64    `json:"from"`
	To       int64    `json:"to"`
	FromRoot string   `json:"fromRoot"`
	ToRoot   string   `json:"toRoot"`
	Proof    []string `json:"proof"`
}

// checkInclusion checks that event p (leaf p-1) is in the checkpoint's tree,
// with a proof built from the tiles and with the server's own proof.
func checkInclusion(c *client, cp *checkpoint, r tlog.HashReader, leaves []tlog.Hash, p int64) error {
	var ev eventJSON
	if err := c.getJSON(fmt.Sprintf("/v1/admin/events/%d", p), &ev); err != nil {
		return err
	}
	if ev.Position != nil && *ev.Position != p {
		return fmt.Errorf("server answered position %d", *ev.Position)
	}
	entry, err := parseHex(ev.Hash)
	if err != nil {
		return fmt.Errorf("hash: %v", err)
	}
	leaf := tlog.RecordHash(entry[:])
	if leaf != leaves[p-1] {
		return fmt.Errorf("hash %s is not log entry %d", ev.Hash, p-1)
	}

	// (a) A proof from the verified tiles.
	proof, err := tlog.ProveRecord(cp.Size, p-1, r)
	if err != nil {
		return fmt.Errorf("proof from tiles: %v", err)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, p-1, leaf); err != nil {
		return fmt.Errorf("proof from tiles: %v", err)
	}

	// (b) The server's proof.
	var sp inclusionJSON
	if err := c.getJSON(fmt.Sprintf("/v1/admin/events/%d/proof?size=%d", p, cp.Size), &sp); err != nil {
		return err
	}
	switch {
	case sp.Position != p || sp.Size != cp.Size:
		return fmt.Errorf("server proof is for position %d size %d", sp.Position, sp.Size)
	case sp.Root != hex.EncodeToString(cp.Root[:]):
		return fmt.Errorf("server proof root %s is not the checkpoint's", sp.Root)
	case sp.Hash != ev.Hash:
		return fmt.Errorf("server proof hash %s is not the event's %s", sp.Hash, ev.Hash)
	}
	hashes, err := parseHexList(sp.Proof)
	if err != nil {
		return fmt.Errorf("server proof: %v", err)
	}
	if err := tlog.CheckRecord(tlog.RecordProof(hashes), cp.Size, cp.Root, p-1, leaf); err != nil {
		return fmt.Errorf("server inclusion proof does not verify: %v", err)
	}
	return nil
}

// checkConsistency checks that the old tree is a prefix of the new one, with
// a proof built from the tiles and with the server's own proof.
func checkConsistency(c *client, old, cp *checkpoint, r tlog.HashReader) error {
	if old.Size == 0 || old.Size == cp.Size {
		return nil // the empty tree is a prefix of all; equal sizes were compared already
	}
	proof, err := tlog.ProveTree(cp.Size, old.Size, r)
	if err != nil {
		return fmt.Errorf("proof from tiles: %v", err)
	}
	if err := tlog.CheckTree(proof, cp.Size, cp.Root, old.Size, old.Root); err != nil {
		return fmt.Errorf("old root %s is not a prefix of the verified tiles: %v", b64(old.Root), err)
	}

	var sp consistencyJSON
	if err := c.getJSON(fmt.Sprintf("/v1/log/consistency?from=%d&to=%d", old.Size, cp.Size), &sp); err != nil {
		return err
	}
	switch {
	case sp.From != old.Size || sp.To != cp.Size:
		return fmt.Errorf("server proof is from %d to %d", sp.From, sp.To)
	case sp.FromRoot != hex.EncodeToString(old.Root[:]):
		return fmt.Errorf("server fromRoot %s is not the old checkpoint's", sp.FromRoot)
	case sp.ToRoot != hex.EncodeToString(cp.Root[:]):
		return fmt.Errorf("server toRoot %s is not the checkpoint's", sp.ToRoot)
	}
	hashes, err := parseHexList(sp.Proof)
	if err != nil {
		return fmt.Errorf("server proof: %v", err)
	}
	if err := tlog.CheckTree(tlog.TreeProof(hashes), cp.Size, cp.Root, old.Size, old.Root); err != nil {
		return fmt.Errorf("server consistency proof does not verify: %v", err)
	}
	return nil
}

// ---- small helpers ----

// parseHex parses 64 lowercase hex digits.
func parseHex(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != tlog.HashSize || hex.EncodeToString(b) != s {
		return h, fmt.Errorf("%q is not 64 lowercase hex digits", s)
	}
	copy(h[:], b)
	return h, nil
}

func parseHexList(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, s := range list {
		h, err := parseHex(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

// oneLine flattens s onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// writeFileAtomic writes data to file via a temporary file and a rename.
func writeFileAtomic(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), ".tlog-verify-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), file)
}
