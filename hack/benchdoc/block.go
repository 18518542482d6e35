package main

import (
	"fmt"
	"strings"
)

// Begin and End are the marker lines around the block called name.
func Begin(name string) string { return "<!-- BEGIN GENERATED " + name + " -->" }

// End is the line that closes the block called name.
func End(name string) string { return "<!-- END GENERATED " + name + " -->" }

// Replace returns doc with the lines between the markers of block name
// replaced by body. Every line outside the block, the markers included, is
// kept byte for byte. It fails if the markers are missing, repeated or out
// of order.
func Replace(doc, name, body string) (string, error) {
	if name == "" || strings.ContainsAny(name, " \n") {
		return "", fmt.Errorf("block name %q: want one word", name)
	}
	lines := strings.SplitAfter(doc, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimRight(l, "\r\n") {
		case Begin(name):
			if begin >= 0 {
				return "", fmt.Errorf("block %s begins twice (lines %d and %d)", name, begin+1, i+1)
			}
			begin = i
		case End(name):
			if end >= 0 {
				return "", fmt.Errorf("block %s ends twice (lines %d and %d)", name, end+1, i+1)
			}
			end = i
		}
	}
	switch {
	case begin < 0 && end < 0:
		return "", fmt.Errorf("no block %s: add the lines %q and %q where it goes", name, Begin(name), End(name))
	case begin < 0:
		return "", fmt.Errorf("block %s has an end (line %d) but no beginning", name, end+1)
	case end < 0:
		return "", fmt.Errorf("block %s begins (line %d) but does not end", name, begin+1)
	case end < begin:
		return "", fmt.Errorf("block %s ends (line %d) before it begins (line %d)", name, end+1, begin+1)
	}
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	var b strings.Builder
	for _, l := range lines[:begin+1] {
		b.WriteString(l)
	}
	if !strings.HasSuffix(lines[begin], "\n") {
		b.WriteString("\n")
	}
	b.WriteString(body)
	for _, l := range lines[end:] {
		b.WriteString(l)
	}
	return b.String(), nil
}
