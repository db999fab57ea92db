// Package textcut shortens text for prompts, events and logs: one meaning of
// "cut" for the whole service — at most n characters (runes, never bytes,
// so UTF-8 stays whole), the ellipsis that marks the cut counted in.
package textcut

import "unicode/utf8"

// Ellipsis marks where text was cut.
const Ellipsis = "…"

// Cut returns s when it has at most n characters, else its first n-1 and
// an ellipsis (n characters in all; just the ellipsis when n ≤ 1).
func Cut(s string, n int) string {
	out, _ := CutReport(s, n)
	return out
}

// CutReport is Cut, and reports whether it cut.
func CutReport(s string, n int) (string, bool) {
	if len(s) <= n || utf8.RuneCountInString(s) <= n { // bytes ≥ runes
		return s, false
	}
	if n <= 1 {
		return Ellipsis, true
	}
	kept := 0
	for i := range s {
		if kept == n-1 {
			return s[:i] + Ellipsis, true
		}
		kept++
	}
	return s, false // not reached: s has more than n runes
}
