package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// entry is one file of an archive.
type entry struct {
	name string
	data []byte
	mode int64
}

// tarGz writes a gzipped tar of entries that depends only on their names,
// modes and contents: sorted, every mtime mtime, owned by root:root with no
// user or group names, and a gzip header without name or time (RFC 1952's
// MTIME 0: "no time stamp is available"). Directories are implied by the
// paths, as in `git archive`.
func tarGz(entries []entry, mtime time.Time) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.name,
			Size:     int64(len(e.data)),
			Mode:     e.mode,
			ModTime:  mtime.UTC().Truncate(time.Second),
			Format:   tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// treeEntries reads every regular file under root/dir into entries named
// prefix + the path below dir. Executable bits are kept, the rest of the
// mode is normalised to 0644/0755 so that a checkout's umask does not leak
// into the archive.
func treeEntries(root, dir, prefix string) ([]entry, error) {
	var out []entry
	base := filepath.Join(root, dir)
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, path)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if fi.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, entry{name: prefix + filepath.ToSlash(rel), data: data, mode: mode})
		return nil
	})
	return out, err
}

// trackedOnly drops entries git does not track (build outputs of a module
// tree, editor files), given the repository-relative names git ls-files
// printed.
func trackedOnly(entries []entry, prefix, dir string, tracked map[string]bool) []entry {
	var out []entry
	for _, e := range entries {
		if tracked[dir+"/"+strings.TrimPrefix(e.name, prefix)] {
			out = append(out, e)
		}
	}
	return out
}

// chartCreated is the time stamped on a packaged chart's Chart.yaml (the
// release's time), in RFC 3339: the chart's OCI manifest carries it, so
// that one chart always pushes as one manifest.
func chartCreated(tgz []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("chart archive without Chart.yaml: %w", err)
		}
		if strings.HasSuffix(h.Name, "/Chart.yaml") {
			return h.ModTime.UTC().Format(time.RFC3339), nil
		}
	}
}
