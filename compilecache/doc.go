// Package compilecache is the binary journal (docs/ARCHITECTURE.md, "The binary
// journal"): a persistent, crash-safe, content-addressed store of compiled artifacts
// shared by every process that opens the same directory, so restarts and other replicas
// start warm.
//
// Layout of a directory:
//
//	journal           append-only records (put, use, drop), each with a CRC-32C
//	journal.damaged-* copies of the journal as damage found it (the newest four)
//	blobs/xx/<sha256> one file per distinct content, named by its SHA-256
//	locks/<key>       build locks (O_EXCL files with owner and lease)
//	quarantine/       damaged blobs moved aside for inspection (kiln cache gc clears it)
//	tuning/<sha256>.rec tuning records (TuningRecord), one per workload and target: a
//	                  CRC-32C line and the JSON record, written atomically; one that does
//	                  not check is moved to quarantine/ when read and never returned
//	tmp/              work directories of running processes (the C compiler's), each
//	                  held by a flock (internal/workdir); a writer's Open and GC remove
//	                  those whose process is gone
//
// Trust and permissions. The directory holds native code that kiln loads and runs: it
// must be trusted like the kiln binary. Open refuses it (ErrUnsafeDir) when others can
// write it, its blobs/ or its journal (o+w), when a directory above it lets others
// replace it (o+w without the sticky bit), or when it sits in a sticky shared directory
// such as /tmp and belongs to neither this user nor root (dir.go). Group write is
// allowed: a group sharing a cache is trusted like its owner. What kiln creates takes
// its permission bits from the directory's, whatever the umask: a directory 0755 gives
// files 0644 and directories 0755, 0750 gives 0640, 0700 gives 0600; so a cache filled by
// root (a prebuild job, an image build's cache import) is warm for the server's uid. Put
// verifies a blob file that already exists before naming it in a record, writes it again
// when it is damaged or unreadable, and sets the directory's bits on a good one that
// this user owns.
//
// Readers and writers. Policy readonly opens the journal O_RDONLY under shared locks
// only, creates nothing (a missing directory or journal is an empty cache), repairs
// nothing and writes no use records; it works where the process may write nothing. A
// writer (on, redo) that may not write the directory (another user's cache, a read-only
// volume) logs it and works read-only the same way. kiln cache ls and verify open
// read-only.
//
// Model. An entry maps a Key to a blob. A Key is the SHA-256 of its Material: the kind
// (whole executable or single kernel) and named components chosen by the caller, all of
// them content (model digest, canonical options, compiler identity, target, toolchain,
// tuning digest, schema), never paths. The material is stored with the entry, so a miss
// names the components that differ from the closest entry. Why a lookup missed is a
// value, MissCause (Get returns it in a *MissError that matches ErrMiss; Do puts it in
// Result.Miss): a MissKind to act on (off, redo, absent, evicted, blob-missing,
// corrupt, unreadable, invalidated), the differing components of an absent key, and a
// detail sentence for logs and the CLI. Blob contents are
// zstd-compressed; a large tail that does not compress (model weights) is stored raw and
// page-aligned, and Get maps it read-only from the page cache instead of copying it.
//
// Invariants:
//   - A blob is published atomically (temporary file in the same directory, fsync,
//     rename, fsync of the directory) before the record that names it is appended and
//     synced; a crash leaves at worst an unreferenced blob (GC removes it) or a torn
//     journal tail (truncated by the next writer that takes the exclusive lock). Every
//     directory kiln creates, and every directory a rename or a new file changes, is
//     fsynced, so a name survives a crash as long as the record naming it does.
//   - Damage costs the damaged record, not the journal. Records are framed (length,
//     CRC-32C); replay skips a record that does not check and resumes at the next valid
//     one: where the damaged frame's length says, or else at the first offset that starts
//     a run of valid records to the end of the file (so that a frame embedded in a
//     damaged record's strings is never taken for a record). A header one bit away from
//     this schema's is damage, not another schema (the header carries its own CRC). A
//     writer that finds damage keeps a copy of the file (journal.damaged-<UTC time>,
//     named in the log line, cause "journal-damaged") and rewrites the journal from the
//     live entries; a torn last append is only truncated (cause "journal-truncated"). A
//     reader that does not repair skips the same records and logs the damage once.
//   - Appends, repairs and compaction hold an exclusive flock on the journal; a process
//     whose journal path now names another inode (compaction renamed a new file in)
//     reopens and replays it, and never writes to the file it replaced.
//   - A live entry's blob exists. A put record is appended only while its blob file
//     exists, and a blob file is removed (eviction, GC of orphans) or moved aside
//     (quarantine) only while no live entry names it, each check and its change in one
//     step under the exclusive flock: a Put reusing the blob of an entry being evicted
//     by another process writes the blob again instead of naming a deleted file.
//   - Readers act on what the journal says now, not on what they last read: a blob that
//     is missing because another process evicted or replaced the entry meanwhile is a
//     miss (or a read of the new entry), not damage; an entry is dropped for a missing
//     blob, or evicted, only if it is still the entry looked at (again under the flock),
//     so a stale view never removes an entry published since.
//   - Nothing is used unchecked: blob header CRC, head CRC and zstd frame checksum, tail
//     CRC, the digest in the header against the name and the journal, the size against
//     the journal. A damaged entry is quarantined (with every entry sharing its blob),
//     counted (Stats.Corrupt), logged with its cause, and reported as a miss, so the
//     caller rebuilds; it is never served. An I/O error that is not damage is a miss
//     too, but quarantines nothing.
//   - Crash testing: bench/journalcrash SIGKILLs writer processes (one or two at a time)
//     at random moments and after each kill opens, verifies and reads back every entry.
//   - One build per key per process (singleflight) and, across processes, per build
//     lock: created with O_EXCL, renewed while building, taken over when its lease
//     expired, its owner is a dead process on this host (a SIGKILLed compile frees the
//     key at once), or its lease ends more than one lease duration ahead (a clock that is
//     not ours) and this process has not seen it renewed for one lease duration; waiters
//     poll the journal for the entry, and build themselves when the lock disappears
//     without one. GC removes the lock files a waiter would take over.
//   - Policies: on, readonly (never writes, not even use records; see above), redo
//     (rebuilds and overwrites), off (no files at all). A budget evicts by last use (use
//     records are written at most once a minute per entry).
//
// References: the design follows content-addressed build caches (Go's GOCACHE, ccache)
// and write-ahead logs with per-record checksums; the failure modes it avoids are
// onnxruntime#6455 (a TensorRT engine cache keyed without the weights) and triton#4587
// (a temporary path in the key).
package compilecache
