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
	if err := j.writable("put"); err != nil {
		return err
	}
	data, d := encodeBlob(j.enc, content, rawFrom)
	path := blobPath(j.dir, d)
	k := m.Key()
	for attempt := 0; ; attempt++ {
		if !j.reusable(path, d, int64(len(data))) {
			if _, err := ensureDir(filepath.Dir(path), j.perm); err != nil {
				return fmt.Errorf("compilecache: publishing blob: %w", err)
			}
			if err := writeAtomic(filepath.Dir(path), path, data, j.perm.file); err != nil {
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

// reusable says whether the blob file at path already holds content d as this Put would
// store it: the same size, and it reads back (header, checksums, digest). A damaged or
// unreadable file is written again; a good one of this user with other permission bits
// than the directory gives is fixed.
func (j *Journal) reusable(path string, d Digest, size int64) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() != size {
		return false
	}
	if _, err := readBlob(j.dec, path, d, false); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			j.log.Warn("blob damaged or unreadable: writing it again", zap.String("blob", d.String()[:12]), zap.Error(err))
		}
		return false
	}
	if st.Mode().Perm() != j.perm.file && ownerOf(st) == os.Geteuid() {
		os.Chmod(path, j.perm.file)
	}
	return true
}
