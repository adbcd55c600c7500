package compilecache

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// An export is a tar stream: for each entry, entries/<key> (the entry's journal record,
// framed and checksummed as in the journal) and blobs/<digest> (its blob file as
// stored), then tuning/<name> for every tuning record (its file as stored). Import
// verifies every blob in full before publishing it, and every tuning record before
// keeping it (where it beats the record already there).

// maxImportFile bounds one file of an imported archive.
const maxImportFile = 64 << 30

// Export writes the entries whose keys are listed (all when keys is empty).
func (j *Journal) Export(w io.Writer, keys []Key) (int, error) {
	es, err := j.Entries()
	if err != nil {
		return 0, err
	}
	want := map[Key]bool{}
	for _, k := range keys {
		want[k] = true
	}
	tw := tar.NewWriter(w)
	done := map[Digest]bool{}
	n := 0
	for _, e := range es {
		if len(want) > 0 && !want[e.Key] {
			continue
		}
		rec := record{typ: recPut, key: e.Key, time: e.Created.UnixNano(), blob: e.Blob, size: e.Size, stored: e.Stored, label: e.Label, mat: e.Material}
		if err := writeTarFile(tw, "entries/"+e.Key.String(), rec.frame()); err != nil {
			return n, err
		}
		if !done[e.Blob] {
			data, err := os.ReadFile(blobPath(j.dir, e.Blob))
			if err != nil {
				return n, fmt.Errorf("entry %s: %w", e.Key.Short(), err)
			}
			if err := writeTarFile(tw, "blobs/"+e.Blob.String(), data); err != nil {
				return n, err
			}
			done[e.Blob] = true
		}
		n++
	}
	recs, err := j.allTuning()
	if err != nil {
		return n, err
	}
	for _, r := range recs {
		if err := writeTarFile(tw, tuningDir+"/"+r.name(), r.encode()); err != nil {
			return n, err
		}
	}
	return n, tw.Close()
}

func writeTarFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// Import publishes the entries of an export; a damaged blob or record fails the import
// before anything of it is used (entries already imported stay).
func (j *Journal) Import(r io.Reader) (int, error) {
	if err := j.writable("import"); err != nil {
		return 0, err
	}
	tr := tar.NewReader(r)
	var recs []record
	var tuning []TuningRecord
	blobs := map[Digest]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("import: %w", err)
		}
		if h.Typeflag != tar.TypeReg || h.Size < 0 || h.Size > maxImportFile {
			return 0, fmt.Errorf("import: %s: not a cache file", h.Name)
		}
		dir, name := filepath.Split(h.Name)
		switch strings.TrimSuffix(dir, "/") {
		case "entries":
			data, err := io.ReadAll(io.LimitReader(tr, maxRecord+frameSize))
			if err != nil {
				return 0, err
			}
			s := parseRecords(data)
			rs := s.recs
			if len(s.skipped) > 0 || s.tail != nil || len(rs) != 1 || rs[0].off != 0 || rs[0].typ != recPut || rs[0].key.String() != name {
				return 0, fmt.Errorf("import: %s: %w: not a valid entry record", h.Name, ErrCorrupt)
			}
			recs = append(recs, rs[0])
		case "blobs":
			d, err := j.importBlob(name, tr)
			if err != nil {
				return 0, fmt.Errorf("import: %s: %w", h.Name, err)
			}
			blobs[d] = true
		case tuningDir:
			data, err := io.ReadAll(io.LimitReader(tr, maxRecord))
			if err != nil {
				return 0, err
			}
			t, err := decodeTuning(name, data)
			if err != nil {
				return 0, fmt.Errorf("import: %s: %w", h.Name, err)
			}
			tuning = append(tuning, t)
		default:
			return 0, fmt.Errorf("import: unexpected file %s", h.Name)
		}
	}
	n := 0
	for i := range recs {
		r := &recs[i]
		r.time = time.Now().UnixNano()
		// as in Put: the record goes in only while its blob exists, under the lock that
		// blob removal takes
		err := j.jf.update(func() error {
			if _, err := os.Stat(blobPath(j.dir, r.blob)); err != nil {
				if !blobs[r.blob] {
					return fmt.Errorf("import: entry %s: its blob is not in the archive", r.key.Short())
				}
				return fmt.Errorf("import: entry %s: its blob was removed (by gc) before its record: %w", r.key.Short(), err)
			}
			return j.jf.writeLocked(true, r)
		})
		if err != nil {
			return n, err
		}
		n++
	}
	for _, t := range tuning {
		if _, err := j.PutTuning(t); err != nil {
			return n, fmt.Errorf("import: tuning record of %s: %w", t.Label, err)
		}
	}
	return n, nil
}

// importBlob writes a blob to a temporary file, verifies it in full against its name and
// publishes it.
func (j *Journal) importBlob(name string, r io.Reader) (Digest, error) {
	var d Digest
	k, err := ParseKey(name)
	if err != nil {
		return d, err
	}
	d = Digest(k)
	path := blobPath(j.dir, d)
	if _, err := ensureDir(filepath.Dir(path), j.perm); err != nil {
		return d, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return d, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(j.perm.file); err != nil {
		tmp.Close()
		return d, err
	}
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return d, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return d, err
	}
	tmp.Close()
	if _, err := readBlob(j.dec, tmp.Name(), d, true); err != nil {
		return d, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return d, err
	}
	return d, syncDir(filepath.Dir(path))
}
