package client

import "slices"

// SilentReplicas lists the addresses c's silence bound holds silent now.
func SilentReplicas(c *Client) []string {
	if c.wd == nil {
		return nil
	}
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	var s []string
	for a := range c.wd.silent {
		s = append(s, a)
	}
	slices.Sort(s)
	return s
}
