package mapped

// chunkLen is the length of a chunk of a streamed initial state.
const chunkLen = 4096

// chunks holds an initial state as it arrives, in chunks, so that growing
// it never copies it.
type chunks[T any] struct {
	all [][]T
	n   int
}

func (c *chunks[T]) add(v T) {
	if len(c.all) == 0 || len(c.all[len(c.all)-1]) == chunkLen {
		c.all = append(c.all, make([]T, 0, chunkLen))
	}
	last := &c.all[len(c.all)-1]
	*last = append(*last, v)
	c.n++
}

// drain calls f on each value in the order added, and lets go of each
// chunk once it is done with it.
func (c *chunks[T]) drain(f func(*T)) {
	for i, chunk := range c.all {
		for j := range chunk {
			f(&chunk[j])
		}
		c.all[i] = nil
	}
	c.all, c.n = nil, 0
}
