package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
)

// RankVariables are the environment variables that carry a process's MPI rank, most trusted
// first: Open MPI's own, then PMIx's (Open MPI 5, PRRTE, Slurm with PMIx), then PMI's (MPICH,
// Intel MPI, Slurm's PMI-2). They are the only part of an environment finegrain reads.
var RankVariables = [...]string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}

// MaxRank is the largest rank accepted: MPI ranks are C ints.
const MaxRank = math.MaxInt32

// MaxEnvironBytes bounds how much of one process's environment ParseRank is given to search:
// large enough for a pod with thousands of Service variables, small enough that listing
// thousands of processes stays cheap.
const MaxEnvironBytes = 256 << 10

// environBuffer is ParseRank's read buffer; an entry longer than it cannot hold a valid rank
// (the longest is OMPI_COMM_WORLD_RANK= and ten digits) and is skipped unread.
const environBuffer = 4096

var (
	// ErrEnvironTruncated reports an environment longer than the bound ParseRank searched, in
	// which no rank variable was found.
	ErrEnvironTruncated = errors.New("environment longer than the bound searched")
	// ErrMalformedRank reports a rank variable whose value is not a rank number.
	ErrMalformedRank = errors.New("rank variable is not a rank number")
)

// Rank is the MPI rank a process's environment names.
type Rank struct {
	// Variable is the one of RankVariables the rank came from; empty when the process is not an
	// MPI rank.
	Variable string
	Value    int
}

// Known reports whether the process is an MPI rank.
func (r Rank) Known() bool { return r.Variable != "" }

// ParseRank reads a NUL-separated environment, as /proc/<pid>/environ holds it, and returns
// the rank named by the most trusted of RankVariables whose first occurrence is a decimal from
// 0 to MaxRank without sign or leading zeros. Only entries lying wholly within the first limit
// bytes count, and at most limit+1 bytes are read. It reports ErrEnvironTruncated when the
// environment is longer than limit and no rank was found in it, ErrMalformedRank (naming the
// variable, never its value) when a rank variable is set to something else and no other one
// names a rank; nothing else of the environment is kept or reported.
func ParseRank(r io.Reader, limit int) (Rank, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, int64(limit)+1), environBuffer)
	var seen, valid [len(RankVariables)]bool
	var values [len(RankVariables)]int
	malformed, truncated := -1, false
	end := 0
	for done := false; !done; {
		entry, err := br.ReadSlice(0)
		end += len(entry)
		// The entry is looked at before the next read reuses the buffer.
		i, value := rankEntry(bytes.TrimSuffix(entry, []byte{0}))
		v, ok := parseRankValue(value)
		for errors.Is(err, bufio.ErrBufferFull) {
			ok = false
			var more []byte
			more, err = br.ReadSlice(0)
			end += len(more)
		}
		switch {
		case errors.Is(err, io.EOF):
			done = true
		case err != nil:
			return Rank{}, fmt.Errorf("read environment: %w", err)
		}
		if end > limit {
			truncated = true
			break
		}
		if i < 0 || seen[i] {
			continue
		}
		seen[i] = true
		if !ok {
			if malformed < 0 || i < malformed {
				malformed = i
			}
			continue
		}
		valid[i], values[i] = true, v
		if i == 0 {
			break
		}
	}
	for i, ok := range valid {
		if ok {
			return Rank{Variable: RankVariables[i], Value: values[i]}, nil
		}
	}
	switch {
	case truncated:
		return Rank{}, fmt.Errorf("no rank variable in the first %d bytes: %w", limit, ErrEnvironTruncated)
	case malformed >= 0:
		return Rank{}, fmt.Errorf("%s: %w", RankVariables[malformed], ErrMalformedRank)
	}
	return Rank{}, nil
}

// rankEntry returns the index in RankVariables of the variable an environment entry sets, and
// the value; -1 for any other entry.
func rankEntry(entry []byte) (int, []byte) {
	for i, name := range RankVariables {
		if len(entry) > len(name) && entry[len(name)] == '=' && string(entry[:len(name)]) == name {
			return i, entry[len(name)+1:]
		}
	}
	return -1, nil
}

// parseRankValue accepts "0" or a decimal without leading zeros up to MaxRank.
func parseRankValue(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v <= MaxRank
}
