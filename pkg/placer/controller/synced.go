package controller

// HasSynced reports whether every informer the controller reads has listed its objects once:
// false before Run starts them (a replica waiting on the Lease) and until their first lists
// are in. The placer's /readyz reports it.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return len(c.synced) > 0
}
