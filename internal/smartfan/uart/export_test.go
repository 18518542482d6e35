package uart

import "github.com/kubeblade/kubeblade/internal/smartfan"

// Observe lets tests see every frame the client applied, in order; set it
// before Run.
func Observe(c *Client, f func(smartfan.Frame)) { c.observe = f }
