// Command selftest checks tlog-verify without the stratum server: it builds
// logs of random 32-byte entries in memory, serves them over HTTP with the
// same contract as stratum (checkpoint, C2SP tiles and entry bundles, events,
// inclusion and consistency proofs), and runs the verifier binary against
// good logs (which must pass) and tampered ones (which must fail).
//
//	selftest /path/to/tlog-verify
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const origin = "stratum.test/log"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: selftest /path/to/tlog-verify")
		os.Exit(2)
	}
	if err := runAll(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "selftest: %v\n", err)
		os.Exit(1)
	}
}

// ---- the in-memory log ----

type memLog struct {
	entries [][]byte
	hashes  []tlog.Hash // stored hashes, in tlog.StoredHashIndex order
}

func newLog(n int, rnd *mrand.Rand) *memLog {
	l := &memLog{}
	for i := 0; i < n; i++ {
		e := make([]byte, 32)
		rnd.Read(e)
		hs, err := tlog.StoredHashes(int64(i), e, l)
		if err != nil {
			panic(err)
		}
		l.entries = append(l.entries, e)
		l.hashes = append(l.hashes, hs...)
	}
	return l
}

func (l *memLog) size() int64 { return int64(len(l.entries)) }

func (l *memLog) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(l.hashes)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = l.hashes[x]
	}
	return out, nil
}

// root is the RFC 6962 root of the first n entries (SHA-256 of nothing for 0).
func (l *memLog) root(n int64) tlog.Hash {
	if n == 0 {
		return sha256.Sum256(nil)
	}
	h, err := tlog.TreeHash(n, l)
	if err != nil {
		panic(err)
	}
	return h
}

// checkpoint signs "<origin>\n<size>\n<root>\n" for the first n entries.
func (l *memLog) checkpoint(s note.Signer, n int64) []byte {
	r := l.root(n)
	return signText(s, fmt.Sprintf("%s\n%d\n%s\n", origin, n, base64.StdEncoding.EncodeToString(r[:])))
}

func signText(s note.Signer, text string) []byte {
	msg, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		panic(err)
	}
	return msg
}

// ---- the HTTP server ----

// server serves a log whose published checkpoint has size size; tiles and
// proofs are served for anything the whole log (which may be larger) covers.
type server struct {
	log        *memLog
	size       int64
	signer     note.Signer
	checkpoint []byte                             // if set, served instead of a fresh checkpoint
	token      string                             // if set, required as a bearer token
	noPartial  bool                               // 404 partial tiles once the full tile exists
	missing    string                             // a path to answer 404
	mutate     func(path string, b []byte) []byte // tampering hook
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path == s.missing {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, ctype, code := s.route(r)
	if code != http.StatusOK {
		http.Error(w, string(body), code)
		return
	}
	if s.mutate != nil {
		body = s.mutate(r.URL.Path, body)
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(body)
}

func (s *server) route(r *http.Request) (body []byte, ctype string, code int) {
	path := r.URL.Path
	bad := func(format string, args ...interface{}) ([]byte, string, int) {
		return []byte(fmt.Sprintf(format, args...)), "", http.StatusNotFound
	}
	ok := func(v interface{}) ([]byte, string, int) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b, "application/json", http.StatusOK
	}
	n := s.log.size()
	switch {
	case path == "/v1/log/checkpoint":
		if s.checkpoint != nil {
			return s.checkpoint, "text/plain; charset=utf-8", http.StatusOK
		}
		return s.log.checkpoint(s.signer, s.size), "text/plain; charset=utf-8", http.StatusOK

	case strings.HasPrefix(path, "/v1/log/tile/"):
		// Reuse tlog's strict parser by adding the height: tile/8/L/N, tile/8/data/N.
		rest := strings.TrimPrefix(path, "/v1/log/tile/")
		if strings.HasPrefix(rest, "entries/") {
			rest = "data/" + strings.TrimPrefix(rest, "entries/")
		}
		t, err := tlog.ParseTilePath("tile/8/" + rest)
		if err != nil || t.H != 8 {
			return bad("bad tile path %s", path)
		}
		level := t.L
		if level < 0 {
			level = 0
		}
		first := t.N << 8
		end := first + int64(t.W) // exclusive, at this level
		if end<<(8*uint(level)) > n {
			return bad("tile %s is beyond the log", path)
		}
		if s.noPartial && t.W < 256 && (first+256)<<(8*uint(level)) <= n {
			return bad("partial tile %s is gone", path)
		}
		var b []byte
		for i := first; i < end; i++ {
			if t.L < 0 {
				e := s.log.entries[i]
				b = append(b, byte(len(e)>>8), byte(len(e)))
				b = append(b, e...)
			} else {
				h := s.log.hashes[tlog.StoredHashIndex(8*t.L, i)]
				b = append(b, h[:]...)
			}
		}
		return b, "application/octet-stream", http.StatusOK

	case path == "/v1/log/consistency":
		from, err1 := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64)
		to, err2 := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64)
		if err1 != nil || err2 != nil || from < 1 || from > to || to > n {
			return bad("bad consistency range")
		}
		p, err := tlog.ProveTree(to, from, s.log)
		if err != nil {
			panic(err)
		}
		fr, tr := s.log.root(from), s.log.root(to)
		return ok(map[string]interface{}{"from": from, "to": to,
			"fromRoot": hex.EncodeToString(fr[:]), "toRoot": hex.EncodeToString(tr[:]), "proof": hexList(p)})

	case strings.HasPrefix(path, "/v1/admin/events/"):
		f := strings.Split(strings.TrimPrefix(path, "/v1/admin/events/"), "/")
		p, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || p < 1 || p > n || len(f) > 2 || (len(f) == 2 && f[1] != "proof") {
			return bad("no event %s", path)
		}
		entry := hex.EncodeToString(s.log.entries[p-1])
		if len(f) == 1 {
			return ok(map[string]interface{}{"position": p, "hash": entry})
		}
		size, err := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64)
		if err != nil || size < p || size > n {
			return bad("bad size")
		}
		proof, err := tlog.ProveRecord(size, p-1, s.log)
		if err != nil {
			panic(err)
		}
		root := s.log.root(size)
		return ok(map[string]interface{}{"position": p, "size": size,
			"root": hex.EncodeToString(root[:]), "hash": entry, "proof": hexList(proof)})
	}
	return bad("no route %s", path)
}

func hexList(hs []tlog.Hash) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, hex.EncodeToString(h[:]))
	}
	return out
}

// ---- tampering helpers ----

// flipByte returns a hook that flips one byte of the response at path.
func flipByte(path string, off int) func(string, []byte) []byte {
	return func(p string, b []byte) []byte {
		if p == path {
			b = append([]byte(nil), b...)
			b[off] ^= 0x01
		}
		return b
	}
}

// editJSON returns a hook that edits the JSON responses whose path matches.
func editJSON(match func(string) bool, edit func(map[string]interface{})) func(string, []byte) []byte {
	return func(p string, b []byte) []byte {
		if !match(p) {
			return b
		}
		var m map[string]interface{}
		if err := json.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}
}

// flipHex changes the first digit of a hex string.
func flipHex(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}

// corruptSignature flips a bit of the (first) signature in a signed note.
func corruptSignature(msg []byte) []byte {
	i := strings.Index(string(msg), "\n\n— ")
	lines := strings.SplitN(string(msg[i+2:]), "\n", 2)
	f := strings.Fields(lines[0]) // "—", name, base64
	sig, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		panic(err)
	}
	sig[len(sig)-1] ^= 0x01
	line := fmt.Sprintf("— %s %s", f[1], base64.StdEncoding.EncodeToString(sig))
	return []byte(string(msg[:i+2]) + line + "\n" + lines[1])
}

// ---- running the verifier ----

type harness struct {
	bin, dir, vkeyFile string
	passed, failed     int
}

type result struct {
	code           int
	stdout, stderr string
}

// verify runs the verifier against srv (over TLS if useTLS, in which case
// -cacert is passed only when withCA is true).
func (h *harness) verify(srv *server, useTLS, withCA bool, args ...string) result {
	ts := httptest.NewUnstartedServer(srv)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // no TLS handshake noise
	if useTLS {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	defer ts.Close()
	full := []string{"-server", ts.URL, "-vkey", h.vkeyFile}
	if useTLS && withCA {
		ca := filepath.Join(h.dir, "ca.pem")
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
		if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
			panic(err)
		}
		full = append(full, "-cacert", ca)
	}
	full = append(full, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, full...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		panic(err)
	}
	return result{code, out.String(), errb.String()}
}

func (h *harness) report(name string, err error, detail string) {
	if err != nil {
		h.failed++
		fmt.Printf("FAIL  %s: %v\n", name, err)
		return
	}
	h.passed++
	fmt.Printf("ok    %-44s %s\n", name, detail)
}

type summary struct {
	Origin         string `json:"origin"`
	Size           int64  `json:"size"`
	Root           string `json:"root"`
	Tiles          int    `json:"tiles"`
	Bundles        int    `json:"bundles"`
	Entries        int64  `json:"entries"`
	Inclusion      int    `json:"inclusion"`
	ConsistentFrom *int64 `json:"consistentFrom"`
}

// pass runs a case that must succeed and checks the summary line.
// oldSize < 0 means no -old; samples is the -samples value in effect.
func (h *harness) pass(name string, srv *server, useTLS bool, oldSize int64, samples int, args ...string) {
	r := h.verify(srv, useTLS, true, args...)
	err := func() error {
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
		}
		if strings.Count(r.stdout, "\n") != 1 || r.stderr != "" {
			return fmt.Errorf("want one line on stdout and nothing on stderr, got %q / %q", r.stdout, r.stderr)
		}
		var s summary
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			return err
		}
		n := srv.size
		root := srv.log.root(n)
		want := summary{Origin: origin, Size: n, Root: base64.StdEncoding.EncodeToString(root[:]),
			Tiles: wantTiles(n), Bundles: int((n + 255) / 256), Entries: n, Inclusion: int(min64(n, int64(samples)))}
		got := s
		got.ConsistentFrom = nil
		if got != want {
			return fmt.Errorf("summary %s, want %+v", strings.TrimSpace(r.stdout), want)
		}
		if (oldSize < 0) != (s.ConsistentFrom == nil) || (s.ConsistentFrom != nil && *s.ConsistentFrom != oldSize) {
			return fmt.Errorf("summary %s: wrong consistentFrom (want %d)", strings.TrimSpace(r.stdout), oldSize)
		}
		return nil
	}()
	h.report(name, err, strings.TrimSpace(r.stdout))
}

// fail runs a case that must fail with exit 1 and a reason containing want.
func (h *harness) fail(name string, srv *server, useTLS, withCA bool, want string, args ...string) {
	r := h.verify(srv, useTLS, withCA, args...)
	msg := strings.TrimSpace(r.stderr)
	var err error
	switch {
	case r.code != 1:
		err = fmt.Errorf("exit %d, want 1 (stderr %q)", r.code, msg)
	case r.stdout != "":
		err = fmt.Errorf("printed %q on stdout", r.stdout)
	case strings.Count(r.stderr, "\n") != 1 || !strings.Contains(msg, want):
		err = fmt.Errorf("stderr %q, want one line containing %q", r.stderr, want)
	}
	h.report(name, err, "-> "+msg)
}

// wantTiles counts the hash tiles of a tree of size n.
func wantTiles(n int64) int {
	t := 0
	for c := n; c > 0; c >>= 8 {
		t += int((c + 255) / 256)
	}
	return t
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// ---- the cases ----

func runAll(bin string) error {
	dir, err := os.MkdirTemp("", "tlog-selftest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	skey, vkey, err := note.GenerateKey(rand.Reader, "stratum.test")
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	otherKey, _, err := note.GenerateKey(rand.Reader, "stratum.test") // same name, other key
	if err != nil {
		return err
	}
	other, err := note.NewSigner(otherKey)
	if err != nil {
		return err
	}
	h := &harness{bin: bin, dir: dir, vkeyFile: filepath.Join(dir, "vkey")}
	if err := os.WriteFile(h.vkeyFile, []byte(vkey+"\n"), 0o644); err != nil {
		return err
	}
	cp := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, b []byte) {
		if err := os.WriteFile(cp(name), b, 0o644); err != nil {
			panic(err)
		}
	}
	seed := time.Now().UnixNano()
	fmt.Printf("selftest: seed %d, verifier key %s\n", seed, vkey)
	rnd := mrand.New(mrand.NewSource(seed))
	logA := newLog(70000, rnd) // the log; its prefixes are the sizes tested
	logB := newLog(300, rnd)   // a different history

	// checkSaved reports a failure if -save did not write the checkpoint of size n.
	checkSaved := func(name, file string, n int64) {
		saved, err := os.ReadFile(cp(file))
		if err != nil || string(saved) != string(logA.checkpoint(signer, n)) {
			h.report(name+": -save", fmt.Errorf("saved checkpoint is not the one of size %d (%v)", n, err), "")
		}
	}

	at := func(l *memLog, n int64) *server { return &server{log: l, size: n, signer: signer} }

	// Good logs, each size saved for the consistency checks below.
	sizes := []int64{0, 1, 255, 256, 257, 65535, 65536, 70000}
	for _, n := range sizes {
		h.pass(fmt.Sprintf("size %d", n), at(logA, n), false, -1, 8, "-save", cp(fmt.Sprint(n)))
		checkSaved(fmt.Sprintf("size %d", n), fmt.Sprint(n), n)
	}
	// Consistency across sizes, including equal sizes and the empty tree.
	for _, p := range [][2]int64{{0, 0}, {0, 1}, {1, 255}, {255, 256}, {256, 257}, {257, 70000},
		{1, 70000}, {65535, 65536}, {65536, 70000}, {70000, 70000}} {
		h.pass(fmt.Sprintf("consistency %d -> %d", p[0], p[1]), at(logA, p[1]), false, p[0], 8,
			"-old", cp(fmt.Sprint(p[0])))
	}
	// -old and -save on the same file, advancing (and once standing still).
	write("rolling", logA.checkpoint(signer, 1))
	for _, p := range [][2]int64{{1, 1}, {1, 300}, {300, 300}, {300, 70000}} {
		name := fmt.Sprintf("rolling -old=-save, %d -> %d", p[0], p[1])
		h.pass(name, at(logA, p[1]), false, p[0], 8, "-old", cp("rolling"), "-save", cp("rolling"))
		checkSaved(name, "rolling", p[1])
	}
	// Sample counts, a token, the C2SP full-tile fallback, TLS.
	h.pass("samples 2", at(logA, 70000), false, -1, 2, "-samples", "2")
	h.pass("samples 500", at(logA, 70000), false, -1, 500, "-samples", "500")
	h.pass("samples 500 of 3", at(logA, 3), false, -1, 500, "-samples", "500")
	tok := at(logA, 257)
	tok.token = "s3cret"
	h.pass("bearer token", tok, false, -1, 8, "-token", "s3cret")
	np := at(logA, 257)
	np.noPartial = true // partial tiles gone: the full ones must be used
	h.pass("partial tiles gone, full tiles used", np, false, 256, 8, "-old", cp("256"))
	np7 := at(logA, 65537)
	np7.noPartial = true
	h.pass("partial tiles gone at 65537", np7, false, -1, 8)
	h.pass("https with -cacert", at(logA, 257), true, -1, 8)

	// Tampering and misbehaviour: each must fail, for the right reason.
	tamper := func(n int64, hook func(string, []byte) []byte) *server {
		s := at(logA, n)
		s.mutate = hook
		return s
	}
	h.fail("tampered level-0 tile byte", tamper(257, flipByte("/v1/log/tile/0/000", 100)), false, false,
		"tile/0/000: hash 3 is not the record hash of entry 3")
	h.fail("tampered level-0 partial tile", tamper(257, flipByte("/v1/log/tile/0/001.p/1", 31)), false, false,
		"tile/0/001.p/1: hash 0 is not the record hash")
	h.fail("tampered level-1 tile byte", tamper(70000, flipByte("/v1/log/tile/1/000", 32*200)), false, false,
		"tile/1/000: hash 200 is not the root of tile/0/200")
	h.fail("tampered level-1 partial tile", tamper(70000, flipByte("/v1/log/tile/1/001.p/17", 32*16)), false, false,
		"tile/1/001.p/17: hash 16 is not the root of tile/0/272")
	h.fail("tampered level-2 tile byte", tamper(70000, flipByte("/v1/log/tile/2/000.p/1", 0)), false, false,
		"tile/2/000.p/1: hash 0 is not the root of tile/1/000")
	h.fail("tampered entry", tamper(257, flipByte("/v1/log/tile/entries/000", 3*34+2+5)), false, false,
		"hash 3 is not the record hash of entry 3 in tile/entries/000")
	h.fail("tampered entry, last of partial bundle", tamper(70000, flipByte("/v1/log/tile/entries/273.p/112", 111*34+33)),
		false, false, "is not the record hash of entry 69999")
	h.fail("entry length prefix changed", tamper(257, flipByte("/v1/log/tile/entries/000", 1)), false, false,
		"tile/entries/000: entry 0 has 33 bytes")
	h.fail("short tile", tamper(257, func(p string, b []byte) []byte {
		if p == "/v1/log/tile/0/000" {
			return b[:len(b)-1]
		}
		return b
	}), false, false, "tile/0/000: 8191 bytes, want 8192")

	wrongKey := at(logA, 257)
	wrongKey.checkpoint = logA.checkpoint(other, 257)
	h.fail("checkpoint signed by another key", wrongKey, false, false, "not signed by the verifier key")
	badSig := at(logA, 257)
	badSig.checkpoint = corruptSignature(logA.checkpoint(signer, 257))
	h.fail("checkpoint signature corrupted", badSig, false, false, "invalid signature")
	wrongRoot := at(logA, 257)
	r := logA.root(256)
	wrongRoot.checkpoint = signText(signer, fmt.Sprintf("%s\n257\n%s\n", origin, base64.StdEncoding.EncodeToString(r[:])))
	h.fail("signed checkpoint with a wrong root", wrongRoot, false, false, "root from tiles")
	extra := at(logA, 257)
	r = logA.root(257)
	extra.checkpoint = signText(signer, fmt.Sprintf("%s\n257\n%s\nextra\n", origin, base64.StdEncoding.EncodeToString(r[:])))
	h.fail("checkpoint with a fourth line", extra, false, false, "want exactly 3")
	zeroRoot := at(logA, 0)
	zeroRoot.checkpoint = signText(signer, fmt.Sprintf("%s\n0\n%s\n", origin, base64.StdEncoding.EncodeToString(make([]byte, 32))))
	h.fail("empty tree with the all-zero root", zeroRoot, false, false, "not the empty tree's")

	h.fail("log shrank (old 257, new 256)", at(logA, 256), false, false, "the log shrank", "-old", cp("257"))
	h.fail("log shrank to 0", at(logA, 0), false, false, "the log shrank", "-old", cp("1"))
	write("B257", logB.checkpoint(signer, 257))
	h.fail("same size, other root", at(logA, 257), false, false, "same size, other root: the log was rewritten",
		"-old", cp("B257"))
	h.fail("old checkpoint from a forked history", at(logA, 70000), false, false, "is not a prefix of the verified tiles",
		"-old", cp("B257"))
	r = logA.root(1)
	write("other-origin", signText(signer, fmt.Sprintf("elsewhere\n1\n%s\n", base64.StdEncoding.EncodeToString(r[:]))))
	h.fail("old checkpoint for another origin", at(logA, 257), false, false, "is for origin", "-old", cp("other-origin"))

	h.fail("server inclusion proof wrong", tamper(70000, editJSON(
		func(p string) bool { return strings.HasSuffix(p, "/proof") },
		func(m map[string]interface{}) {
			pr := m["proof"].([]interface{})
			pr[0] = flipHex(pr[0].(string))
		})), false, false, "server inclusion proof does not verify")
	h.fail("server inclusion proof for another root", tamper(257, editJSON(
		func(p string) bool { return strings.HasSuffix(p, "/proof") },
		func(m map[string]interface{}) { m["root"] = flipHex(m["root"].(string)) })), false, false,
		"server proof root")
	h.fail("server consistency proof wrong", tamper(70000, editJSON(
		func(p string) bool { return p == "/v1/log/consistency" },
		func(m map[string]interface{}) {
			pr := m["proof"].([]interface{})
			pr[len(pr)-1] = flipHex(pr[len(pr)-1].(string))
		})), false, false, "server consistency proof does not verify", "-old", cp("257"))
	h.fail("event hash wrong", tamper(70000, editJSON(
		func(p string) bool { return p == "/v1/admin/events/70000" },
		func(m map[string]interface{}) { m["hash"] = hex.EncodeToString(logA.entries[0]) })), false, false,
		"event 70000: hash")

	h.fail("missing token", tok, false, false, "401")
	h.fail("https without -cacert", at(logA, 257), true, false, "certificate")
	gone := at(logB, 257)
	gone.missing = "/v1/log/tile/0/001.p/1" // and the full tile does not exist yet
	h.fail("partial tile missing, no full tile", gone, false, false, "GET /v1/log/tile/0/001: 404")

	fmt.Printf("selftest: %d passed, %d failed\n", h.passed, h.failed)
	if h.failed > 0 {
		return fmt.Errorf("%d case(s) failed", h.failed)
	}
	return nil
}
