package compilecache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// maxPublishAttempts bounds how often a Put writes its blob again because GC or an
// eviction removed it (or its temporary file) before the record went in.
const maxPublishAttempts = 8

var testHookPutBlobReady func() // tests: runs between a Put's blob write (or look) and its record

// Put publishes content under m: the blob first (atomically, shared with any entry of
// the same content), then the journal record. rawFrom > 0 lets the bytes from there on
// be stored raw (mappable) when they do not compress.
func (j *Journal) Put(m Material, label string, content []byte, rawFrom int) error {
	if j.jf == nil || j.opts.Policy == PolicyReadOnly {
		return fmt.Errorf("compilecache: the journal is %s", j.opts.Policy)
	}
	data, d := encodeBlob(j.enc, content, rawFrom)
	path := blobPath(j.dir, d)
	k := m.Key()
	for attempt := 0; ; attempt++ {
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len(data)) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := writeAtomic(filepath.Dir(path), path, data); err != nil {
				if errors.Is(err, os.ErrNotExist) && attempt < maxPublishAttempts {
					continue // GC (with a short grace) removed the temporary file: again
				}
				return fmt.Errorf("compilecache: publishing blob: %w", err)
			}
		}
		if testHookPutBlobReady != nil {
			testHookPutBlobReady()
		}
		r := &record{typ: recPut, key: k, time: time.Now().UnixNano(), blob: d, size: int64(len(content)), stored: int64(len(data)), label: label, mat: m}
		published := false
		err := j.jf.update(func() error {
			// blobs are removed under this lock, and only while no live entry names them:
			// a blob that is here now stays until the record appended here is dropped
			if _, err := os.Stat(path); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // removed since we looked (evicted with its last entry, or an orphan)
				}
				return err
			}
			published = true
			return j.jf.writeLocked(true, r)
		})
		if err != nil {
			return fmt.Errorf("compilecache: %w", err)
		}
		if published {
			break
		}
		if attempt >= maxPublishAttempts {
			return fmt.Errorf("compilecache: blob %s removed again and again while publishing", d.String()[:12])
		}
	}
	if j.opts.Budget > 0 {
		j.evict(k, j.opts.Budget)
	}
	if err := j.jf.compact(false); err != nil {
		j.log.Warn("journal compaction failed", zap.Error(err))
	}
	return nil
}
