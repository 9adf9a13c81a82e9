package nginxconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Pos is where a directive was written: the file as the user named it and
// the line, counted from 1.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Directive is one nginx directive: its name, its arguments with quotes
// removed, and, for a block directive, the directives inside it.
type Directive struct {
	Name  string
	Args  []string
	Block []*Directive // nil unless IsBlock
	// IsBlock is set for a directive written with braces, even empty ones.
	IsBlock bool
	Pos     Pos
}

// Error is bad input, at the place in the nginx configuration it was found.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errorf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// maxIncludeDepth bounds include nesting, so that a file including itself
// is an error, not a hang.
const maxIncludeDepth = 32

// source reads the configuration's files. Names are slash-separated and
// relative to the directory of the main file, which is where nginx resolves
// a relative include (its configuration prefix); display joins a name to
// the directory as the user wrote it, for messages.
type source struct {
	fsys fs.FS
	dir  string // the main file's directory as given; "" for an fs.FS
	os   bool   // absolute includes are read from the host's file system
}

func (s *source) display(name string) string {
	if s.dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.dir, filepath.FromSlash(name))
}

func (s *source) readFile(name string) ([]byte, error) {
	if path.IsAbs(name) {
		if !s.os {
			return nil, fs.ErrNotExist
		}
		return os.ReadFile(name)
	}
	return fs.ReadFile(s.fsys, name)
}

func (s *source) glob(pattern string) ([]string, error) {
	if path.IsAbs(pattern) {
		if !s.os {
			return nil, nil
		}
		m, err := filepath.Glob(pattern)
		return m, err
	}
	return fs.Glob(s.fsys, pattern)
}

// ParseFile reads the nginx configuration file at name and every file it
// includes, and returns its directives.
func ParseFile(name string) ([]*Directive, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	s := &source{fsys: os.DirFS(filepath.Dir(abs)), dir: filepath.Dir(name), os: true}
	return s.parse(filepath.Base(name), Pos{}, 0)
}

// ParseFS reads the nginx configuration file name of fsys and the files it
// includes (relative includes are names in fsys).
func ParseFS(fsys fs.FS, name string) ([]*Directive, error) {
	s := &source{fsys: fsys}
	return s.parse(name, Pos{}, 0)
}

// parse reads one file; from is the include directive that named it.
func (s *source) parse(name string, from Pos, depth int) ([]*Directive, error) {
	if depth > maxIncludeDepth {
		return nil, errorf(from, "include %s: nested more than %d deep (does a file include itself?)", name, maxIncludeDepth)
	}
	data, err := s.readFile(name)
	if err != nil {
		if from.File == "" {
			return nil, err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(from, "include %s: no such file", name)
		}
		return nil, errorf(from, "include %s: %v", name, err)
	}
	p := &parser{lex: lexer{src: string(data), file: s.display(name), line: 1}, s: s, depth: depth}
	ds, err := p.block(false)
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// parser turns the tokens of one file into directives, expanding includes.
type parser struct {
	lex   lexer
	s     *source
	depth int
}

// block reads directives up to the closing brace (inner) or the end of the
// file.
func (p *parser) block(inner bool) ([]*Directive, error) {
	out := []*Directive{}
	for {
		t, err := p.lex.next()
		if err != nil {
			return nil, err
		}
		switch {
		case t.kind == tokEOF:
			if inner {
				return nil, errorf(t.pos, `unexpected end of file, expecting "}"`)
			}
			return out, nil
		case t.kind == tokClose:
			if !inner {
				return nil, errorf(t.pos, `unexpected "}"`)
			}
			return out, nil
		case t.kind != tokWord:
			return nil, errorf(t.pos, "unexpected %q", t.text)
		}
		// A quoted first token is no error: nginx strips quotes before it
		// looks a name up, and the entries of map, types, geo and
		// split_clients blocks are values ('' close;), not directives.
		d := &Directive{Name: t.text, Pos: t.pos}
	args:
		for {
			a, err := p.lex.next()
			if err != nil {
				return nil, err
			}
			switch a.kind {
			case tokWord:
				d.Args = append(d.Args, a.text)
			case tokSemi:
				break args
			case tokOpen:
				d.IsBlock = true
				if d.Block, err = p.block(true); err != nil {
					return nil, err
				}
				break args
			case tokClose:
				return nil, errorf(a.pos, `unexpected "}": directive %q is not terminated by ";"`, d.Name)
			case tokEOF:
				return nil, errorf(a.pos, `unexpected end of file: directive %q is not terminated by ";"`, d.Name)
			}
		}
		if d.Name == "include" && !d.IsBlock {
			inc, err := p.include(d)
			if err != nil {
				return nil, err
			}
			out = append(out, inc...)
			continue
		}
		out = append(out, d)
	}
}

// include returns the directives of the files an include names: one file,
// or every match of a glob pattern in name order (none is no error, as in
// nginx).
func (p *parser) include(d *Directive) ([]*Directive, error) {
	if len(d.Args) != 1 {
		return nil, errorf(d.Pos, "include: want one file name, have %d arguments", len(d.Args))
	}
	name := filepath.ToSlash(d.Args[0])
	if !path.IsAbs(name) {
		name = path.Clean(name)
	}
	names := []string{name}
	if strings.ContainsAny(name, "*?[") {
		m, err := p.s.glob(name)
		if err != nil {
			return nil, errorf(d.Pos, "include %s: %v", d.Args[0], err)
		}
		sort.Strings(m)
		names = m
	}
	var out []*Directive
	for _, n := range names {
		ds, err := p.s.parse(n, d.Pos, p.depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// Kinds of token.
const (
	tokEOF = iota
	tokWord
	tokSemi
	tokOpen
	tokClose
)

type token struct {
	kind int
	text string
	pos  Pos
}

// lexer splits nginx configuration text into tokens as nginx's
// ngx_conf_read_token does: words separated by white space, ";", "{" and
// "}", "#" comments to the end of the line, single- or double-quoted
// strings with backslash escapes, and "${name}" inside a word.
type lexer struct {
	src  string
	i    int
	file string
	line int
}

func (l *lexer) pos() Pos { return Pos{File: l.file, Line: l.line} }

func (l *lexer) next() (token, error) {
	// Skip white space and comments.
	for l.i < len(l.src) {
		c := l.src[l.i]
		if c == '\n' {
			l.line++
			l.i++
		} else if c == ' ' || c == '\t' || c == '\r' {
			l.i++
		} else if c == '#' {
			for l.i < len(l.src) && l.src[l.i] != '\n' {
				l.i++
			}
		} else {
			break
		}
	}
	start := l.pos()
	if l.i >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	switch c := l.src[l.i]; c {
	case ';':
		l.i++
		return token{kind: tokSemi, text: ";", pos: start}, nil
	case '{':
		l.i++
		return token{kind: tokOpen, text: "{", pos: start}, nil
	case '}':
		l.i++
		return token{kind: tokClose, text: "}", pos: start}, nil
	case '"', '\'':
		return l.quoted(c, start)
	}
	var b strings.Builder
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '}':
			return token{kind: tokWord, text: b.String(), pos: start}, nil
		case c == '{':
			// "${" opens a variable name; any other "{" ends the word.
			if b.Len() > 0 && strings.HasSuffix(b.String(), "$") {
				end := strings.IndexByte(l.src[l.i:], '}')
				if end < 0 {
					return token{}, errorf(l.pos(), `unterminated "${" in %q`, b.String())
				}
				b.WriteString(l.src[l.i : l.i+end+1])
				l.i += end + 1
				continue
			}
			return token{kind: tokWord, text: b.String(), pos: start}, nil
		case c == '\\' && l.i+1 < len(l.src):
			// An escaped character does not end the word.
			l.i = escape(l.src, l.i, &b)
		case c == '"' || c == '\'':
			return token{}, errorf(l.pos(), "unexpected quote %q inside %q", string(c), b.String())
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return token{kind: tokWord, text: b.String(), pos: start}, nil
}

// escape writes the backslash sequence at src[i] as nginx reads it, in a
// quoted string or not: \t, \r and \n are the characters, an escaped quote
// or backslash is itself, and any other backslash stays; it returns the
// index after the sequence.
func escape(src string, i int, b *strings.Builder) int {
	switch n := src[i+1]; n {
	case '"', '\'', '\\':
		b.WriteByte(n)
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'n':
		b.WriteByte('\n')
	default:
		b.WriteByte('\\')
		b.WriteByte(n)
	}
	return i + 2
}

// quoted reads a quoted string.
func (l *lexer) quoted(q byte, start Pos) (token, error) {
	l.i++
	var b strings.Builder
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == q:
			l.i++
			if l.i < len(l.src) {
				if n := l.src[l.i]; n != ' ' && n != '\t' && n != '\r' && n != '\n' && n != ';' && n != '{' && n != '}' {
					return token{}, errorf(l.pos(), "unexpected %q after the quoted string %q", string(n), b.String())
				}
			}
			return token{kind: tokWord, text: b.String(), pos: start}, nil
		case c == '\\' && l.i+1 < len(l.src):
			if l.src[l.i+1] == '\n' {
				l.line++
			}
			l.i = escape(l.src, l.i, &b)
		default:
			if c == '\n' {
				l.line++
			}
			b.WriteByte(c)
			l.i++
		}
	}
	return token{}, errorf(start, "unterminated quoted string")
}
