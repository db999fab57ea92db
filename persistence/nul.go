package persistence

import (
	"bytes"
	"strings"
)

// Text with NUL characters.
//
// PostgreSQL refuses a NUL byte in text ("invalid byte sequence for encoding
// UTF8: 0x00") and the JSON escape \u0000 in jsonb ("unsupported Unicode
// escape sequence"); SQLite stores both. Text that users send is refused at
// the API, but text that models and tools produce is stored faithfully, on
// both drivers alike: every value written is escaped, every value read is
// unescaped (see nulSafeConnector), with an escape that round-trips
// exactly and leaves text without NUL as it is.
//
// The escape character is U+E000, the first code point of Unicode's
// private use area (UTF-8 EE 80 80), written E here:
//
//	NUL (a zero byte)      → E '0'
//	E                      → E E
//	\u0000 (JSON escape)   → E 'j'
//	\ue000 / \uE000        → E 'u' / E 'U'
//
// The two JSON escapes are only replaced where their backslash starts an
// escape (it follows an even run of backslashes), so valid JSON stays valid
// JSON with the same value and no \u0000 that jsonb would refuse; in plain
// text the mapping is just as reversible. \ue000 is escaped because jsonb
// turns it into a raw E, which unescaping would otherwise misread.

// escapeMark is the escape character, U+E000.
const escapeMark = "\uE000"

// needsEscape reports whether b holds a byte that may start something
// escapeText changes: a NUL, the first byte of E, or a backslash.
func needsEscape[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case 0, escapeMark[0], '\\':
			return true
		}
	}
	return false
}

// escapeText escapes b for storage; it returns b itself when nothing
// changes.
func escapeText[T string | []byte](b T) T {
	if !needsEscape(b) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + 8)
	changed := false
	for i := 0; i < len(b); {
		switch {
		case b[i] == 0:
			out.WriteString(escapeMark + "0")
			i++
			changed = true
		case hasPrefix(b[i:], escapeMark):
			out.WriteString(escapeMark + escapeMark)
			i += len(escapeMark)
			changed = true
		case b[i] == '\\':
			run := 0
			for i+run < len(b) && b[i+run] == '\\' {
				run++
			}
			// Pairs are escaped backslashes; an odd one out escapes what
			// follows it.
			out.WriteString(strings.Repeat(`\`, run-run%2))
			i += run - run%2
			if run%2 == 0 {
				continue
			}
			switch rest := b[i:]; {
			case hasPrefix(rest, `\u0000`):
				out.WriteString(escapeMark + "j")
				i += 6
				changed = true
			case hasPrefix(rest, `\ue000`):
				out.WriteString(escapeMark + "u")
				i += 6
				changed = true
			case hasPrefix(rest, `\uE000`):
				out.WriteString(escapeMark + "U")
				i += 6
				changed = true
			default:
				out.WriteByte('\\')
				i++
			}
		default:
			out.WriteByte(b[i])
			i++
		}
	}
	if !changed {
		return b
	}
	return T(out.Bytes())
}

// unescapeText reverses escapeText; it returns b itself when it holds no
// escape. An E that starts no escape (text written before escaping
// existed) is kept as it is.
func unescapeText[T string | []byte](b T) T {
	if !contains(b, escapeMark) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b))
	for i := 0; i < len(b); {
		if !hasPrefix(b[i:], escapeMark) {
			out.WriteByte(b[i])
			i++
			continue
		}
		next := b[i+len(escapeMark):]
		switch {
		case hasPrefix(next, escapeMark):
			out.WriteString(escapeMark)
			i += 2 * len(escapeMark)
		case hasPrefix(next, "0"):
			out.WriteByte(0)
			i += len(escapeMark) + 1
		case hasPrefix(next, "j"):
			out.WriteString(`\u0000`)
			i += len(escapeMark) + 1
		case hasPrefix(next, "u"):
			out.WriteString(`\ue000`)
			i += len(escapeMark) + 1
		case hasPrefix(next, "U"):
			out.WriteString(`\uE000`)
			i += len(escapeMark) + 1
		default:
			out.WriteString(escapeMark)
			i += len(escapeMark)
		}
	}
	return T(out.Bytes())
}

func hasPrefix[T string | []byte](b T, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

func contains[T string | []byte](b T, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if b[i] == sub[0] && hasPrefix(b[i:], sub) {
			return true
		}
	}
	return false
}
