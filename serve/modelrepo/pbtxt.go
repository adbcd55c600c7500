package modelrepo

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// This file finds the fields of a text-format message that its descriptor does not
// know, so that ParseModelConfig can name them in warnings and blank them out before
// a strict parse. It only runs on input that prototext has already accepted (with
// unknown fields discarded), so it needs to find token boundaries, not to validate.

// maxNesting bounds how deeply messages may nest; a Triton model config nests five
// levels at most.
const maxNesting = 32

// An ignoredField is an unknown field's name, value and trailing separator.
type ignoredField struct {
	path       string // dotted field names from the top-level message
	start, end int    // byte offsets in the input
}

type tokKind byte

const (
	tokEOF    tokKind = 0
	tokWord   tokKind = 'w' // identifier, number, or the minus sign of a spaced number
	tokString tokKind = 's' // one quoted string
)

type token struct {
	kind       tokKind // tokEOF, tokWord, tokString or the punctuation byte itself
	start, end int
}

// pbtxtScanner splits text format into tokens the way the protobuf text decoder does.
type pbtxtScanner struct {
	src []byte
	pos int
}

// skipSpace skips whitespace and '#' comments.
func (s *pbtxtScanner) skipSpace() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\n', '\r', '\t':
			s.pos++
		case '#':
			for s.pos < len(s.src) && s.src[s.pos] != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func isWordByte(c byte) bool {
	return c == '-' || c == '+' || c == '.' || c == '_' ||
		'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func (s *pbtxtScanner) peek() (token, error) {
	save := s.pos
	t, err := s.next()
	s.pos = save
	return t, err
}

func (s *pbtxtScanner) next() (token, error) {
	s.skipSpace()
	start := s.pos
	if start >= len(s.src) {
		return token{kind: tokEOF, start: start, end: start}, nil
	}
	switch c := s.src[start]; {
	case strings.IndexByte("{}<>[]:,;", c) >= 0:
		s.pos++
		return token{kind: tokKind(c), start: start, end: s.pos}, nil
	case c == '"' || c == '\'':
		i := start + 1
		for ; i < len(s.src) && s.src[i] != c; i++ {
			switch s.src[i] {
			case '\\':
				i++
			case '\n':
				return token{}, s.errorAt(start, "unterminated string")
			}
		}
		if i >= len(s.src) {
			return token{}, s.errorAt(start, "unterminated string")
		}
		s.pos = i + 1
		return token{kind: tokString, start: start, end: s.pos}, nil
	case isWordByte(c):
		for s.pos < len(s.src) && isWordByte(s.src[s.pos]) {
			s.pos++
		}
		return token{kind: tokWord, start: start, end: s.pos}, nil
	default:
		return token{}, s.errorAt(start, fmt.Sprintf("unexpected character %q", c))
	}
}

// typeName reads the rest of an extension or Any type name after its '[', which may
// contain spaces and comments, and returns it without them.
func (s *pbtxtScanner) typeName() (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	for {
		s.skipSpace()
		if s.pos >= len(s.src) {
			return "", s.errorAt(s.pos, "unterminated type name")
		}
		c := s.src[s.pos]
		s.pos++
		b.WriteByte(c)
		if c == ']' {
			return b.String(), nil
		}
	}
}

// A scanError is input the scanner cannot split. It should not happen on input the
// protobuf decoder accepted; ParseModelConfig falls back to the decoder if it does.
type scanError struct {
	line, col int
	msg       string
}

func (e *scanError) Error() string { return fmt.Sprintf("line %d:%d: %s", e.line, e.col, e.msg) }

func (s *pbtxtScanner) errorAt(pos int, msg string) error {
	line, col := position(s.src, pos)
	return &scanError{line: line, col: col, msg: msg}
}

// position returns the 1-based line and column (in runes) of a byte offset, as the
// protobuf text decoder counts them.
func position(src []byte, pos int) (line, col int) {
	line, lineStart := 1, 0
	for i := 0; i < pos && i < len(src); i++ {
		if src[i] == '\n' {
			line, lineStart = line+1, i+1
		}
	}
	return line, utf8.RuneCount(src[lineStart:min(pos, len(src))]) + 1
}

// unknownFieldFinder walks a message in text format against its descriptor.
type unknownFieldFinder struct {
	sc      pbtxtScanner
	ignored []ignoredField
	depth   int
}

// findUnknownFields returns the fields of src that md does not declare, at any depth.
func findUnknownFields(src []byte, md protoreflect.MessageDescriptor) ([]ignoredField, error) {
	f := &unknownFieldFinder{sc: pbtxtScanner{src: src}}
	if err := f.message(md, "", tokEOF); err != nil {
		return nil, err
	}
	return f.ignored, nil
}

// message reads fields up to the closing token (tokEOF at the top level). md is nil
// inside a field that is itself unknown: its contents are skipped, not reported.
func (f *unknownFieldFinder) message(md protoreflect.MessageDescriptor, path string, closer tokKind) error {
	f.depth++
	defer func() { f.depth-- }()
	if f.depth > maxNesting {
		line, col := position(f.sc.src, f.sc.pos)
		return &SyntaxError{Line: line, Column: col, Msg: fmt.Sprintf("messages nested more than %d deep", maxNesting)}
	}
	for {
		t, err := f.sc.next()
		if err != nil {
			return err
		}
		if t.kind == closer {
			return nil
		}
		var name string
		switch t.kind {
		case tokWord:
			name = string(f.sc.src[t.start:t.end])
		case '[':
			if name, err = f.sc.typeName(); err != nil {
				return err
			}
		default:
			return f.sc.errorAt(t.start, "expected a field name")
		}
		var fd protoreflect.FieldDescriptor
		if md != nil && t.kind == tokWord {
			if n, err := strconv.ParseInt(name, 10, 32); err == nil {
				fd = md.Fields().ByNumber(protoreflect.FieldNumber(n))
			} else {
				fd = md.Fields().ByTextName(name)
			}
		}
		fieldPath := path
		if fd == nil || !md.IsMapEntry() { // a map's key and value are not path steps
			fieldPath = joinPath(path, name)
		}
		if p, err := f.sc.peek(); err != nil {
			return err
		} else if p.kind == ':' {
			f.sc.next()
		}
		var sub protoreflect.MessageDescriptor
		if fd != nil {
			sub = fd.Message()
		}
		if err := f.value(sub, fieldPath); err != nil {
			return err
		}
		if p, err := f.sc.peek(); err != nil {
			return err
		} else if p.kind == ',' || p.kind == ';' {
			f.sc.next()
		}
		if md != nil && fd == nil {
			f.ignored = append(f.ignored, ignoredField{path: fieldPath, start: t.start, end: f.sc.pos})
		}
	}
}

// value reads one field value: a message, a list, or a scalar.
func (f *unknownFieldFinder) value(md protoreflect.MessageDescriptor, path string) error {
	t, err := f.sc.next()
	if err != nil {
		return err
	}
	switch t.kind {
	case '{':
		return f.message(md, path, '}')
	case '<':
		return f.message(md, path, '>')
	case '[':
		for {
			p, err := f.sc.peek()
			if err != nil {
				return err
			}
			switch p.kind {
			case ']':
				f.sc.next()
				return nil
			case ',':
				f.sc.next()
			default:
				if err := f.value(md, path); err != nil {
					return err
				}
			}
		}
	default:
		return f.scalar(t)
	}
}

// scalar finishes a scalar value that starts with t.
func (f *unknownFieldFinder) scalar(t token) error {
	switch t.kind {
	case tokWord:
		if string(f.sc.src[t.start:t.end]) == "-" { // "- 5": a sign, spaces, a number
			n, err := f.sc.next()
			if err != nil {
				return err
			}
			if n.kind != tokWord {
				return f.sc.errorAt(n.start, "expected a number after '-'")
			}
		}
		return nil
	case tokString: // adjacent strings are one value
		for {
			p, err := f.sc.peek()
			if err != nil {
				return err
			}
			if p.kind != tokString {
				return nil
			}
			f.sc.next()
		}
	default:
		return f.sc.errorAt(t.start, "expected a value")
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
