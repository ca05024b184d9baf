package main

// C2SP tlog-cosignature: a witness's cosignature/v1 (Ed25519) on a
// checkpoint, checked through golang.org/x/mod/sumdb/note's own parsing and
// key matching (note.Open), with a note.Verifier for signature type 0x04.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

const algCosignatureV1 = 0x04

// cosigVerifier checks cosignature/v1 signatures by one witness key.
type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }

// Verify checks sig = timestamp (8 bytes, big-endian) || Ed25519 signature
// over "cosignature/v1\ntime <timestamp>\n" followed by the note text.
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	if t > 1<<63-1 {
		return false
	}
	m := []byte("cosignature/v1\ntime " + strconv.FormatUint(t, 10) + "\n")
	m = append(m, msg...)
	return ed25519.Verify(v.key, m, sig[8:])
}

// newCosigVerifier reads a witness's verifier key, name+hash+base64(0x04 || key).
func newCosigVerifier(vkey string) (*cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("not name+hash+base64")
	}
	name, hexHash, b64 := parts[0], parts[1], parts[2]
	h, err := strconv.ParseUint(hexHash, 16, 32)
	if err != nil || len(hexHash) != 8 {
		return nil, errors.New("malformed key hash")
	}
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(k) != 1+ed25519.PublicKeySize || k[0] != algCosignatureV1 {
		return nil, errors.New("not a cosignature/v1 Ed25519 key (type 0x04)")
	}
	sum := sha256.Sum256(append([]byte(name+"\n"), k...))
	if binary.BigEndian.Uint32(sum[:4]) != uint32(h) {
		return nil, errors.New("key hash does not match its name and key")
	}
	return &cosigVerifier{name: name, hash: uint32(h), key: ed25519.PublicKey(k[1:])}, nil
}

// checkCosigned requires a valid cosignature on msg by each witness key file.
func checkCosigned(msg []byte, files []string) ([]string, error) {
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("witness key: %v", err)
		}
		v, err := newCosigVerifier(strings.TrimRight(string(b), " \t\r\n"))
		if err != nil {
			return nil, fmt.Errorf("witness key %s: %v", f, err)
		}
		if _, err := note.Open(msg, note.VerifierList(v)); err != nil {
			return nil, fmt.Errorf("no valid cosignature by the witness %s+%08x: %v", v.name, v.hash, err)
		}
		names = append(names, v.name)
	}
	return names, nil
}
