package compilecache

// MissKind says why the journal had no usable entry for a key.
type MissKind int

const (
	MissNone        MissKind = iota // not a miss: the entry was served
	MissOff                         // the cache is off (PolicyOff): nothing is looked up
	MissRedo                        // PolicyRedo: existing entries are ignored
	MissAbsent                      // no entry under the key; Differs names what the closest entry differs in
	MissEvicted                     // the entry was evicted by another process between lookup and read
	MissBlobMissing                 // the entry named a blob file that is gone; the entry is dropped
	MissCorrupt                     // the entry's bytes are damaged (ErrCorrupt): quarantined, never served
	MissUnreadable                  // reading the entry failed for another reason (an I/O error)
	MissInvalidated                 // the caller found the content unusable and dropped it (Invalidate)
)

var missKindNames = [...]string{"none", "off", "redo", "absent", "evicted", "blob-missing", "corrupt", "unreadable", "invalidated"}

func (k MissKind) String() string {
	if k < 0 || int(k) >= len(missKindNames) {
		return "unknown"
	}
	return missKindNames[k]
}

// MissCause is why a lookup missed: a kind to act on and a sentence for people.
type MissCause struct {
	Kind MissKind
	// Detail says what was found, for logs and the CLI (the closest entry and how it
	// differs, the damage, the read error); empty when the kind says it all.
	Detail string
	// Differs holds the key components in which the closest entry of the same kind
	// differs (MissAbsent with such an entry), e.g. "compiler" or "options".
	Differs []string
}

// String is the cause as a log line reads it.
func (c MissCause) String() string {
	if c.Detail != "" {
		return c.Detail
	}
	switch c.Kind {
	case MissOff:
		return "the cache is off"
	case MissRedo:
		return "policy redo"
	}
	return c.Kind.String()
}

// MissError is what Get returns when there is no usable entry; it wraps ErrMiss.
type MissError struct {
	Cause MissCause
}

func (e *MissError) Error() string { return ErrMiss.Error() + ": " + e.Cause.String() }

// Is makes errors.Is(err, ErrMiss) hold for every miss.
func (e *MissError) Is(target error) bool { return target == ErrMiss }

func missErr(kind MissKind, detail string) error {
	return &MissError{Cause: MissCause{Kind: kind, Detail: detail}}
}
