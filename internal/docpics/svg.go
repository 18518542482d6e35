// Package docpics draws the documentation's pictures (docs/img/*.svg) from
// code: boxes, arrows and labels placed by hand on a grid, written as plain
// SVG. `make docs` writes them; test/docs fails when a committed picture
// differs from what this package draws, so a picture is changed here, not
// in the SVG.
package docpics

import (
	"fmt"
	"html"
	"sort"
	"strings"
)

// canvas collects SVG elements in drawing order.
type canvas struct {
	w, h int
	b    strings.Builder
}

func newCanvas(w, h int, title string) *canvas {
	c := &canvas{w: w, h: h}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="13">`+"\n", w, h, w, h)
	fmt.Fprintf(&c.b, "<title>%s</title>\n", html.EscapeString(title))
	c.b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>` + "\n")
	fmt.Fprintf(&c.b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	return c
}

// box draws a rounded rectangle with a bold first line and plain lines
// under it, centred.
func (c *canvas) box(x, y, w, h int, fill string, lines ...string) {
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="#333" stroke-width="1.2"/>`+"\n", x, y, w, h, fill)
	top := y + h/2 - (len(lines)-1)*8
	for i, l := range lines {
		weight := ""
		if i == 0 {
			weight = ` font-weight="bold"`
		}
		c.text(x+w/2, top+i*16+4, "middle", weight, l)
	}
}

// text writes one line; anchor is start, middle or end.
func (c *canvas) text(x, y int, anchor, attrs, s string) {
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" text-anchor="%s"%s>%s</text>`+"\n", x, y, anchor, attrs, html.EscapeString(s))
}

// note writes small grey lines starting at x, y.
func (c *canvas) note(x, y int, anchor string, lines ...string) {
	for i, l := range lines {
		c.text(x, y+i*14, anchor, ` font-size="11" fill="#555"`, l)
	}
}

// arrow draws a line from (x1, y1) to (x2, y2) with a head at the end
// (and at the start too when both), labelled at its middle.
func (c *canvas) arrow(x1, y1, x2, y2 int, both bool, label ...string) {
	start := ""
	if both {
		start = ` marker-start="url(#arrow)"`
	}
	fmt.Fprintf(&c.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="1.2" marker-end="url(#arrow)"%s/>`+"\n", x1, y1, x2, y2, start)
	if len(label) > 0 {
		mx, my := (x1+x2)/2, (y1+y2)/2
		anchor := "middle"
		if x1 == x2 {
			mx += 6
			anchor = "start"
		} else {
			my -= 6 + (len(label)-1)*14
		}
		c.note(mx, my, anchor, label...)
	}
}

// path draws an arrow along the points, labelled near the point at index at.
func (c *canvas) path(points [][2]int, dashed bool) {
	var d strings.Builder
	for i, p := range points {
		op := "L"
		if i == 0 {
			op = "M"
		}
		fmt.Fprintf(&d, "%s%d,%d ", op, p[0], p[1])
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="5,4"`
	}
	fmt.Fprintf(&c.b, `<path d="%s" fill="none" stroke="#333" stroke-width="1.2" marker-end="url(#arrow)"%s/>`+"\n", strings.TrimSpace(d.String()), dash)
}

// circle draws a filled circle with an outline.
func (c *canvas) circle(x, y, r int, fill string) {
	fmt.Fprintf(&c.b, `<circle cx="%d" cy="%d" r="%d" fill="%s" stroke="#333" stroke-width="1.2"/>`+"\n", x, y, r, fill)
}

// rect draws a plain rectangle, optionally dashed.
func (c *canvas) rect(x, y, w, h int, fill string, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6,4"`
	}
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="#333" stroke-width="1.2"%s/>`+"\n", x, y, w, h, fill, dash)
}

func (c *canvas) svg() []byte {
	return []byte(c.b.String() + "</svg>\n")
}

// Pictures maps each picture's file name under docs/img to the function
// that draws it.
var Pictures = map[string]func() []byte{
	"components.svg": Components,
	"blade.svg":      Blade,
	"modes.svg":      Modes,
}

// Names returns the pictures' file names in order.
func Names() []string {
	var n []string
	for k := range Pictures {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
